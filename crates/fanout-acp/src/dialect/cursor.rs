//! Cursor (DESIGN 3.3): `rawInput._toolName == "task"`; its inputs come in the
//! agent-to-client side request `cursor/task` {toolCallId, agentId, description, model,
//! prompt}, before the tool call (parked until the call arrives, [`CursorTasks`]) or after
//! it (merged into the row at once); `rawOutput.{durationMs, isBackground}` on the
//! result. The client answers the side request `{}`; fanout only observes it.

use std::collections::HashMap;

use serde_json::Value;

use super::state::{Conn, DialectState, FramePlan};
use super::{Dialect, DialectRules};
use crate::event::{FrameOrigin, IgnoredReason, TrackerEvent};
use crate::frame::FrameView;
use crate::json::{is_true, metric, text_at};
use crate::subagent::{SubagentInputs, SubagentResult, SubagentTask};
use crate::tracker::rows::{RowSession, Subagent, WireKey};
use crate::tracker::tool::FrameCtx;

/// Parked `cursor/task` requests (their tool call not seen yet).
const MAX_PARKED_CURSOR_TASKS: usize = 1024;

pub(crate) struct Cursor;

impl DialectRules for Cursor {
    fn name(&self) -> &'static str {
        "cursor"
    }

    /// `rawInput._toolName` equals `task` (any case).
    fn is_launch(&self, view: &FrameView<'_>) -> bool {
        view.raw_input
            .and_then(|raw| raw.get("_toolName"))
            .and_then(Value::as_str)
            .is_some_and(|name| name.eq_ignore_ascii_case("task"))
    }

    /// Flat `rawOutput.{durationMs, isBackground}`.
    fn enrich(&self, task: &mut SubagentTask, view: &FrameView<'_>) {
        task.fill_inputs(&view.inputs());
        let Some(raw) = view.raw_output.and_then(Value::as_object) else {
            return;
        };
        task.merge_result(&SubagentResult {
            duration_ms: metric(raw.get("durationMs")),
            is_async: is_true(raw.get("isBackground")),
            ..SubagentResult::default()
        });
    }

    fn state(&self, _me: Dialect) -> Option<Box<dyn DialectState>> {
        Some(Box::new(CursorTasks::default()))
    }
}

/// `cursor/task` requests waiting for their tool call, by tool call id.
#[derive(Debug, Default)]
struct CursorTasks {
    parked: HashMap<String, ParkedCursorTask>,
    /// The request parked for the `tool_call` under way.
    taken: Option<ParkedCursorTask>,
}

#[derive(Debug, Default)]
struct ParkedCursorTask {
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
    fn apply(&self, task: &mut SubagentTask) {
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

impl DialectState for CursorTasks {
    /// A `tool_call` takes the request parked for it (its inputs fill the row next).
    fn plan(&mut self, _rows: &mut RowSession, frame: &mut FrameCtx<'_>, _plan: &mut FramePlan) {
        self.taken = if frame.is_call {
            self.take(&frame.key.session, &frame.key.tool_call_id)
        } else {
            None
        };
    }

    /// The frame's own inputs win over a side request's (both only fill).
    fn enrich(&mut self, subagent: &mut Subagent, _frame: &FrameCtx<'_>) {
        if let Some(parked) = &self.taken {
            parked.apply(&mut subagent.task);
        }
    }

    fn after(&mut self, _rows: &mut RowSession, _frame: &mut FrameCtx<'_>) {
        self.taken = None;
    }

    fn agent_message(&mut self, method: &str, params: &Value, conn: &mut Conn<'_>) {
        if method == "cursor/task" {
            self.on_cursor_task(params, conn);
        }
    }

    /// Cursor reuses wire ids across turns: at a prompt's end, its session's unmatched
    /// side requests expire.
    fn prompt_ended(&mut self, session: &str) {
        self.parked
            .retain(|_, parked| parked.session.as_ref().is_some_and(|s| s != session));
    }
}

impl CursorTasks {
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
    fn take(&mut self, wire_session: &str, tool_call_id: &str) -> Option<ParkedCursorTask> {
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

    fn on_cursor_task(&mut self, params: &Value, conn: &mut Conn<'_>) {
        let Some(tool_call_id) = text_at(params, "toolCallId") else {
            conn.ignore(IgnoredReason::CursorTaskWithoutToolCallId);
            return;
        };
        let field = |key: &str| text_at(params, key).map(str::to_owned);
        let task = ParkedCursorTask {
            session: field("sessionId"),
            seq: *conn.seq,
            agent_id: field("agentId"),
            description: field("description"),
            model: field("model"),
            prompt: field("prompt"),
        };
        let Some((row_session, id)) = find_tool_call(conn, task.session.as_deref(), tool_call_id)
        else {
            self.park(tool_call_id, task, conn.seq);
            return;
        };
        let Some(row) = conn.rows.get_mut(&row_session) else {
            return;
        };
        let Some(entry) = row.entries.get_mut(&id) else {
            return;
        };
        let Some(subagent) = entry.subagent.as_mut() else {
            conn.ignore(IgnoredReason::CursorTaskForNonSubagent);
            return;
        };
        task.apply(&mut subagent.task);
        entry.record_status(Some("in_progress"));
        conn.out.push(TrackerEvent::Tool(Box::new(entry.frame(
            &row_session,
            Some("in_progress"),
            false,
            FrameOrigin::CursorTask,
        ))));
        row.reclassify(&id, conn.seq);
    }
}

/// The row of a wire tool call id: in the given session, else the most recent match.
fn find_tool_call(
    conn: &Conn<'_>,
    session: Option<&str>,
    tool_call_id: &str,
) -> Option<(String, String)> {
    if let Some(session) = session {
        let route = conn.children.route(session);
        let row = conn.rows.get(&route.row_session)?;
        let id = row.current(&WireKey::new(session, tool_call_id))?;
        return Some((route.row_session, id.to_owned()));
    }
    conn.rows
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_name_task_any_case() {
        let recognised = |update: Value| Cursor.recognise(&FrameView::parse(&update)).is_some();
        assert!(recognised(
            json!({"title": "Task: Subagent task", "rawInput": {"_toolName": "TASK"}})
        ));
        assert!(!recognised(json!({"rawInput": {"_toolName": "read"}})));
        assert!(!recognised(json!({"rawInput": {"_toolName": ["task"]}})));
    }

    #[test]
    fn raw_output_duration_and_background() {
        let enriched = |raw: Value| {
            let mut task = SubagentTask::default();
            Cursor.enrich(&mut task, &FrameView::parse(&json!({"rawOutput": raw})));
            task
        };
        let task = enriched(json!({"durationMs": 4200, "isBackground": false}));
        assert_eq!(task.duration_ms, Some(4200));
        assert!(!task.is_async);
        let task = enriched(json!({"isBackground": true}));
        assert!(task.is_async);
        assert_eq!(task.duration_ms, None);
    }
}
