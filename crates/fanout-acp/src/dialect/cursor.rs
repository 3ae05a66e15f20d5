//! Cursor (DESIGN 3.3): `rawInput._toolName == "task"`; its inputs come in the
//! agent-to-client side request `cursor/task`, before or after the tool call (the tracker
//! parks and merges it); `rawOutput.{durationMs, isBackground}` on the result.

use serde_json::Value;

use super::{Dialect, DialectRules};
use crate::frame::FrameView;
use crate::json::{is_true, metric};
use crate::subagent::{SubagentResult, SubagentTask};

pub(crate) struct Cursor;

impl DialectRules for Cursor {
    fn dialect(&self) -> Dialect {
        Dialect::Cursor
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
