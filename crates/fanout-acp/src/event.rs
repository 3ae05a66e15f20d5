//! What the [`Tracker`](crate::Tracker) reports.

use serde_json::Value;

use crate::dialect::Dialect;
use crate::jsonrpc::{Direction, NotUnderstoodReason};
use crate::subagent::SubagentTask;

/// One semantic event derived from the wire. A line yields zero or more events.
#[derive(Debug, Clone, PartialEq)]
pub enum TrackerEvent {
    /// A `session/new` (or `session/load`, `session/resume`, `session/fork`) succeeded.
    /// `cwd` comes from the matched request's params.
    SessionOpened {
        /// The session id of the response (else of the request).
        acp_session_id: String,
        /// The request's `cwd`.
        cwd: Option<String>,
        /// Which method opened it.
        method: SessionOpenMethod,
    },
    /// A client-to-agent `session/prompt` request: a turn starts.
    PromptStarted {
        /// The prompted session.
        acp_session_id: String,
        /// The JSON-RPC request id as text (a number as its JSON text).
        request_id: String,
    },
    /// The response to that request: `result.stopReason`, or the JSON-RPC error.
    PromptEnded {
        /// The prompted session.
        acp_session_id: String,
        /// The request id of the `session/prompt`.
        request_id: String,
        /// `result.stopReason`.
        stop_reason: Option<String>,
        /// The error's message (or its JSON), when the prompt failed.
        error: Option<String>,
    },
    /// A tool-call row changed (see [`ToolFrame`]; boxed because it is the large one).
    Tool(Box<ToolFrame>),
    /// Any other `session/update` (agent message chunks, plans, …): which session it
    /// belongs to. A child session's traffic belongs to the parent session.
    SessionUpdate {
        /// The session the update belongs to (the parent, for a child's traffic).
        acp_session_id: String,
        /// The session id on the wire (the child's, for child traffic).
        wire_session_id: String,
        /// `sessionUpdate` verbatim, e.g. `agent_message_chunk`.
        update_kind: String,
        /// The row whose child sent it: the child's current row for a child session's
        /// traffic, or the call a child's chunk on the parent session names (Qwen's
        /// `_meta.parentToolCallId`).
        parent_tool_call_id: Option<String>,
        /// One model call's token usage the update reports, verbatim (Qwen's
        /// `_meta.usage` on message chunks, the parent's and each child's).
        usage: Option<Value>,
    },
    /// Understood JSON-RPC that was deliberately passed over.
    Ignored {
        /// The direction of the line.
        direction: Direction,
        /// Why nothing came of it.
        reason: IgnoredReason,
    },
    /// A line that is not JSON-RPC; it was still forwarded.
    NotUnderstood {
        /// The direction of the line.
        direction: Direction,
        /// What is wrong with it.
        reason: NotUnderstoodReason,
    },
}

/// How a session came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionOpenMethod {
    /// `session/new`.
    New,
    /// `session/load` (its history replay is not recorded again).
    Load,
    /// `session/resume`.
    Resume,
    /// `session/fork`.
    Fork,
}

impl SessionOpenMethod {
    pub(crate) fn from_method(method: &str) -> Option<Self> {
        match method {
            "session/new" => Some(Self::New),
            "session/load" => Some(Self::Load),
            "session/resume" => Some(Self::Resume),
            "session/fork" => Some(Self::Fork),
            _ => None,
        }
    }

    /// The JSON-RPC method name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "session/new",
            Self::Load => "session/load",
            Self::Resume => "session/resume",
            Self::Fork => "session/fork",
        }
    }
}

/// Why understood traffic produced nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IgnoredReason {
    /// A response whose id matches no pending request of the other direction.
    UnmatchedResponse,
    /// A message that needs a session id had none.
    MissingSessionId,
    /// `session/update` without an `update` object or `sessionUpdate` kind.
    MalformedUpdate,
    /// A `session/update` sent client-to-agent.
    UnexpectedDirection,
    /// History replayed during `session/load` (recorded by the execution that lived it).
    LoadReplay,
    /// A Codex lifecycle frame for no known child (terminal), or an ambiguous one.
    UnmatchedCodexLifecycle,
    /// A follow-up frame of a Codex lifecycle call already folded into its row.
    CodexLifecycleFollowUp,
    /// `subagent_update` without a usable child session id, or one that would nest a
    /// session inside itself.
    InvalidSubagentUpdate,
    /// `cursor/task` without `toolCallId`.
    CursorTaskWithoutToolCallId,
    /// `cursor/task` for a tool call that exists but was not recognised as a subagent.
    CursorTaskForNonSubagent,
    /// A `subagent_update` carrying only a state for a child never announced (a
    /// fragment of a stream not seen from its start): no row is invented for it.
    SubagentStateForUnknownChild,
    /// A child went `idle` while no work cycle of it was running (idle twice).
    IdleOutsideCycle,
    /// A `session_message` from a session never opened nor announced.
    HandbackFromUnknownSession,
    /// A status signal (Qwen's `backgroundTask`, Claude's peer hand-back) naming a call or
    /// agent with no row.
    SignalForUnknownRow,
}

