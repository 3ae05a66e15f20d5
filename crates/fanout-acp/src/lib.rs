//! fanout's ACP wire layer.
//!
//! Owns: splitting the proxied byte streams into lines ([`LineFramer`]), classifying each
//! line as JSON-RPC 2.0 per direction ([`classify`]), matching responses to requests,
//! and turning ACP traffic into small semantic events ([`Tracker`] -> [`TrackerEvent`]):
//! sessions opened, prompt turns started and ended, and tool-call frames
//! ([`ToolFrame`]) with the subagent payload ([`SubagentTask`]). It also owns the
//! tool-call message-metadata JSON ([`tool_call_message_metadata`]), the terminal
//! tool-status set ([`is_terminal_tool_status`]) and the `_meta.fanout.subagent` block
//! that fanout's reference agent writes ([`FanoutSubagentMeta`]).
//!
//! The agent dialects of DESIGN 3.3 are one module each (`src/dialect/`: Claude, Codex,
//! OpenCode, Cursor, Auggie, Qwen Code, Gemini CLI, Copilot CLI, fanout's own agent)
//! behind one trait; the agent's `initialize` `agentInfo.name` selects its dialect alone
//! ([`Dialect::for_agent_name`]), and without a known name the shape rules apply in one
//! documented precedence. ACP's own subagent sessions (DESIGN 3.6: `subagent_update`,
//! its draft names, `session_message`) apply on every connection, one row per work cycle
//! of a child session. The tracker (`src/tracker/`) keeps the JSON-RPC correlation, the
//! row accumulator and the child sessions, and names no agent; what a dialect correlates
//! across frames (Codex's lifecycle frames, Cursor's side requests, the subagent
//! sessions' work cycles) is that dialect's state, in its own module.
//! Must not know: databases, timestamps, tasks, executions, turns as rows, counters of
//! the writer. Everything here is a pure function of the lines seen so far.
//!
//! Robustness: no input line can panic the tracker; unknown methods, unknown
//! `sessionUpdate` kinds and unknown fields are passed over; wrong types read as absent.
//!
//! ```
//! use fanout_acp::{Direction, Tracker, TrackerEvent};
//!
//! let mut tracker = Tracker::new();
//! let line = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1",
//!   "update":{"sessionUpdate":"tool_call","toolCallId":"toolu_1","title":"Task","status":"pending",
//!   "rawInput":{"description":"Review","prompt":"Review the diff","subagent_type":"reviewer"},
//!   "_meta":{"claudeCode":{"toolName":"Agent"}}}}}"#;
//! let events = tracker.observe(Direction::AgentToClient, &line.replace('\n', ""));
//! let [TrackerEvent::Tool(frame)] = events.as_slice() else { panic!("one tool frame") };
//! assert_eq!(frame.tool_call_id, "toolu_1");
//! assert_eq!(frame.tool_status.as_deref(), Some("pending"));
//! assert_eq!(frame.subagent.as_ref().map(|t| t.subagent_type.as_str()), Some("reviewer"));
//! assert_eq!(frame.message_metadata()["normalized"]["kind"], "subagent_task");
//! ```
//!
//! Row identity: a [`ToolFrame`] row is `(acp_session_id, tool_call_id)`. The session is
//! the one the row belongs to (a child session's traffic belongs to its parent session,
//! nested under the child's current row); the id is the *emitted* id, which differs from
//! the wire id where the wire id would collide (Codex reusing a wire id for another
//! child, a child's tool call id already used in the parent session) and for a child
//! session's work cycles (`<child>`, `<child>#2`, …).
//!
//! Memory is bounded: pending requests, finished plain tool calls, finished subagent rows,
//! parked `cursor/task` requests, Codex aliases, child sessions and messages between
//! sessions are capped (oldest evicted first); unfinished subagent rows are never
//! evicted, and prompt end forgets no row.
//!
//! Why not the official `agent-client-protocol-schema` types (checked at 1.20.0, whose
//! v1 has `SubagentUpdate` with `MaybeUndefined` patch fields): that crate turns on
//! `serde_json`'s `preserve_order` feature, which Cargo unifies across the workspace and
//! which would reorder every JSON object fanout writes (message metadata, the reference
//! agent's wire bytes, the committed snapshots); its `SessionUpdate` and `SubagentUpdate`
//! reject a whole update when one field (`sessionId`, `cwd`, `additionalDirectories`)
//! has the wrong type, where fanout must still count the frame; and it has neither the
//! August 2026 draft names nor the agents' `_meta`/`rawInput`/`rawOutput`, which stay
//! untyped anyway. Every field is read leniently from `serde_json::Value` instead (the
//! subagent-update patches mirror `MaybeUndefined`), which also keeps the dependency
//! tree to serde alone. fanout-cli's protocol test validates the reference agent against
//! the schema generated from that crate. The one typed shape is fanout's own
//! `_meta.fanout.subagent` ([`FanoutSubagentMeta`]), shared with the reference agent that
//! writes it; each of its fields is read through the same lenient rules.

mod dialect;
mod event;
mod fanout_subagent;
#[cfg(feature = "testing")]
pub mod fixtures;
mod frame;
mod framing;
mod json;
mod jsonrpc;
mod metadata;
mod subagent;
#[cfg(feature = "testing")]
pub mod testing;
mod tracker;

pub use dialect::Dialect;
pub use event::{
    FrameOrigin, IgnoredReason, SessionOpenMethod, ToolFrame, TrackerEvent, TrackerStats,
};
pub use fanout_subagent::FanoutSubagentMeta;
pub use framing::{DEFAULT_MAX_LINE_BYTES, FramedLine, LineFramer};
pub use jsonrpc::{
    Direction, Message, NotUnderstoodReason, RequestId, ResponseOutcome, RpcError, classify,
    classify_bytes, classify_value,
};
pub use metadata::{
    TERMINAL_TOOL_STATUSES, is_terminal_tool_status, normalized_kind, tool_call_message_metadata,
};
pub use subagent::SubagentTask;
pub use tracker::Tracker;
