//! Row signals: session updates other than tool calls that move the agent status of an
//! existing row of the dialect that reads them, never creating one (a background child's
//! end reported in a message chunk or a usage update; see each dialect's `row_signal`).

use serde_json::Value;

use super::Tracker;
use crate::dialect::RowRef;
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
        let route = self.children.route(wire_session);
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
                // An agent id that is a child session's (an agent speaking ACP's subagent
                // sessions): that child's own work cycle reports its end, nothing wrong.
                let is_child = matches!(&signal.row,
                    RowRef::AgentId(agent) if self.children.is_child(agent));
                if !is_child {
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
