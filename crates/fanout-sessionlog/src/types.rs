//! The typed lines of a session log.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use fanout_types::Timestamp;

/// The format version written in every header. A reader rejects other versions.
pub const FORMAT_VERSION: u32 = 1;

/// How a session came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// A top-level session opened by an ACP client (`session/new`).
    Root,
    /// A subagent child started fresh.
    Spawn,
    /// A subagent child seeded with its parent's history.
    Fork,
}

impl Backend {
    /// The wire spelling: `root`, `spawn` or `fork`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Backend::Root => "root",
            Backend::Spawn => "spawn",
            Backend::Fork => "fork",
        }
    }
}

/// How a subagent child is started (the `mode` argument of the `subagent` tool).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubagentMode {
    /// A fresh session.
    Spawn,
    /// A session seeded with the parent's history.
    Fork,
}

impl SubagentMode {
    /// The wire spelling: `spawn` or `fork`.
    pub fn as_str(&self) -> &'static str {
        match self {
            SubagentMode::Spawn => "spawn",
            SubagentMode::Fork => "fork",
        }
    }

    /// The header backend of a child started this way.
    pub fn backend(&self) -> Backend {
        match self {
            SubagentMode::Spawn => Backend::Spawn,
            SubagentMode::Fork => Backend::Fork,
        }
    }
}

/// Line 1 of every log. On the wire it also carries `"type":"header"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// Format version; [`FORMAT_VERSION`] when written by this crate.
    pub version: u32,
    /// The session id (a UUID; also the ACP session id).
    pub id: String,
    /// When the session was created.
    pub created_at: Timestamp,
    /// The parent session's id; absent for a root session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    /// The parent's `subagent` tool call that started this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_tool_call_id: Option<String>,
    /// `root`, `spawn` or `fork`.
    pub backend: Backend,
    /// Fork children only: the index (0-based, counting events, not the header)
    /// of the child's first own event. Events before it are the copied parent
    /// history; replay derives the child's script from here on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_boundary: Option<usize>,
    /// The session's working directory as the client gave it.
    pub cwd: String,
}

impl Header {
    /// The header of a root session (one an ACP client opened), created now.
    pub fn root(id: impl Into<String>, cwd: impl Into<String>) -> Self {
        Self {
            version: FORMAT_VERSION,
            id: id.into(),
            created_at: Timestamp::now(),
            parent_session: None,
            parent_tool_call_id: None,
            backend: Backend::Root,
            seed_boundary: None,
            cwd: cwd.into(),
        }
    }

    /// The header of a subagent child, created now: started by `parent`'s tool call
    /// `tool_call_id`, spawned or forked per `backend`; a fork's `seed_boundary` is the
    /// number of parent events copied before the child's own.
    pub fn child(
        id: impl Into<String>,
        cwd: impl Into<String>,
        parent: impl Into<String>,
        tool_call_id: impl Into<String>,
        backend: Backend,
        seed_boundary: Option<usize>,
    ) -> Self {
        Self {
            parent_session: Some(parent.into()),
            parent_tool_call_id: Some(tool_call_id.into()),
            backend,
            seed_boundary,
            ..Self::root(id, cwd)
        }
    }
}

