//! Shared test support: the real `fanout agent --provider scripted` over real pipes, and
//! the scripted model's chunks.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

pub struct Agent {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub lines: Receiver<String>,
    pub next_id: u64,
}

impl Agent {
    pub fn start(script: &Path, trace: &Path, root: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fanout"))
            .args(["agent", "--provider", "scripted", "--script"])
            .arg(script)
            .arg("--script-trace")
            .arg(trace)
            .arg("--sessions-root")
            .arg(root)
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn fanout agent");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            lines,
            next_id: 0,
        }
    }

    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub fn recv(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(20))
            .expect("the agent did not answer in time");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON: {line:?}: {e}"))
    }

    pub fn request(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        self.next_id += 1;
        let id = self.next_id;
        self.send_raw(
            &json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}).to_string(),
        );
        let mut notes = Vec::new();
        loop {
            let msg = self.recv();
            assert_eq!(msg["jsonrpc"], "2.0");
            if msg.get("method").is_some() {
                notes.push(msg);
            } else {
                assert_eq!(msg["id"], id, "unexpected response {msg}");
                return (notes, msg);
            }
        }
    }

    /// Closes stdin; the agent must exit 0 without writing anything else.
    pub fn finish(mut self) -> String {
        drop(self.stdin.take());
        let output = self.child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        assert!(
            output.status.success(),
            "agent exited with {:?}: {stderr}",
            output.status
        );
        if let Ok(extra) = self.lines.recv_timeout(Duration::from_secs(5)) {
            panic!("unexpected stdout after EOF: {extra}");
        }
        stderr
    }
}

pub fn text(t: &str) -> Value {
    json!({"kind":"text_delta","text":t})
}

pub fn stop(reason: &str, input: u64, output: u64) -> Value {
    json!({"kind":"stop","stopReason":reason,"usage":{"inputTokens":input,"outputTokens":output}})
}

/// A tool use whose argument JSON arrives in two deltas.
pub fn tool_use(id: &str, name: &str, args: Value) -> Vec<Value> {
    let json = args.to_string();
    let (a, b) = json.split_at(json.len() / 2);
    vec![
        json!({"kind":"tool_use_start","id":id,"name":name}),
        json!({"kind":"tool_use_delta","id":id,"partialJson":a}),
        json!({"kind":"tool_use_delta","id":id,"partialJson":b}),
    ]
}

pub fn concat(parts: Vec<Vec<Value>>) -> Value {
    Value::Array(parts.into_iter().flatten().collect())
}

pub struct Setup {
    pub _dir: tempfile::TempDir,
    pub cwd: PathBuf,
    pub root: PathBuf,
    pub script: PathBuf,
    pub trace: PathBuf,
}

pub fn setup(script: &Value) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("project");
    std::fs::create_dir_all(cwd.join("notes")).unwrap();
    std::fs::write(cwd.join("a.txt"), "alpha").unwrap();
    let root = dir.path().join("sessions");
    let script_path = dir.path().join("script.json");
    std::fs::write(&script_path, serde_json::to_vec_pretty(script).unwrap()).unwrap();
    let trace = dir.path().join("trace.jsonl");
    Setup {
        cwd: std::fs::canonicalize(&cwd).unwrap(),
        _dir: dir,
        root,
        script: script_path,
        trace,
    }
}
