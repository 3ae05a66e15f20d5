//! OpenCode (`opencode acp`, DESIGN 3.3): the launch frame is titled `task`; later
//! updates carry the description as title and the inputs in `rawInput`; the result names
//! the child session and the model. The child's own traffic is not on the connection.

use super::DialectRules;
use crate::frame::FrameView;
use crate::json::text_at;
use crate::subagent::{SubagentResult, SubagentTask};

pub(crate) struct OpenCode;

impl DialectRules for OpenCode {
    fn name(&self) -> &'static str {
        "opencode"
    }

    fn agent_names(&self) -> &'static [&'static str] {
        &["opencode"]
    }

    /// The title, trimmed, equals `task` (any case).
    fn is_launch(&self, view: &FrameView<'_>) -> bool {
        view.title
            .is_some_and(|title| title.trim().eq_ignore_ascii_case("task"))
    }

    /// `rawOutput.metadata.{sessionId, model{providerID, modelID}}`.
    fn enrich(&self, task: &mut SubagentTask, view: &FrameView<'_>) {
        task.fill_inputs(&view.inputs());
        let Some(metadata) = view.output_at("metadata") else {
            return;
        };
        let model = metadata.get("model").and_then(|model| {
            match (text_at(model, "providerID"), text_at(model, "modelID")) {
                (Some(provider), Some(model)) => Some(format!("{provider}/{model}")),
                (Some(part), None) | (None, Some(part)) => Some(part.to_owned()),
                (None, None) => None,
            }
        });
        task.merge_result(&SubagentResult {
            child_session_id: text_at(metadata, "sessionId").map(str::to_owned),
            model,
            ..SubagentResult::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn title_task_any_case_trimmed() {
        for title in ["task", "Task", "TASK", "  task "] {
            assert!(
                OpenCode
                    .recognise(&FrameView::parse(&json!({"title": title})))
                    .is_some()
            );
        }
        for title in ["tasks", "Task: Subagent task"] {
            assert!(
                OpenCode
                    .recognise(&FrameView::parse(&json!({"title": title})))
                    .is_none()
            );
        }
    }

    #[test]
    fn metadata_names_child_and_model_parts() {
        let model = |metadata: Value| {
            let mut task = SubagentTask::default();
            OpenCode.enrich(
                &mut task,
                &FrameView::parse(&json!({"rawOutput": {"metadata": metadata}})),
            );
            task.model
        };
        assert_eq!(
            model(json!({"model": {"providerID": "opencode", "modelID": "big-pickle"}})).as_deref(),
            Some("opencode/big-pickle")
        );
        assert_eq!(
            model(json!({"model": {"modelID": "big-pickle"}})).as_deref(),
            Some("big-pickle")
        );
        assert_eq!(
            model(json!({"model": {"providerID": "opencode", "modelID": ""}})).as_deref(),
            Some("opencode")
        );
        assert_eq!(model(json!({"model": "x"})), None);
        let mut task = SubagentTask::default();
        OpenCode.enrich(
            &mut task,
            &FrameView::parse(&json!({"rawOutput": {"output": "ignored",
                "metadata": {"sessionId": "ses_child", "parentSessionId": "p"}}})),
        );
        assert_eq!(task.child_session_id.as_deref(), Some("ses_child"));
        assert_eq!(task.result_text, None);
    }
}