/// One event line of a log. Every event carries its time `ts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all_fields = "camelCase", deny_unknown_fields)]
pub enum Event {
    /// A user prompt (a `session/prompt`, or a child's task prompt).
    #[serde(rename = "user/message")]
    UserMessage {
        /// When it was recorded.
        ts: Timestamp,
        /// The prompt's text blocks, joined.
        text: String,
    },
    /// A model call is about to be made; the `assistant/chunk`s that follow,
    /// up to the next `model/request`, are its response.
    #[serde(rename = "model/request")]
    ModelRequest {
        /// When it was recorded.
        ts: Timestamp,
        /// 0-based count of this session's own model calls.
        ordinal: u64,
        /// The model name sent to the provider.
        model: String,
    },
    /// One streamed piece of a model response.
    #[serde(rename = "assistant/chunk")]
    AssistantChunk {
        /// When it was recorded.
        ts: Timestamp,
        /// The piece.
        chunk: Chunk,
    },
    /// The model call failed (HTTP error, broken stream, script exhausted).
    #[serde(rename = "model/error")]
    ModelError {
        /// When it was recorded.
        ts: Timestamp,
        /// Ordinal of the failed call.
        ordinal: u64,
        /// What went wrong (never contains credentials).
        message: String,
    },
    /// The model asked for a tool.
    #[serde(rename = "tool/call")]
    ToolCall {
        /// When it was recorded.
        ts: Timestamp,
        /// The model's tool-use id (also the ACP `toolCallId`).
        tool_call_id: String,
        /// Tool name.
        name: String,
        /// Parsed arguments, or the raw argument text when it was not valid JSON.
        input: Value,
    },
    /// A tool finished.
    #[serde(rename = "tool/result")]
    ToolResult {
        /// When it was recorded.
        ts: Timestamp,
        /// The tool call this answers.
        tool_call_id: String,
        /// Whether the result is an error.
        is_error: bool,
        /// The text handed back to the model.
        content: String,
    },
    /// A subagent child was started by a `subagent` tool call.
    #[serde(rename = "subagent/start")]
    SubagentStart {
        /// When it was recorded.
        ts: Timestamp,
        /// The parent's tool call.
        tool_call_id: String,
        /// The child's session id (its log's header `id`).
        child_session_id: String,
        /// `spawn` or `fork`.
        mode: SubagentMode,
        /// The requested subagent type, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_type: Option<String>,
        /// The short task description.
        description: String,
    },
    /// A subagent child finished (successfully or not).
    #[serde(rename = "subagent/end")]
    SubagentEnd {
        /// When it was recorded.
        ts: Timestamp,
        /// The parent's tool call.
        tool_call_id: String,
        /// The child's session id.
        child_session_id: String,
        /// Agent status: `completed`, `failed` or `cancelled`.
        status: String,
        /// The child's ACP stop reason, when its turn ended normally.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop_reason: Option<String>,
        /// Input plus output tokens over the child's own model calls.
        total_tokens: u64,
        /// Wall time of the child run.
        duration_ms: u64,
        /// Tool calls the child made.
        tool_use_count: u64,
    },
    /// A prompt turn ended with this ACP stop reason.
    #[serde(rename = "turn/end")]
    TurnEnd {
        /// When it was recorded.
        ts: Timestamp,
        /// `end_turn`, `max_tokens`, `max_turn_requests`, `refusal`, `cancelled`
        /// or `error`.
        stop_reason: String,
    },
}

impl Event {
    /// When the event was recorded.
    pub fn ts(&self) -> Timestamp {
        match self {
            Event::UserMessage { ts, .. }
            | Event::ModelRequest { ts, .. }
            | Event::AssistantChunk { ts, .. }
            | Event::ModelError { ts, .. }
            | Event::ToolCall { ts, .. }
            | Event::ToolResult { ts, .. }
            | Event::SubagentStart { ts, .. }
            | Event::SubagentEnd { ts, .. }
            | Event::TurnEnd { ts, .. } => *ts,
        }
    }

    /// The wire `type` of the event, e.g. `assistant/chunk`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::UserMessage { .. } => "user/message",
            Event::ModelRequest { .. } => "model/request",
            Event::AssistantChunk { .. } => "assistant/chunk",
            Event::ModelError { .. } => "model/error",
            Event::ToolCall { .. } => "tool/call",
            Event::ToolResult { .. } => "tool/result",
            Event::SubagentStart { .. } => "subagent/start",
            Event::SubagentEnd { .. } => "subagent/end",
            Event::TurnEnd { .. } => "turn/end",
        }
    }
}

/// Why a model stopped generating, normalised across providers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelStopReason {
    /// The model finished its answer (OpenAI `stop`).
    EndTurn,
    /// The model wants tool results (OpenAI `tool_calls`).
    ToolUse,
    /// The output token limit was hit (OpenAI `length`).
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// The model refused (OpenAI `content_filter`).
    Refusal,
}

/// Token usage of one model response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from cache, when the provider reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u64>,
    /// Prompt tokens written to cache, when the provider reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
}

impl Usage {
    /// Input plus output tokens.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// One piece of a streamed model response. The same JSON is used in
/// `assistant/chunk` events, in scripted-provider scripts and by replay, so a
/// recorded response can be served again chunk for chunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum Chunk {
    /// Text appended to the answer.
    TextDelta {
        /// The appended text.
        text: String,
    },
    /// A tool use begins.
    ToolUseStart {
        /// The provider's tool-use id.
        id: String,
        /// The tool name.
        name: String,
    },
    /// More of a tool use's JSON arguments (concatenate the deltas of one id).
    ToolUseDelta {
        /// The tool-use id from the matching start.
        id: String,
        /// A fragment of the argument JSON text.
        partial_json: String,
    },
    /// The response is complete.
    Stop {
        /// Why the model stopped.
        stop_reason: ModelStopReason,
        /// Token usage of the response.
        usage: Usage,
    },
}

/// One model response as recorded in a log: the `assistant/chunk`s following a
/// `model/request`, and the error if the call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedResponse {
    /// The session-local ordinal from the `model/request`.
    pub ordinal: u64,
    /// The model name from the `model/request`.
    pub model: String,
    /// The chunks in order.
    pub chunks: Vec<Chunk>,
    /// The `model/error` message, if the call failed.
    pub error: Option<String>,
}