impl IgnoredReason {
    /// A stable snake_case name, for metric labels and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnmatchedResponse => "unmatched_response",
            Self::MissingSessionId => "missing_session_id",
            Self::MalformedUpdate => "malformed_update",
            Self::UnexpectedDirection => "unexpected_direction",
            Self::LoadReplay => "load_replay",
            Self::UnmatchedCodexLifecycle => "unmatched_codex_lifecycle",
            Self::CodexLifecycleFollowUp => "codex_lifecycle_follow_up",
            Self::InvalidSubagentUpdate => "invalid_subagent_update",
            Self::CursorTaskWithoutToolCallId => "cursor_task_without_tool_call_id",
            Self::CursorTaskForNonSubagent => "cursor_task_for_non_subagent",
            Self::SubagentStateForUnknownChild => "subagent_state_for_unknown_child",
            Self::IdleOutsideCycle => "idle_outside_cycle",
            Self::HandbackFromUnknownSession => "handback_from_unknown_session",
            Self::SignalForUnknownRow => "signal_for_unknown_row",
        }
    }

    /// Whether the agent sent something its protocol or dialect does not allow (counted
    /// as an anomaly), rather than traffic fanout passes over by design.
    pub fn is_anomaly(self) -> bool {
        matches!(
            self,
            Self::InvalidSubagentUpdate
                | Self::SubagentStateForUnknownChild
                | Self::IdleOutsideCycle
                | Self::HandbackFromUnknownSession
                | Self::SignalForUnknownRow
                | Self::UnmatchedCodexLifecycle
                | Self::CursorTaskWithoutToolCallId
                | Self::CursorTaskForNonSubagent
        )
    }
}

/// Where a [`ToolFrame`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameOrigin {
    /// A `tool_call`.
    ToolCall,
    /// A `tool_call_update`.
    ToolCallUpdate,
    /// ACP `subagent_update` (or a draft name) for this row.
    SubagentUpdate,
    /// A tool call linking this (child session) row changed status.
    SessionLink,
    /// A `session_message` from the child to its parent: the row's result text.
    SessionMessage,
    /// Cursor's `cursor/task` side request arrived after the tool call.
    CursorTask,
    /// A Codex lifecycle frame on another wire id, folded into this row.
    CodexLifecycle,
    /// A Codex `interact`/`wait`/`close` reported this row's agent status.
    CodexControl,
    /// Another session update reported this row's agent status (Qwen's background end,
    /// Claude's peer hand-back).
    RowSignal,
}

/// One change to one tool-call row.
///
/// The row key downstream is `(acp_session_id, tool_call_id)`. `title`, `kind`,
/// `parent_tool_call_id` and `last_tool_status` are cumulative (latest known); only
/// `tool_status` is specific to this frame.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFrame {
    /// The session the row belongs to: for a child session's traffic, the PARENT session.
    pub acp_session_id: String,
    /// The emitted id. Usually the wire id; differs for a Codex wire id reused with a
    /// different child, for rows named after a child session (`<child>`, `<child>#2`, …
    /// per work cycle), and when a child's tool call id collides with one already used in
    /// the parent session.
    pub tool_call_id: String,
    /// The `toolCallId` on the wire (for a child session's row: the child session id, or
    /// `<child>#<n>` for its n-th work cycle).
    pub wire_tool_call_id: String,
    /// The session id on the wire.
    pub wire_session_id: String,
    /// The row this one is nested under: the child's current row for a child session's
    /// traffic, else the first non-empty parent seen (Claude `parentToolUseId`, Qwen
    /// `parentToolCallId`, Codex sender thread, the session a child was announced on).
    pub parent_tool_call_id: Option<String>,
    /// The tool call's title (latest).
    pub title: Option<String>,
    /// ACP tool kind (`read`, `execute`, `think`, …).
    pub kind: Option<String>,
    /// This frame's tool status: the ACP status verbatim; `in_progress` for a status-less
    /// frame carrying title, rawInput, content or locations (and for a `tool_call`);
    /// `completed` for Claude's `async_launched` dispatch; `completed` or `cancelled` for
    /// a work cycle going `idle`; `None` = not a status change.
    pub tool_status: Option<String>,
    /// The row's status after this frame; once terminal it stays terminal.
    pub last_tool_status: Option<String>,
    /// First frame for this row.
    pub is_new: bool,
    /// Snapshot of the cumulative payload when the row is a recognised subagent.
    pub subagent: Option<SubagentTask>,
    /// The rule that recognised the subagent.
    pub dialect: Option<Dialect>,
    /// What kind of wire frame this came from.
    pub origin: FrameOrigin,
}

/// Running totals, for health output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrackerStats {
    /// Lines observed.
    pub lines: u64,
    /// JSON-RPC requests.
    pub requests: u64,
    /// JSON-RPC notifications.
    pub notifications: u64,
    /// JSON-RPC responses.
    pub responses: u64,
    /// Lines that were not JSON-RPC.
    pub not_understood: u64,
    /// Responses matching no request.
    pub unmatched_responses: u64,
    /// [`TrackerEvent::Ignored`] events.
    pub ignored: u64,
    /// Of those, the anomalies ([`IgnoredReason::is_anomaly`]).
    pub anomalies: u64,
    /// [`TrackerEvent::Tool`] events.
    pub tool_frames: u64,
}
