//! What the [`Tracker`](crate::Tracker) reports.

use crate::dialect::Dialect;
use crate::jsonrpc::{Direction, NotUnderstoodReason};
use crate::subagent::SubagentTask;

/// One semantic event derived from the wire. A line yields zero or more events.
#[derive(Debug, Clone, PartialEq)]
pub enum TrackerEvent {
    /// A `session/new` (or `session/load`, `session/resume`, `session/fork`) succeeded.
    /// `cwd` comes from the matched request's params.
    SessionOpened {
        acp_session_id: String,
        cwd: Option<String>,
        method: SessionOpenMethod,
    },
    /// A client-to-agent `session/prompt` request: a turn starts.
    PromptStarted {
        acp_session_id: String,
        request_id: String,
    },
    /// The response to that request: `result.stopReason`, or the JSON-RPC error.
    PromptEnded {
        acp_session_id: String,
        request_id: String,
        stop_reason: Option<String>,
        error: Option<String>,
    },
    /// A tool-call row changed (see [`ToolFrame`]; boxed because it is the large one).
    Tool(Box<ToolFrame>),
    /// Any other `session/update` (agent message chunks, plans, …): which session it
    /// belongs to. A native child's traffic belongs to the parent session.
    SessionUpdate {
        acp_session_id: String,
        /// The session id on the wire (the child's, for child traffic).
        wire_session_id: String,
        /// `sessionUpdate` verbatim, e.g. `agent_message_chunk`.
        update_kind: String,
        /// The child's row, for child traffic.
        parent_tool_call_id: Option<String>,
    },
    /// Understood JSON-RPC that was deliberately passed over.
    Ignored {
        direction: Direction,
        reason: IgnoredReason,
    },
    /// A line that is not JSON-RPC; it was still forwarded.
    NotUnderstood {
        direction: Direction,
        reason: NotUnderstoodReason,
    },
}

/// How a session came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionOpenMethod {
    New,
    Load,
    Resume,
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
}

/// Where a [`ToolFrame`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameOrigin {
    ToolCall,
    ToolCallUpdate,
    /// ACP `subagent_update` for this row.
    SubagentUpdate,
    /// A tool call linking this (native child) row changed status.
    SessionLink,
    /// Cursor's `cursor/task` side request arrived after the tool call.
    CursorTask,
    /// A Codex lifecycle frame on another wire id, folded into this row.
    CodexLifecycle,
    /// A Codex `interact`/`wait`/`close` reported this row's agent status.
    CodexControl,
}

/// One change to one tool-call row.
///
/// The row key downstream is `(acp_session_id, tool_call_id)`. `title`, `kind`,
/// `parent_tool_call_id` and `last_tool_status` are cumulative (latest known); only
/// `tool_status` is specific to this frame.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFrame {
    /// The session the row belongs to: for a native child's traffic, the PARENT session.
    pub acp_session_id: String,
    /// The emitted id. Usually the wire id; differs for a Codex wire id reused with a
    /// different child, for rows named after a native child session, and when a child's
    /// tool call id collides with one already used in the parent session.
    pub tool_call_id: String,
    /// The `toolCallId` on the wire (for a native child row: the child session id).
    pub wire_tool_call_id: String,
    /// The session id on the wire.
    pub wire_session_id: String,
    /// First non-empty parent seen (Claude `parentToolUseId`, Codex sender thread,
    /// native child nesting).
    pub parent_tool_call_id: Option<String>,
    pub title: Option<String>,
    /// ACP tool kind (`read`, `execute`, `think`, …).
    pub kind: Option<String>,
    /// This frame's tool status: the ACP status verbatim; `in_progress` for a status-less
    /// frame carrying title, rawInput, content or locations (and for a `tool_call`);
    /// `completed` for Claude's `async_launched` dispatch; `None` = not a status change.
    pub tool_status: Option<String>,
    /// The row's status after this frame; once terminal it stays terminal.
    pub last_tool_status: Option<String>,
    /// First frame for this row.
    pub is_new: bool,
    /// Snapshot of the cumulative payload when the row is a recognised subagent.
    pub subagent: Option<SubagentTask>,
    /// The rule that recognised the subagent.
    pub dialect: Option<Dialect>,
    pub origin: FrameOrigin,
}

/// Running totals, for health output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrackerStats {
    pub lines: u64,
    pub requests: u64,
    pub notifications: u64,
    pub responses: u64,
    pub not_understood: u64,
    pub unmatched_responses: u64,
    pub ignored: u64,
    pub tool_frames: u64,
}
