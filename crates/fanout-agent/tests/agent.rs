//! The agent in-process over an in-memory pipe: bad input, broken model
//! streams, tool errors, the depth limit, cancellation, and what a client
//! without the subagents capability sees.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fanout_agent::model::scripted::{Script, ScriptedProvider};
use fanout_agent::model::{Chunk, ChunkStream};
use fanout_agent::{
    AgentConfig, AgentError, GenerateOptions, LanguageModel, ModelError, ModelRequest, serve,
};
use fanout_sessionlog::{Event, list_logs, read_log};
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};
use tokio::task::JoinHandle;

struct Client {
    tx: WriteHalf<DuplexStream>,
    rx: Lines<BufReader<ReadHalf<DuplexStream>>>,
    next_id: u64,
    task: JoinHandle<Result<(), AgentError>>,
}

impl Client {
    fn start(config: AgentConfig) -> Self {
        let (client, agent) = tokio::io::duplex(1 << 16);
        let (agent_read, agent_write) = tokio::io::split(agent);
        let task = tokio::spawn(serve(agent_read, agent_write, config));
        let (read, tx) = tokio::io::split(client);
        Self {
            tx,
            rx: BufReader::new(read).lines(),
            next_id: 0,
            task,
        }
    }

    async fn send_raw(&mut self, line: &str) {
        self.tx
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.rx.next_line())
            .await
            .expect("timed out waiting for the agent")
            .unwrap()
            .expect("agent closed its output");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("agent wrote a non-JSON line {line:?}: {e}"))
    }

    /// Sends a request; returns the notifications before its response, and the response.
    async fn request(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        self.next_id += 1;
        let id = self.next_id;
        self.send_raw(
            &json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}).to_string(),
        )
        .await;
        self.until_response(json!(id)).await
    }

    async fn until_response(&mut self, id: Value) -> (Vec<Value>, Value) {
        let mut notes = Vec::new();
        loop {
            let msg = self.recv().await;
            if msg.get("method").is_some() {
                notes.push(msg);
            } else {
                assert_eq!(msg["id"], id, "unexpected response {msg}");
                return (notes, msg);
            }
        }
    }

    async fn init(&mut self, subagents: bool) {
        let caps = if subagents {
            json!({"subagents": {}})
        } else {
            json!({})
        };
        let (_, resp) = self
            .request(
                "initialize",
                json!({"protocolVersion":1,"clientCapabilities":caps}),
            )
            .await;
        assert_eq!(resp["result"]["protocolVersion"], 1);
    }

    async fn new_session(&mut self, cwd: &Path) -> String {
        let (_, resp) = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        resp["result"]["sessionId"]
            .as_str()
            .expect("sessionId")
            .to_string()
    }

    async fn prompt(&mut self, session: &str, text: &str) -> (Vec<Value>, Value) {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type":"text","text":text}]}),
        )
        .await
    }

    async fn finish(mut self) {
        self.tx.shutdown().await.unwrap();
        drop(self.tx);
        if let Ok(Some(line)) = self.rx.next_line().await {
            panic!("unexpected output after EOF: {line}");
        }
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
}

fn config(model: Arc<dyn LanguageModel>, root: &Path, max_depth: u32) -> AgentConfig {
    AgentConfig {
        model,
        model_name: "test-model".into(),
        sessions_root: root.to_path_buf(),
        max_depth,
        max_tokens: 100,
        max_steps: 10,
        system_prompt: "test".into(),
    }
}

fn text(t: &str) -> Value {
    json!({"kind":"text_delta","text":t})
}
fn stop(reason: &str) -> Value {
    json!({"kind":"stop","stopReason":reason,"usage":{"inputTokens":10,"outputTokens":5}})
}
fn tool(id: &str, name: &str, args: &str) -> Vec<Value> {
    vec![
        json!({"kind":"tool_use_start","id":id,"name":name}),
        json!({"kind":"tool_use_delta","id":id,"partialJson":args}),
    ]
}
fn response(parts: Vec<Vec<Value>>) -> Value {
    Value::Array(parts.into_iter().flatten().collect())
}