/// A whole log, as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionLog {
    /// Where it was read from.
    pub path: PathBuf,
    /// Line 1.
    pub header: Header,
    /// Lines 2.. (event index `i` is on line `i + 2`).
    pub events: Vec<Event>,
}

impl SessionLog {
    /// Index of the first event the session produced itself: the header's
    /// `seedBoundary` for a fork child, 0 otherwise.
    pub fn seed_boundary(&self) -> usize {
        self.header
            .seed_boundary
            .unwrap_or(0)
            .min(self.events.len())
    }

    /// The copied parent history of a fork child (empty for other sessions).
    pub fn seeded_events(&self) -> &[Event] {
        &self.events[..self.seed_boundary()]
    }

    /// The events the session produced itself.
    pub fn own_events(&self) -> &[Event] {
        &self.events[self.seed_boundary()..]
    }

    /// This session's own model responses in call order (a fork child's start
    /// at its seed boundary): the basis of a replay script.
    pub fn recorded_responses(&self) -> Vec<RecordedResponse> {
        let mut out: Vec<RecordedResponse> = Vec::new();
        for event in self.own_events() {
            match event {
                Event::ModelRequest { ordinal, model, .. } => out.push(RecordedResponse {
                    ordinal: *ordinal,
                    model: model.clone(),
                    chunks: Vec::new(),
                    error: None,
                }),
                Event::AssistantChunk { chunk, .. } => {
                    if let Some(last) = out.last_mut() {
                        last.chunks.push(chunk.clone());
                    }
                }
                Event::ModelError { message, .. } => {
                    if let Some(last) = out.last_mut() {
                        last.error = Some(message.clone());
                    }
                }
                _ => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ts() -> Timestamp {
        Timestamp::from_micros(1_754_235_140_000_000).unwrap()
    }

    #[test]
    fn chunk_wire_shapes() {
        let cases = [
            (
                Chunk::TextDelta { text: "hi".into() },
                json!({"kind":"text_delta","text":"hi"}),
            ),
            (
                Chunk::ToolUseStart {
                    id: "t1".into(),
                    name: "read_file".into(),
                },
                json!({"kind":"tool_use_start","id":"t1","name":"read_file"}),
            ),
            (
                Chunk::ToolUseDelta {
                    id: "t1".into(),
                    partial_json: "{\"pa".into(),
                },
                json!({"kind":"tool_use_delta","id":"t1","partialJson":"{\"pa"}),
            ),
            (
                Chunk::Stop {
                    stop_reason: ModelStopReason::ToolUse,
                    usage: Usage {
                        input_tokens: 3,
                        output_tokens: 4,
                        ..Usage::default()
                    },
                },
                json!({"kind":"stop","stopReason":"tool_use","usage":{"inputTokens":3,"outputTokens":4}}),
            ),
        ];
        for (chunk, wire) in cases {
            assert_eq!(serde_json::to_value(&chunk).unwrap(), wire);
            assert_eq!(serde_json::from_value::<Chunk>(wire).unwrap(), chunk);
        }
    }

    #[test]
    fn event_wire_shapes() {
        let event = Event::AssistantChunk {
            ts: ts(),
            chunk: Chunk::TextDelta { text: "x".into() },
        };
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            json!({"type":"assistant/chunk","ts":"2025-08-03T15:32:20.000000Z","chunk":{"kind":"text_delta","text":"x"}})
        );
        let event = Event::SubagentEnd {
            ts: ts(),
            tool_call_id: "c".into(),
            child_session_id: "s".into(),
            status: "completed".into(),
            stop_reason: Some("end_turn".into()),
            total_tokens: 1,
            duration_ms: 2,
            tool_use_count: 0,
        };
        let wire = serde_json::to_value(&event).unwrap();
        assert_eq!(wire["type"], "subagent/end");
        assert_eq!(wire["childSessionId"], "s");
        assert_eq!(wire["toolUseCount"], 0);
        assert_eq!(serde_json::from_value::<Event>(wire).unwrap(), event);
        assert_eq!(event.type_name(), "subagent/end");
    }

    #[test]
    fn recorded_responses_start_at_seed_boundary() {
        let req = |ordinal| Event::ModelRequest {
            ts: ts(),
            ordinal,
            model: "m".into(),
        };
        let text = |t: &str| Event::AssistantChunk {
            ts: ts(),
            chunk: Chunk::TextDelta { text: t.into() },
        };
        let log = SessionLog {
            path: PathBuf::from("x.jsonl"),
            header: Header::child("child", "/w", "parent", "call", Backend::Fork, Some(2)),
            events: vec![req(0), text("parent"), req(0), text("child")],
        };
        let responses = log.recorded_responses();
        assert_eq!(responses.len(), 1);
        assert_eq!(
            responses[0].chunks,
            vec![Chunk::TextDelta {
                text: "child".into()
            }]
        );
        assert_eq!(log.seeded_events().len(), 2);
    }
}
