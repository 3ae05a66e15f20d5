//! Cursor's state: the agent-to-client `cursor/task` side request
//! {toolCallId, agentId, description, model, prompt}, which may come before its tool call
//! (parked until the call arrives) or after it (merged into the row at once). The client
//! answers it `{}`; fanout only observes it.

use std::collections::HashMap;

use serde_json::Value;

use super::Tracker;
use super::rows::WireKey;
use crate::event::{FrameOrigin, IgnoredReason, TrackerEvent};
use crate::json::text_at;
use crate::jsonrpc::Direction;
use crate::subagent::{SubagentInputs, SubagentTask};

/// Parked `cursor/task` requests (their tool call not seen yet).
const MAX_PARKED_CURSOR_TASKS: usize = 1024;

/// `cursor/task` requests waiting for their tool call, by tool call id.
#[derive(Debug, Default)]
pub(super) struct CursorState {
    parked: HashMap<String, ParkedCursorTask>,
}

#[derive(Debug, Default)]
pub(super) struct ParkedCursorTask {
    session: Option<String>,
    seq: u64,
    agent_id: Option<String>,
    description: Option<String>,
    model: Option<String>,
    prompt: Option<String>,
}

impl ParkedCursorTask {
    fn merge(&mut self, later: ParkedCursorTask) {
        fill(&mut self.agent_id, later.agent_id);
        fill(&mut self.description, later.description);
        fill(&mut self.model, later.model);
        fill(&mut self.prompt, later.prompt);
        if self.session.is_none() {
            self.session = later.session;
        }
    }

    /// Fill-if-empty into a payload.
    pub(super) fn apply(&self, task: &mut SubagentTask) {
        task.fill_inputs(&SubagentInputs {
            description: self.description.clone(),
            prompt: self.prompt.clone(),
            subagent_type: None,
        });
        fill(&mut task.agent_id, self.agent_id.clone());
        fill(&mut task.model, self.model.clone());
    }
}

fn fill(slot: &mut Option<String>, value: Option<String>) {
    if slot.as_deref().is_none_or(str::is_empty) && value.as_deref().is_some_and(|v| !v.is_empty())
    {
        *slot = value;
    }
}

impl CursorState {
    fn park(&mut self, tool_call_id: &str, task: ParkedCursorTask, seq: &mut u64) {
        if let Some(parked) = self.parked.get_mut(tool_call_id) {
            parked.merge(task);
            return;
        }
        if self.parked.len() >= MAX_PARKED_CURSOR_TASKS
            && let Some(oldest) = self
                .parked
                .iter()
                .min_by_key(|(_, parked)| parked.seq)
                .map(|(id, _)| id.clone())
        {
            self.parked.remove(&oldest);
        }
        *seq += 1;
        self.parked.insert(
            tool_call_id.to_owned(),
            ParkedCursorTask { seq: *seq, ..task },
        );
    }

    /// The request parked for a tool call of this session (or of no named session).
    pub(super) fn take(
        &mut self,
        wire_session: &str,
        tool_call_id: &str,
    ) -> Option<ParkedCursorTask> {
        let parked = self.parked.get(tool_call_id)?;
        if parked
            .session
            .as_deref()
            .is_some_and(|session| session != wire_session)
        {
            return None;
        }
        self.parked.remove(tool_call_id)
    }

    /// Cursor reuses wire ids across turns: at a prompt's end, its session's unmatched
    /// side requests expire.
    pub(super) fn expire(&mut self, session: &str) {
        self.parked
            .retain(|_, parked| parked.session.as_ref().is_some_and(|s| s != session));
    }
}

impl Tracker {
    pub(super) fn on_cursor_task(&mut self, params: &Value, out: &mut Vec<TrackerEvent>) {
        let Some(tool_call_id) = text_at(params, "toolCallId") else {
            out.push(TrackerEvent::Ignored {
                direction: Direction::AgentToClient,
                reason: IgnoredReason::CursorTaskWithoutToolCallId,
            });
            return;
        };
        let field = |key: &str| text_at(params, key).map(str::to_owned);
        let task = ParkedCursorTask {
            session: field("sessionId"),
            seq: self.seq,
            agent_id: field("agentId"),
            description: field("description"),
            model: field("model"),
            prompt: field("prompt"),
        };
        let Some((row_session, id)) = self.find_tool_call(task.session.as_deref(), tool_call_id)
        else {
            self.cursor.park(tool_call_id, task, &mut self.seq);
            return;
        };
        let seq = &mut self.seq;
        let Some(row) = self.rows.get_mut(&row_session) else {
            return;
        };
        let Some(entry) = row.entries.get_mut(&id) else {
            return;
        };
        let Some(subagent) = entry.subagent.as_mut() else {
            out.push(TrackerEvent::Ignored {
                direction: Direction::AgentToClient,
                reason: IgnoredReason::CursorTaskForNonSubagent,
            });
            return;
        };
        task.apply(&mut subagent.task);
        entry.record_status(Some("in_progress"));
        out.push(TrackerEvent::Tool(Box::new(entry.frame(
            &row_session,
            Some("in_progress"),
            false,
            FrameOrigin::CursorTask,
        ))));
        row.reclassify(&id, seq);
    }

    /// The row of a wire tool call id: in the given session, else the most recent match.
    fn find_tool_call(
        &self,
        session: Option<&str>,
        tool_call_id: &str,
    ) -> Option<(String, String)> {
        if let Some(session) = session {
            let route = self.route(session);
            let row = self.rows.get(&route.row_session)?;
            let id = row.current(&WireKey::new(session, tool_call_id))?;
            return Some((route.row_session, id.to_owned()));
        }
        self.rows
            .iter()
            .flat_map(|(row_session, row)| {
                row.by_wire
                    .iter()
                    .filter(|(key, _)| key.tool_call_id == tool_call_id)
                    .filter_map(|(_, ids)| ids.last())
                    .filter_map(move |id| row.entries.get(id).map(|entry| (row_session, entry)))
            })
            .max_by_key(|(_, entry)| entry.created)
            .map(|(row_session, entry)| (row_session.clone(), entry.id.clone()))
    }
}