fn scripted(sessions: Value) -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::new(
        Script::parse(&json!({"version":1,"sessions":sessions}).to_string()).unwrap(),
    ))
}

struct Workspace {
    _dir: tempfile::TempDir,
    cwd: PathBuf,
    root: PathBuf,
}

fn workspace() -> Workspace {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("project");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::write(cwd.join("a.txt"), "alpha").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "do not read").unwrap();
    let root = dir.path().join("sessions");
    Workspace {
        _dir: dir,
        cwd,
        root,
    }
}

fn updates<'a>(notes: &'a [Value], kind: &str) -> Vec<&'a Value> {
    notes
        .iter()
        .filter(|n| n["params"]["update"]["sessionUpdate"] == kind)
        .collect()
}

/// Asserts `resp` is a JSON-RPC error with `code` whose message contains `needle`.
fn assert_rpc_error(resp: &Value, code: i64, needle: &str) {
    assert_eq!(resp["error"]["code"], code, "{resp}");
    let message = resp["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(needle), "{needle:?} not in {resp}");
}

fn all_logs_valid(root: &Path) -> Vec<fanout_sessionlog::SessionLog> {
    list_logs(root)
        .unwrap()
        .iter()
        .map(|e| read_log(&e.path).unwrap())
        .collect()
}

#[tokio::test]
async fn bad_input_gets_jsonrpc_errors_and_the_agent_keeps_serving() {
    let ws = workspace();
    let model =
        scripted(json!([{"responses":[response(vec![vec![text("fine"), stop("end_turn")]])]}]));
    let mut c = Client::start(config(model, &ws.root, 3));

    c.send_raw("{this is not json").await;
    let msg = c.recv().await;
    assert_eq!(msg["error"]["code"], -32700);
    assert_eq!(msg["id"], Value::Null);

    c.send_raw("[1,2]").await;
    assert_eq!(c.recv().await["error"]["code"], -32600);

    c.send_raw(r#"{"jsonrpc":"2.0","method":"some/notification","params":{}}"#)
        .await;
    let (_, resp) = c.request("session/load", json!({"sessionId":"x"})).await;
    assert_rpc_error(&resp, -32601, "session/load");

    let (_, resp) = c
        .request("session/new", json!({"cwd":"relative/dir"}))
        .await;
    assert_rpc_error(&resp, -32602, "absolute");
    let (_, resp) = c.request("session/new", json!({"cwd": 7})).await;
    assert_eq!(resp["error"]["code"], -32602);
    let (_, resp) = c
        .request("session/new", json!({"cwd": ws.cwd.join("missing")}))
        .await;
    assert_eq!(resp["error"]["code"], -32602);

    let (_, resp) = c.prompt("no-such-session", "hi").await;
    assert_rpc_error(&resp, -32602, "unknown session: no-such-session");

    c.init(false).await;
    let session = c.new_session(&ws.cwd).await;
    let (_, resp) = c
        .request("session/prompt", json!({"sessionId": session}))
        .await;
    assert_rpc_error(&resp, -32602, "prompt");
    let (_, resp) = c.prompt(&session, "   ").await;
    assert_eq!(resp["error"]["code"], -32602);

    let (notes, resp) = c.prompt(&session, "hello").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert_eq!(
        updates(&notes, "agent_message_chunk")[0]["params"]["update"]["content"]["text"],
        "fine"
    );
    c.finish().await;
    assert_eq!(all_logs_valid(&ws.root).len(), 1);
}

#[tokio::test]
async fn a_broken_model_stream_is_a_jsonrpc_error_and_the_log_stays_valid() {
    let ws = workspace();
    let model = scripted(json!([{"responses":[
        [text("par"), {"kind":"error","message":"connection reset by peer"}],
        [text("no stop event")],
        [text("recovered"), stop("end_turn")],
    ]}]));
    let mut c = Client::start(config(model, &ws.root, 3));
    c.init(false).await;
    let session = c.new_session(&ws.cwd).await;

    let (_, resp) = c.prompt(&session, "one").await;
    assert_rpc_error(&resp, -32603, "connection reset by peer");
    let (_, resp) = c.prompt(&session, "two").await;
    assert_rpc_error(&resp, -32603, "without a stop event");
    let (_, resp) = c.prompt(&session, "three").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    c.finish().await;

    let logs = all_logs_valid(&ws.root);
    let kinds: Vec<&str> = logs[0].events.iter().map(Event::type_name).collect();
    assert_eq!(
        kinds,
        [
            "user/message",
            "model/request",
            "assistant/chunk",
            "model/error",
            "turn/end",
            "user/message",
            "model/request",
            "assistant/chunk",
            "model/error",
            "turn/end",
            "user/message",
            "model/request",
            "assistant/chunk",
            "assistant/chunk",
            "turn/end",
        ]
    );
    assert!(
        matches!(&logs[0].events[4], Event::TurnEnd { stop_reason, .. } if stop_reason == "error")
    );
    let responses = logs[0].recorded_responses();
    assert_eq!(responses.len(), 3);
    assert!(
        responses[0]
            .error
            .as_deref()
            .unwrap()
            .contains("connection reset")
    );
    assert_eq!(
        responses.iter().map(|r| r.ordinal).collect::<Vec<_>>(),
        [0, 1, 2]
    );
}

#[tokio::test]
async fn invalid_tool_arguments_and_escaping_paths_are_tool_errors() {
    let ws = workspace();
    let model = scripted(json!([{"responses":[
        response(vec![tool("t1", "read_file", "{\"path\": "), tool("t2", "read_file", "{\"path\":\"../secret.txt\"}"),
            tool("t3", "list_dir", "{}"), tool("t4", "delete_everything", "{}"), vec![stop("tool_use")]]),
        response(vec![vec![text("done"), stop("end_turn")]]),
    ]}]));
    let mut c = Client::start(config(model, &ws.root, 3));
    c.init(false).await;
    let session = c.new_session(&ws.cwd).await;
    let (notes, resp) = c.prompt(&session, "go").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");

    let finals: Vec<&Value> = updates(&notes, "tool_call_update")
        .into_iter()
        .map(|n| &n["params"]["update"])
        .filter(|u| u["status"] == "completed" || u["status"] == "failed")
        .collect();
    let result = |id: &str| {
        let u = finals.iter().find(|u| u["toolCallId"] == id).unwrap();
        (
            u["status"].as_str().unwrap().to_string(),
            u["content"][0]["content"]["text"]
                .as_str()
                .unwrap()
                .to_string(),
        )
    };
    let (status, text) = result("t1");
    assert_eq!(status, "failed");
    assert!(
        text.contains("invalid JSON arguments for read_file"),
        "{text}"
    );
    let (status, text) = result("t2");
    assert_eq!(status, "failed");
    assert!(text.contains("outside the session directory"), "{text}");
    let (status, text) = result("t3");
    assert_eq!(status, "completed");
    assert_eq!(text, "a.txt");
    let (status, text) = result("t4");
    assert_eq!(status, "failed");
    assert!(text.contains("unknown tool"), "{text}");
    let calls = updates(&notes, "tool_call");
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[0]["params"]["update"]["kind"], "read");
    assert_eq!(calls[0]["params"]["update"]["rawInput"], "{\"path\": ");
    c.finish().await;

    let log = &all_logs_valid(&ws.root)[0];
    let call = log
        .events
        .iter()
        .find(|e| matches!(e, Event::ToolCall { tool_call_id, .. } if tool_call_id == "t1"))
        .unwrap();
    assert!(
        matches!(call, Event::ToolCall { input: Value::String(raw), .. } if raw == "{\"path\": ")
    );
    let errors = log
        .events
        .iter()
        .filter(|e| matches!(e, Event::ToolResult { is_error: true, .. }))
        .count();
    assert_eq!(errors, 3);
}

#[tokio::test]
async fn nesting_beyond_max_depth_is_a_tool_error() {
    let ws = workspace();
    let spawn = |desc: &str| {
        tool(
            &format!("call-{desc}"),
            "subagent",
            &json!({"description": desc, "prompt": format!("do {desc}"), "mode": "spawn"})
                .to_string(),
        )
    };
    let model = scripted(json!([
        {"label":"root","responses":[response(vec![spawn("child"), vec![stop("tool_use")]]), response(vec![vec![text("root done"), stop("end_turn")]])]},
        {"label":"child","responses":[response(vec![spawn("grandchild"), vec![stop("tool_use")]]), response(vec![vec![text("child done"), stop("end_turn")]])]},
    ]));
    let mut c = Client::start(config(model.clone(), &ws.root, 1));
    c.init(true).await;
    let session = c.new_session(&ws.cwd).await;
    let (notes, resp) = c.prompt(&session, "go").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    let failed: Vec<&Value> = notes
        .iter()
        .map(|n| &n["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["toolCallId"], "call-grandchild");
    let text = failed[0]["content"][0]["content"]["text"].as_str().unwrap();
    assert!(
        text.contains("nesting depth limit") && text.contains("--max-depth is 1"),
        "{text}"
    );
    c.finish().await;
    assert_eq!(all_logs_valid(&ws.root).len(), 2);
    assert_eq!(model.calls().len(), 4);
}

#[tokio::test]
async fn refused_subagent_calls_announce_a_failed_meta_block() {
    let ws = workspace();
    let model = scripted(json!([{"responses":[
        response(vec![
            tool("bad-json", "subagent", "{\"description\": "),
            tool("bad-args", "subagent", r#"{"description":"d","mode":"spawn"}"#),
            tool("typed", "subagent", r#"{"description":"d","prompt":"p","subagent_type":"explorer","mode":"spawn"}"#),
            tool("untyped", "subagent", r#"{"description":"d","prompt":"p","mode":"fork"}"#),
            vec![stop("tool_use")],
        ]),
        response(vec![vec![text("done"), stop("end_turn")]]),
    ]}]));
    // Depth 0: every well-formed launch is refused as too deep.
    let mut c = Client::start(config(model, &ws.root, 0));
    c.init(true).await;
    let session = c.new_session(&ws.cwd).await;
    let (notes, resp) = c.prompt(&session, "go").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    let meta: Vec<(String, String)> = updates(&notes, "tool_call")
        .into_iter()
        .map(|n| &n["params"]["update"])
        .map(|u| (u["toolCallId"].to_string(), u["_meta"].to_string()))
        .collect();
    let want = |id: &str, block: &str| {
        (
            format!("\"{id}\""),
            format!(r#"{{"fanout":{{"subagent":{block}}}}}"#),
        )
    };
    assert_eq!(
        meta,
        [
            want("bad-json", r#"{"status":"failed"}"#),
            want("bad-args", r#"{"status":"failed"}"#),
            want(
                "typed",
                r#"{"mode":"spawn","status":"failed","subagentType":"explorer"}"#
            ),
            want(
                "untyped",
                r#"{"mode":"fork","status":"failed","subagentType":null}"#
            ),
        ]
    );
    c.finish().await;
}

#[tokio::test]
async fn without_the_subagents_capability_children_are_only_named_in_meta() {
    let ws = workspace();
    let model = scripted(json!([
        {"responses":[response(vec![tool("c1", "subagent", r#"{"description":"look","prompt":"look around","subagent_type":"explorer","mode":"spawn"}"#), vec![stop("tool_use")]]),
                      response(vec![vec![text("ok"), stop("end_turn")]])]},
        {"responses":[response(vec![vec![text("child text"), stop("end_turn")]])]},
    ]));
    let mut c = Client::start(config(model, &ws.root, 3));
    c.init(false).await;
    let session = c.new_session(&ws.cwd).await;
    let (notes, resp) = c.prompt(&session, "go").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert!(updates(&notes, "subagent_update").is_empty());
    assert!(
        notes
            .iter()
            .all(|n| n["params"]["sessionId"] == session.as_str())
    );
    let call = &updates(&notes, "tool_call")[0]["params"]["update"];
    let child = call["_meta"]["fanout"]["subagent"]["childSessionId"]
        .as_str()
        .unwrap();
    assert!(!child.is_empty());
    // ACP allows session content only for a client with `clientCapabilities.subagents`.
    for update in updates(&notes, "tool_call_update") {
        let content = update["params"]["update"]["content"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(content.iter().all(|c| c["type"] != "session"), "{update}");
    }
    let last = &updates(&notes, "tool_call_update").last().unwrap()["params"]["update"];
    assert_eq!(last["content"][0]["content"]["text"], "child text");
    assert_eq!(last["_meta"]["fanout"]["subagent"]["toolUseCount"], 0);
    assert_eq!(last["_meta"]["fanout"]["subagent"]["totalTokens"], 15);
    c.finish().await;
}

/// Streams one text chunk, then hangs until dropped.
#[derive(Debug)]
struct Hanging;

#[async_trait::async_trait]
impl LanguageModel for Hanging {
    fn provider_name(&self) -> &str {
        "hanging"
    }
    async fn stream(&self, _: ModelRequest, _: GenerateOptions) -> Result<ChunkStream, ModelError> {
        let first = futures::stream::iter([Ok(Chunk::TextDelta {
            text: "thinking".into(),
        })]);
        Ok(Box::pin(futures::StreamExt::chain(
            first,
            futures::stream::pending(),
        )))
    }
}

#[tokio::test]
async fn cancel_ends_the_turn_with_cancelled_and_busy_sessions_refuse_prompts() {
    let ws = workspace();
    let mut c = Client::start(config(Arc::new(Hanging), &ws.root, 3));
    c.init(false).await;
    let session = c.new_session(&ws.cwd).await;
    c.send_raw(
        &json!({"jsonrpc":"2.0","id":"p1","method":"session/prompt",
        "params":{"sessionId":session,"prompt":[{"type":"text","text":"think"}]}})
        .to_string(),
    )
    .await;
    let chunk = c.recv().await;
    assert_eq!(chunk["params"]["update"]["content"]["text"], "thinking");

    let (_, busy) = c.prompt(&session, "again").await;
    assert!(
        busy["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already running"),
        "{busy}"
    );

    c.send_raw(
        &json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":session}})
            .to_string(),
    )
    .await;
    let (_, resp) = c.until_response(json!("p1")).await;
    assert_eq!(resp["result"]["stopReason"], "cancelled");
    c.finish().await;
    let log = &all_logs_valid(&ws.root)[0];
    assert!(
        matches!(log.events.last(), Some(Event::TurnEnd { stop_reason, .. }) if stop_reason == "cancelled")
    );
}

#[tokio::test]
async fn eof_during_a_turn_cancels_it_and_returns() {
    let ws = workspace();
    let mut c = Client::start(config(Arc::new(Hanging), &ws.root, 3));
    c.init(false).await;
    let session = c.new_session(&ws.cwd).await;
    c.send_raw(
        &json!({"jsonrpc":"2.0","id":9,"method":"session/prompt",
        "params":{"sessionId":session,"prompt":[{"type":"text","text":"think"}]}})
        .to_string(),
    )
    .await;
    let _chunk = c.recv().await;
    c.tx.shutdown().await.unwrap();
    let (_, resp) = c.until_response(json!(9)).await;
    assert_eq!(resp["result"]["stopReason"], "cancelled");
    tokio::time::timeout(Duration::from_secs(10), c.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
