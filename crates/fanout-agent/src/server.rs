//! The ACP server: reads JSON-RPC lines, dispatches `initialize`,
//! `session/new`, `session/prompt` and `session/cancel`, and answers anything
//! else with method-not-found. Prompt turns run as tasks so `session/cancel`
//! and other requests are served while a turn is running.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::agent::{AgentConfig, Session, TurnEnv, run_turn};
use crate::error::AgentError;
use crate::wire::{Outbox, code};

/// How long shutdown waits for cancelled turns to wind down.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

struct Slot {
    session: tokio::sync::Mutex<Session>,
    cancel: watch::Sender<bool>,
}

struct Server {
    cfg: Arc<AgentConfig>,
    out: Outbox,
    sessions: Mutex<HashMap<String, Arc<Slot>>>,
    subagents: AtomicBool,
}

/// Serves ACP on `input`/`output` until `input` ends; then cancels running
/// turns, waits for them, flushes `output` and returns.
pub async fn serve<R, W>(input: R, output: W, config: AgentConfig) -> Result<(), AgentError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<String>(1024);
    let writer = tokio::spawn(write_lines(output, rx));
    let server = Arc::new(Server {
        cfg: Arc::new(config),
        out: Outbox::new(tx),
        sessions: Mutex::new(HashMap::new()),
        subagents: AtomicBool::new(false),
    });
    let mut tasks = JoinSet::new();
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    let read_result = loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) => break Ok(()),
            Ok(_) => {}
            Err(err) => break Err(err),
        }
        while tasks.try_join_next().is_some() {}
        server.handle_line(&line, &mut tasks).await;
    };
    if let Err(err) = &read_result {
        tracing::warn!(%err, "reading the ACP channel failed; shutting down");
    }
    // The client is gone: cancel what is running and let it finish writing its logs.
    for slot in server.slots() {
        slot.cancel.send_replace(true);
    }
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("running turns did not stop in time; aborting them");
        tasks.shutdown().await;
    }
    drop(server);
    let written = writer.await;
    read_result?;
    match written {
        Ok(result) => result.map_err(AgentError::Io),
        Err(err) => Err(AgentError::Io(std::io::Error::other(err))),
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut output: W,
    mut rx: mpsc::Receiver<String>,
) -> std::io::Result<()> {
    while let Some(line) = rx.recv().await {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        if let Err(err) = async {
            output.write_all(&bytes).await?;
            output.flush().await
        }
        .await
        {
            tracing::warn!(%err, "writing to the ACP channel failed");
            return Err(err);
        }
    }
    output.flush().await
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NewSessionParams {
    cwd: String,
    #[serde(default)]
    #[allow(dead_code)]
    mcp_servers: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptParams {
    session_id: String,
    prompt: Vec<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelParams {
    session_id: String,
}

fn params<T: for<'de> Deserialize<'de>>(method: &str, value: &Value) -> Result<T, String> {
    let value = if value.is_null() {
        json!({})
    } else {
        value.clone()
    };
    serde_json::from_value(value).map_err(|e| format!("invalid params for {method}: {e}"))
}

impl Server {
    fn slots(&self) -> Vec<Arc<Slot>> {
        self.sessions
            .lock()
            .map(|s| s.values().cloned().collect())
            .unwrap_or_default()
    }

    fn slot(&self, id: &str) -> Option<Arc<Slot>> {
        self.sessions.lock().ok().and_then(|s| s.get(id).cloned())
    }

    async fn handle_line(self: &Arc<Self>, raw: &[u8], tasks: &mut JoinSet<()>) {
        let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let message: Value = match serde_json::from_slice(raw) {
            Ok(v) => v,
            Err(err) => {
                self.out
                    .error(
                        Value::Null,
                        code::PARSE_ERROR,
                        format!("parse error: {err}"),
                    )
                    .await;
                return;
            }
        };
        let id = message.get("id").cloned();
        let Some(method) = message.get("method") else {
            if message.get("result").is_some() || message.get("error").is_some() {
                tracing::debug!("ignoring a response from the client");
            } else {
                self.out
                    .error(
                        id.unwrap_or(Value::Null),
                        code::INVALID_REQUEST,
                        "invalid request: no method",
                    )
                    .await;
            }
            return;
        };
        let Some(method) = method.as_str() else {
            self.out
                .error(
                    id.unwrap_or(Value::Null),
                    code::INVALID_REQUEST,
                    "invalid request: method is not a string",
                )
                .await;
            return;
        };
        let params_value = message.get("params").cloned().unwrap_or(Value::Null);
        match (method, id) {
            ("initialize", Some(id)) => self.initialize(id, &params_value).await,
            ("session/new", Some(id)) => self.new_session(id, &params_value).await,
            ("session/prompt", Some(id)) => self.prompt(id, &params_value, tasks).await,
            ("session/cancel", id) => self.cancel(id, &params_value).await,
            (other, Some(id)) => {
                self.out
                    .error(
                        id,
                        code::METHOD_NOT_FOUND,
                        format!("method not found: {other}"),
                    )
                    .await;
            }
            (other, None) => tracing::debug!(method = other, "ignoring an unknown notification"),
        }
    }

    async fn initialize(&self, id: Value, params: &Value) {
        let subagents = params
            .pointer("/clientCapabilities/subagents")
            .is_some_and(|v| !v.is_null() && *v != Value::Bool(false));
        self.subagents.store(subagents, Ordering::Relaxed);
        self.out
            .respond(
                id,
                json!({
                    "protocolVersion": 1,
                    "agentCapabilities": {
                        "loadSession": false,
                        "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
                    },
                    "authMethods": [],
                    "agentInfo": {"name": "fanout-agent", "title": "fanout reference agent",
                        "version": env!("CARGO_PKG_VERSION")},
                }),
            )
            .await;
    }

    async fn new_session(&self, id: Value, raw: &Value) {
        let p: NewSessionParams = match params("session/new", raw) {
            Ok(p) => p,
            Err(message) => return self.out.error(id, code::INVALID_PARAMS, message).await,
        };
        let cwd = match canonical_dir(&p.cwd) {
            Ok(cwd) => cwd,
            Err(message) => return self.out.error(id, code::INVALID_PARAMS, message).await,
        };
        let session = match Session::new_root(&self.cfg, cwd, p.cwd.clone()) {
            Ok(s) => s,
            Err(err) => {
                return self
                    .out
                    .error(
                        id,
                        code::INTERNAL_ERROR,
                        format!("cannot create the session log: {err}"),
                    )
                    .await;
            }
        };
        let session_id = session.id.clone();
        let (cancel, _) = watch::channel(false);
        let slot = Arc::new(Slot {
            session: tokio::sync::Mutex::new(session),
            cancel,
        });
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.insert(session_id.clone(), slot);
        }
        tracing::info!(session = %session_id, cwd = %p.cwd, "session created");
        self.out.respond(id, json!({"sessionId": session_id})).await;
    }

    async fn prompt(self: &Arc<Self>, id: Value, raw: &Value, tasks: &mut JoinSet<()>) {
        let p: PromptParams = match params("session/prompt", raw) {
            Ok(p) => p,
            Err(message) => return self.out.error(id, code::INVALID_PARAMS, message).await,
        };
        let Some(slot) = self.slot(&p.session_id) else {
            return self
                .out
                .error(
                    id,
                    code::INVALID_PARAMS,
                    format!("unknown session: {}", p.session_id),
                )
                .await;
        };
        let text = prompt_text(&p.prompt);
        if text.trim().is_empty() {
            return self
                .out
                .error(
                    id,
                    code::INVALID_PARAMS,
                    "invalid params for session/prompt: the prompt has no text",
                )
                .await;
        }
        let server = Arc::clone(self);
        tasks.spawn(async move {
            let Ok(mut session) = slot.session.try_lock() else {
                server
                    .out
                    .error(
                        id,
                        code::INVALID_REQUEST,
                        format!("session {} is already running a prompt turn", p.session_id),
                    )
                    .await;
                return;
            };
            slot.cancel.send_replace(false);
            let env = TurnEnv {
                cfg: server.cfg.clone(),
                out: server.out.clone(),
                subagents: server.subagents.load(Ordering::Relaxed),
                cancel: slot.cancel.subscribe(),
            };
            match run_turn(&mut session, &env, text).await {
                Ok(summary) => {
                    server
                        .out
                        .respond(id, json!({"stopReason": summary.stop_reason.as_str()}))
                        .await;
                }
                Err(err) => {
                    tracing::warn!(session = %session.id, %err, "prompt turn failed");
                    server
                        .out
                        .error(id, code::INTERNAL_ERROR, err.to_string())
                        .await;
                }
            }
        });
    }

    async fn cancel(&self, id: Option<Value>, raw: &Value) {
        match params::<CancelParams>("session/cancel", raw) {
            Ok(p) => match self.slot(&p.session_id) {
                Some(slot) => {
                    slot.cancel.send_replace(true);
                }
                None => tracing::warn!(session = %p.session_id, "cancel for an unknown session"),
            },
            Err(message) => {
                if let Some(id) = id {
                    return self.out.error(id, code::INVALID_PARAMS, message).await;
                }
                tracing::warn!(%message, "ignoring a malformed session/cancel");
                return;
            }
        }
        if let Some(id) = id {
            self.out.respond(id, Value::Null).await;
        }
    }
}

/// Validates a client cwd: absolute, an existing directory; returns it canonical.
fn canonical_dir(cwd: &str) -> Result<PathBuf, String> {
    if !Path::new(cwd).is_absolute() {
        return Err(format!(
            "invalid params for session/new: cwd {cwd:?} must be an absolute path"
        ));
    }
    let canonical = std::fs::canonicalize(cwd)
        .map_err(|e| format!("invalid params for session/new: cwd {cwd:?}: {e}"))?;
    if !canonical.is_dir() {
        return Err(format!(
            "invalid params for session/new: cwd {cwd:?} is not a directory"
        ));
    }
    Ok(canonical)
}

/// The text of an ACP prompt: text blocks, embedded text resources, and
/// resource links, in order.
fn prompt_text(blocks: &[Value]) -> String {
    let mut parts = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = block.get("text").and_then(Value::as_str) {
                    parts.push(text.to_string());
                }
            }
            Some("resource") => {
                if let Some(text) = block.pointer("/resource/text").and_then(Value::as_str) {
                    parts.push(text.to_string());
                }
            }
            Some("resource_link") => {
                if let Some(uri) = block.get("uri").and_then(Value::as_str) {
                    parts.push(format!("[resource: {uri}]"));
                }
            }
            _ => {}
        }
    }
    parts.join("\n\n")
}
