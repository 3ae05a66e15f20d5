//! A real third-party agent behind `fanout proxy`: Zed's Claude Code ACP adapter
//! (`@zed-industries/claude-agent-acp`, which bundles the Claude Code CLI as JavaScript),
//! fully offline. Its model is a mock of the Anthropic Messages API written here: the
//! main agent is told to call the `Agent` tool, the subagent it launches reads a file
//! with `Read`, answers, and the main agent ends its turn.
//!
//! The agent is installed (cached) by `tools/test-agents/claude/install.sh`. Under
//! `CI=true` a missing Node.js or a failed install is a failure; elsewhere the test
//! skips with a message.

mod proxy_support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use proxy_support::{
    Running, fanout, only_transcript, sqlite_texts, transcript_lines, write_script,
};
use serde_json::{Value, json};

const AGENT_CALL_ID: &str = "toolu_01FANOUTAGENT";
const READ_CALL_ID: &str = "toolu_01FANOUTREAD";
const PARENT_MARKER: &str = "FANOUT-PARENT-PROMPT";
const CHILD_MARKER: &str = "FANOUT-CHILD-PROMPT";

/// The installed agent's executable, or `None` (skip) where that is allowed.
fn installed_agent() -> Option<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let installer = repo.join("tools/test-agents/claude/install.sh");
    let output = std::process::Command::new("bash").arg(&installer).output();
    let failure = match output {
        Ok(out) if out.status.success() => {
            let stdout = String::from_utf8_lossy(&out.stdout);
            let dir = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
            let bin = dir.join("node_modules/.bin/claude-agent-acp");
            if bin.exists() && which("node") {
                return Some(bin);
            }
            format!("{} is missing or node is not on PATH", bin.display())
        }
        Ok(out) => format!(
            "{} failed ({}): {}",
            installer.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(error) => format!("cannot run {}: {error}", installer.display()),
    };
    fanout_types::skip_unless_ci("the Claude ACP end-to-end test", failure);
    None
}

