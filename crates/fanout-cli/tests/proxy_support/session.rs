//! A scripted session behind `fanout proxy`: the reference agent (`fanout agent
//! --provider scripted`) with a script of N prompt turns that each spawn one subagent,
//! and an ACP client that drives it over the proxy's real pipes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{FANOUT, Running};

/// Every complete line the agent has written so far, as JSON.
pub fn agent_lines(stdout: &[u8]) -> Vec<Value> {
    let mut lines: Vec<&[u8]> = stdout.split(|b| *b == b'\n').collect();
    // What follows the last newline: nothing, or a line still being written.
    lines.pop();
    lines
        .into_iter()
        .map(|line| serde_json::from_slice(line).expect("agent writes JSON lines"))
        .collect()
}

/// The response to request `id` among `lines`.
pub fn response(lines: &[Value], id: u64) -> Option<&Value> {
    lines
        .iter()
        .find(|message| message["id"] == json!(id) && message.get("method").is_none())
}

/// Sends one request and waits (at most `limit`) for its response; returns its result.
pub fn request(
    proxy: &mut Running,
    id: u64,
    method: &str,
    params: Value,
    limit: Duration,
) -> Value {
    let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    assert!(
        proxy.write(format!("{line}\n").as_bytes()),
        "the proxy stopped reading before {method}: {}",
        proxy.stderr()
    );
    proxy.wait_for(&format!("the answer to {method}"), limit, |out, _| {
        response(&agent_lines(out), id).is_some()
    });
    let lines = agent_lines(&proxy.stdout());
    let message = response(&lines, id).expect("answered");
    assert!(message.get("error").is_none(), "{method}: {message}");
    message["result"].clone()
}

/// The scripted model's steps of a tool use whose arguments arrive in one delta.
fn tool_use(id: &str, args: &Value) -> Vec<Value> {
    vec![
        json!({"kind": "tool_use_start", "id": id, "name": "subagent"}),
        json!({"kind": "tool_use_delta", "id": id, "partialJson": args.to_string()}),
        json!({"kind": "stop", "stopReason": "tool_use", "usage": {"inputTokens": 40, "outputTokens": 8}}),
    ]
}

fn answer(text: &str) -> Vec<Value> {
    vec![
        json!({"kind": "text_delta", "text": text}),
        json!({"kind": "stop", "stopReason": "end_turn", "usage": {"inputTokens": 50, "outputTokens": 4}}),
    ]
}

/// The script: the parent answers each of `turns` prompts by spawning one subagent
/// (`call_<n>`, type `reviewer`) and then replying; each child replies once.
pub fn subagent_per_turn_script(turns: usize) -> Value {
    let mut parent = Vec::new();
    let mut sessions = vec![Value::Null];
    for turn in 1..=turns {
        let args = json!({
            "description": format!("Review part {turn}"),
            "prompt": format!("Review part {turn} of the change"),
            "subagent_type": "reviewer",
            "mode": "spawn",
        });
        parent.push(Value::Array(tool_use(&format!("call_{turn}"), &args)));
        parent.push(Value::Array(answer(&format!("Part {turn} reviewed."))));
        sessions.push(json!({
            "label": format!("child {turn}"),
            "responses": [answer(&format!("Part {turn} looks fine."))],
        }));
    }
    sessions[0] = json!({"label": "parent", "responses": parent});
    json!({"version": 1, "sessions": sessions})
}

/// A scripted session of `turns` turns: its files, and the agent command to run.
pub struct ScriptedSession {
    pub turns: usize,
    pub cwd: PathBuf,
    pub agent: Vec<String>,
}

impl ScriptedSession {
    /// Writes the script and a project directory under `dir`.
    pub fn new(dir: &Path, turns: usize) -> ScriptedSession {
        let cwd = dir.join("project");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(cwd.join("README.md"), "# a project\n").unwrap();
        let script = dir.join("script.json");
        std::fs::write(
            &script,
            serde_json::to_vec_pretty(&subagent_per_turn_script(turns)).unwrap(),
        )
        .unwrap();
        let agent = [
            FANOUT,
            "agent",
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
            "--sessions-root",
            dir.join("sessions").to_str().unwrap(),
        ]
        .map(str::to_owned)
        .to_vec();
        ScriptedSession {
            turns,
            cwd: std::fs::canonicalize(&cwd).unwrap(),
            agent,
        }
    }
}

/// The ACP client side of a [`ScriptedSession`] behind a running proxy.
pub struct Client {
    next_id: u64,
    session_id: String,
    turns_done: usize,
}

impl Client {
    /// `initialize` and `session/new` (waiting at most `limit` for each).
    pub fn open(proxy: &mut Running, session: &ScriptedSession, limit: Duration) -> Client {
        request(
            proxy,
            0,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
            limit,
        );
        let opened = request(
            proxy,
            1,
            "session/new",
            json!({"cwd": session.cwd, "mcpServers": []}),
            limit,
        );
        Client {
            next_id: 2,
            session_id: opened["sessionId"]
                .as_str()
                .expect("a session id")
                .to_owned(),
            turns_done: 0,
        }
    }

    /// Sends the next prompt without waiting for its answer.
    pub fn send_prompt(&mut self, proxy: &mut Running) {
        self.turns_done += 1;
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": {"sessionId": self.session_id, "prompt": [{"type": "text", "text": format!("Review part {}", self.turns_done)}]}});
        assert!(
            proxy.write(format!("{line}\n").as_bytes()),
            "the proxy stopped reading"
        );
    }

    /// Runs the next `count` prompt turns; returns the longest round trip.
    pub fn turns(&mut self, proxy: &mut Running, count: usize, limit: Duration) -> Duration {
        let mut longest = Duration::ZERO;
        for _ in 0..count {
            self.turns_done += 1;
            let id = self.next_id;
            self.next_id += 1;
            let started = Instant::now();
            let result = request(
                proxy,
                id,
                "session/prompt",
                json!({"sessionId": self.session_id, "prompt": [{"type": "text", "text": format!("Review part {}", self.turns_done)}]}),
                limit,
            );
            longest = longest.max(started.elapsed());
            assert_eq!(result["stopReason"], "end_turn", "turn {}", self.turns_done);
        }
        longest
    }
}
