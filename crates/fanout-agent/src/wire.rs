//! The outbound side of the ACP channel: one JSON-RPC message per line, all
//! funnelled through one writer task so lines never interleave.

use serde_json::{Value, json};
use tokio::sync::mpsc;

/// JSON-RPC error codes used by the agent.
pub(crate) mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// A handle for sending messages to the client.
#[derive(Debug, Clone)]
pub(crate) struct Outbox {
    tx: mpsc::Sender<String>,
}

impl Outbox {
    pub(crate) fn new(tx: mpsc::Sender<String>) -> Self {
        Self { tx }
    }

    async fn send(&self, value: Value) {
        match serde_json::to_string(&value) {
            Ok(line) => {
                // A closed channel means the client is gone; nothing to do.
                let _ = self.tx.send(line).await;
            }
            Err(err) => tracing::error!(%err, "cannot encode an outbound message"),
        }
    }

    /// A `session/update` notification.
    pub(crate) async fn update(&self, session_id: &str, update: Value) {
        self.send(json!({
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": session_id, "update": update},
        }))
        .await;
    }

    /// A successful response.
    pub(crate) async fn respond(&self, id: Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await;
    }

    /// An error response.
    pub(crate) async fn error(&self, id: Value, code: i64, message: impl Into<String>) {
        self.send(json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code, "message": message.into()},
        }))
        .await;
    }
}

/// `agent_message_chunk` with text.
pub(crate) fn message_chunk(text: &str) -> Value {
    json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
}

/// A text item of tool-call content.
pub(crate) fn text_content(text: &str) -> Value {
    json!({"type": "content", "content": {"type": "text", "text": text}})
}

/// A `tool_call_update` moving `call_id` to `status`, with `content` when there is any.
pub(crate) fn tool_call_update(call_id: &str, status: &str, content: &[Value]) -> Value {
    let mut update =
        json!({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status});
    if !content.is_empty() {
        update["content"] = json!(content);
    }
    update
}

/// The tool-call content item linking a child session.
pub(crate) fn session_link(session_id: &str) -> Value {
    json!({"type": "session", "sessionId": session_id})
}