fn which(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

// ---------------------------------------------------------------------------------
// The mock Anthropic Messages API.

#[derive(Default)]
struct MockState {
    /// The file the subagent reads.
    notes: String,
    /// `METHOD path -> what was answered`, for the failure message.
    log: Vec<String>,
}

type Mock = Arc<Mutex<MockState>>;

fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|event| {
            format!(
                "event: {}\ndata: {event}\n\n",
                event["type"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// One streamed assistant message with one content block.
fn streamed(model: &str, block: Value, delta: Value, stop_reason: &str) -> String {
    sse(&[
        json!({"type": "message_start", "message": {"id": "msg_fanout", "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 12, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": block}),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": 7}}),
        json!({"type": "message_stop"}),
    ])
}

fn text_reply(model: &str, text: &str) -> String {
    streamed(
        model,
        json!({"type": "text", "text": ""}),
        json!({"type": "text_delta", "text": text}),
        "end_turn",
    )
}

fn tool_reply(model: &str, id: &str, name: &str, input: Value) -> String {
    streamed(
        model,
        json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
        json!({"type": "input_json_delta", "partial_json": input.to_string()}),
        "tool_use",
    )
}

/// Which conversation a request belongs to and what it should get next.
fn script(state: &MockState, body: &Value) -> (&'static str, String) {
    let model = body["model"].as_str().unwrap_or("claude-mock");
    let messages = body["messages"].to_string();
    let first = body["messages"][0].to_string();
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    if first.contains(CHILD_MARKER) {
        if messages.contains(READ_CALL_ID) {
            (
                "subagent: final text",
                text_reply(model, "The notes say hello."),
            )
        } else {
            let input = json!({"file_path": state.notes});
            (
                "subagent: Read",
                tool_reply(model, READ_CALL_ID, "Read", input),
            )
        }
    } else if messages.contains(PARENT_MARKER) && tools.contains(&"Agent") {
        if messages.contains(AGENT_CALL_ID) {
            ("main: final text", text_reply(model, "Delegated and done."))
        } else {
            let input = json!({"description": "Inspect notes",
                "prompt": format!("{CHILD_MARKER}: read notes.txt and report"),
                "subagent_type": "general-purpose"});
            (
                "main: Agent",
                tool_reply(model, AGENT_CALL_ID, "Agent", input),
            )
        }
    } else {
        ("other: text", text_reply(model, "ok"))
    }
}

async fn mock_api(State(mock): State<Mock>, method: Method, uri: Uri, body: Bytes) -> Response {
    let path = uri.path().to_owned();
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut state = mock.lock().unwrap();
    let (what, response) = match (method.as_str(), path.as_str()) {
        ("HEAD", _) => ("reachability", StatusCode::OK.into_response()),
        ("POST", p) if p.ends_with("/count_tokens") => (
            "count_tokens",
            axum::Json(json!({"input_tokens": 12})).into_response(),
        ),
        ("POST", "/v1/messages") if request["stream"] == true => {
            let (what, events) = script(&state, &request);
            let response = (
                [
                    (header::CONTENT_TYPE, "text/event-stream"),
                    (header::CACHE_CONTROL, "no-cache"),
                ],
                events,
            )
                .into_response();
            (what, response)
        }
        ("POST", "/v1/messages") => (
            "non-streaming text",
            axum::Json(
                json!({"id": "msg_fanout", "type": "message", "role": "assistant",
                "model": request["model"], "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 1, "output_tokens": 1}}),
            )
            .into_response(),
        ),
        _ => {
            eprintln!("mock Anthropic API: unexpected {method} {uri}");
            ("unexpected", axum::Json(json!({})).into_response())
        }
    };
    state.log.push(format!("{method} {path} -> {what}"));
    response
}

async fn start_mock(notes: &Path) -> (String, Mock) {
    let mock: Mock = Arc::new(Mutex::new(MockState {
        notes: notes.display().to_string(),
        log: Vec::new(),
    }));
    let app = axum::Router::new()
        .fallback(mock_api)
        .with_state(Arc::clone(&mock));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}"), mock)
}

// ---------------------------------------------------------------------------------
// A small ACP client over the proxy's pipes.

struct AcpClient {
    proxy: Running,
    /// Bytes of stdout already looked at.
    read: usize,
    next_id: u64,
}

impl AcpClient {
    fn send(&mut self, message: &Value) {
        let line = format!("{message}\n");
        assert!(
            self.proxy.write(line.as_bytes()),
            "the proxy stopped reading"
        );
    }

    /// Sends a request and returns its response, answering the agent's own requests
    /// meanwhile (permission requests are allowed; anything else is "not supported").
    fn request(&mut self, method: &str, params: Value, limit: Duration) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + limit;
        loop {
            let out = self.proxy.stdout();
            if let Some(end) = out[self.read..].iter().position(|b| *b == b'\n') {
                let line = out[self.read..self.read + end].to_vec();
                self.read += end + 1;
                let message: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
                if message["id"] == id && message.get("method").is_none() {
                    return message;
                }
                if let Some(request) = message["method"]
                    .as_str()
                    .filter(|_| message.get("id").is_some())
                {
                    let reply = if request == "session/request_permission" {
                        let allow = message["params"]["options"]
                            .as_array()
                            .and_then(|options| {
                                options.iter().find(|o| {
                                    o["kind"].as_str().is_some_and(|k| k.starts_with("allow"))
                                })
                            })
                            .map(|o| o["optionId"].clone())
                            .unwrap_or(Value::Null);
                        json!({"jsonrpc": "2.0", "id": message["id"],
                            "result": {"outcome": {"outcome": "selected", "optionId": allow}}})
                    } else {
                        json!({"jsonrpc": "2.0", "id": message["id"],
                            "error": {"code": -32601, "message": "not supported by the test client"}})
                    };
                    self.send(&reply);
                }
                continue;
            }
            assert!(
                Instant::now() < deadline,
                "no response to {method} within {limit:?}\nstderr: {}",
                self.proxy.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_behind_the_proxy_records_its_subagent() {
    let Some(agent) = installed_agent() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let notes = work.join("notes.txt");
    std::fs::write(&notes, "hello notes\n").unwrap();
    let (base_url, mock) = start_mock(&notes).await;

    // The agent's stdout goes through tee: what it wrote is kept, to compare with what
    // the client received through the proxy.
    let agent_wrote = dir.path().join("agent-stdout.bin");
    let wrapper = dir.path().join("agent.sh");
    write_script(
        &wrapper,
        &format!(
            "#!/bin/sh\n'{}' | tee '{}'\n",
            agent.display(),
            agent_wrote.display()
        ),
    );
    let db = format!("sqlite://{}", dir.path().join("fanout.db").display());
    let transcripts = dir.path().join("transcripts");
    let mut command = fanout(&dir.path().join("data"));
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("FANOUT_DATA_DIR", dir.path().join("data"))
        .env("FANOUT_LOG", "warn")
        .env("HOME", &home)
        .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
        .env("ANTHROPIC_BASE_URL", &base_url)
        .env("ANTHROPIC_API_KEY", "sk-ant-fanout-test-not-a-key")
        .env("DISABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        // Claude Code refuses to run as root outside a sandbox; CI runs as root.
        .env("IS_SANDBOX", "1")
        .current_dir(&work)
        .args([
            "proxy",
            "--eof-grace-secs",
            "2",
            "--db",
            &db,
            "--transcript-dir",
        ])
        .arg(&transcripts)
        .arg("--")
        .arg(&wrapper);
    let mut client = AcpClient {
        proxy: Running::start(command),
        read: 0,
        next_id: 0,
    };

    let limit = Duration::from_secs(120);
    let init = tokio::task::block_in_place(|| {
        client.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}}}),
            limit,
        )
    });
    assert!(init["result"]["protocolVersion"].is_number(), "{init}");
    let session = tokio::task::block_in_place(|| {
        client.request("session/new", json!({"cwd": work, "mcpServers": []}), limit)
    });
    let acp_session = session["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new failed: {session}"))
        .to_owned();
    let prompt = tokio::task::block_in_place(|| {
        client.request(
            "session/prompt",
            json!({"sessionId": acp_session, "prompt": [{"type": "text",
                "text": format!("{PARENT_MARKER}: delegate reading notes.txt to a subagent")}]}),
            limit,
        )
    });
    let log = mock.lock().unwrap().log.join("\n");
    assert_eq!(
        prompt["result"]["stopReason"], "end_turn",
        "{prompt}\nmock:\n{log}"
    );
    for step in [
        "main: Agent",
        "subagent: Read",
        "subagent: final text",
        "main: final text",
    ] {
        assert!(
            log.contains(step),
            "the mock never answered {step:?}:\n{log}"
        );
    }

    let done = tokio::task::block_in_place(|| client.proxy.finish(Duration::from_secs(60)));
    assert!(
        matches!(done.code(), Some(0 | 143)),
        "exit {:?}\nstderr: {}",
        done.status,
        done.stderr
    );
    // Exactly the bytes the agent wrote, nothing added, nothing lost.
    let wrote = std::fs::read(&agent_wrote).unwrap();
    assert!(!wrote.is_empty());
    assert!(
        done.stdout == wrote,
        "client got {} bytes, agent wrote {}",
        done.stdout.len(),
        wrote.len()
    );

    // The subagent row.
    let transcript = only_transcript(&transcripts);
    let execution = transcript_lines(&transcript)[0]["executionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let session_row = fanout_capture::session_row_id(&execution, &acp_session);
    let store = fanout_store::SqlStore::open(&db).await.unwrap();
    let rows = store.subagents_by_session(&session_row).await.unwrap();
    store.close().await;
    assert_eq!(rows.len(), 1, "{rows:#?}");
    let row = &rows[0];
    assert_eq!(row.tool_call_id, AGENT_CALL_ID);
    assert_eq!(row.subagent_type.as_deref(), Some("general-purpose"));
    assert_eq!(row.description.as_deref(), Some("Inspect notes"));
    assert_eq!(row.tool_status.as_deref(), Some("completed"));
    assert!(row.settled_at.is_some(), "{row:#?}");
    assert_eq!(row.agent_execution_id, execution);
    assert_eq!(row.parent_tool_call_id, None);
    assert!(
        row.agent_id.as_deref().is_some_and(|id| !id.is_empty()),
        "{row:#?}"
    );
    assert_eq!(row.tool_use_count, Some(1), "{row:#?}");

    // The child's Read call is a message nested under the Agent call, never a row.
    let parents = sqlite_texts(
        &db,
        &format!(
            "SELECT json_extract(metadata, '$.parent_tool_call_id') FROM task_session_messages \
             WHERE json_extract(metadata, '$.tool_call_id') = '{READ_CALL_ID}'"
        ),
    )
    .await;
    assert_eq!(parents, vec![Some(AGENT_CALL_ID.to_owned())]);

    // `fanout import` of the proxy's transcript writes the same rows.
    proxy_support::assert_import_reproduces(dir.path(), &db, &transcript).await;
}
