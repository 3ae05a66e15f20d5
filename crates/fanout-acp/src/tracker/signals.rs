//! Row signals: session updates other than tool calls that move the agent status of an
//! existing row, never creating one (Qwen's `_meta.backgroundTask` end of a background
//! child, Claude's peer hand-back `usage_update` without the subagents capability).

use serde_json::Value;

use super::Tracker;
use crate::dialect::{Dialect, RowRef};
use crate::event::{FrameOrigin, IgnoredReason, TrackerEvent};
use crate::jsonrpc::Direction;

impl Tracker {
    pub(super) fn on_row_signals(
        &mut self,
        kind: &str,
        wire_session: &str,
        update: &Value,
        out: &mut Vec<TrackerEvent>,
    ) {
        let signals = self.rules.row_signals(kind, update);
        if signals.is_empty() {
            return;
        }
        let route = self.route(wire_session);
        for (dialect, signal) in signals {
            let row = self.rows.get_mut(&route.row_session);
            let id = row.as_ref().and_then(|row| match &signal.row {
                RowRef::ToolCall(wire_id) => {
                    row.signalled_row(dialect, |entry| entry.wire.tool_call_id == *wire_id)
                }
                RowRef::AgentId(agent_id) => row.signalled_row(dialect, |entry| {
                    entry
                        .subagent
                        .as_ref()
                        .and_then(|s| s.task.agent_id.as_deref())
                        == Some(agent_id.as_str())
                }),
            });
            let (Some(row), Some(id)) = (row, id) else {
                // With the subagents capability Claude's hand-back names a child session,
                // whose own work cycle reports its end: nothing to do, nothing wrong.
                let is_child =
                    matches!(&signal.row, RowRef::AgentId(agent) if self.native.is_child(agent));
                if !(dialect == Dialect::Claude && is_child) {
                    out.push(TrackerEvent::Ignored {
                        direction: Direction::AgentToClient,
                        reason: IgnoredReason::SignalForUnknownRow,
                    });
                }
                continue;
            };
            let Some(entry) = row.entries.get_mut(&id) else {
                continue;
            };
            let Some(subagent) = entry.subagent.as_mut() else {
                continue;
            };
            if subagent.task.status.as_deref() == Some(signal.agent_status.as_str()) {
                continue;
            }
            subagent.task.set_status(Some(&signal.agent_status));
            out.push(TrackerEvent::Tool(Box::new(entry.frame(
                &route.row_session,
                None,
                false,
                FrameOrigin::RowSignal,
            ))));
        }
    }
}
