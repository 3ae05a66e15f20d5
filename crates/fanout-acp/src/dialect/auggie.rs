//! Auggie (DESIGN 3.3): recognised by its title `sub-agent-<type>: <description>` alone;
//! `rawOutput.output` is the result text. Auggie cannot run offline (its model turns go to
//! Augment's backend), so this is checked against the example transcript only.

use super::DialectRules;
use crate::frame::FrameView;
use crate::json::text_at;
use crate::subagent::{SubagentInputs, SubagentResult, SubagentTask};

pub(crate) struct Auggie;

impl DialectRules for Auggie {
    fn name(&self) -> &'static str {
        "auggie"
    }

    fn is_launch(&self, view: &FrameView<'_>) -> bool {
        view.title.and_then(auggie_title).is_some()
    }

    /// Type and description from the title where `rawInput` left them empty;
    /// `rawOutput.output` -> result text.
    fn enrich(&self, task: &mut SubagentTask, view: &FrameView<'_>) {
        task.fill_inputs(&view.inputs());
        if let Some((subagent_type, description)) = view.title.and_then(auggie_title) {
            task.fill_inputs(&SubagentInputs {
                description: Some(description.to_owned()),
                prompt: None,
                subagent_type: Some(subagent_type.to_owned()),
            });
        }
        if let Some(output) = view.raw_output.and_then(|raw| text_at(raw, "output")) {
            task.merge_result(&SubagentResult {
                result_text: Some(output.to_owned()),
                ..SubagentResult::default()
            });
        }
    }
}

/// Parses `sub-agent-<type>: <description>` into `(type, description)`.
fn auggie_title(title: &str) -> Option<(&str, &str)> {
    let rest = title.strip_prefix("sub-agent-")?;
    let (subagent_type, description) = rest.split_once(':')?;
    let subagent_type = subagent_type.trim();
    if subagent_type.is_empty() {
        return None;
    }
    Some((subagent_type, description.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn title_parsing() {
        assert_eq!(
            auggie_title("sub-agent-explore: find it"),
            Some(("explore", "find it"))
        );
        assert_eq!(
            auggie_title("sub-agent-code-review: look at PR 12"),
            Some(("code-review", "look at PR 12"))
        );
        assert_eq!(auggie_title("sub-agent-qa:"), Some(("qa", "")));
        assert_eq!(auggie_title("sub-agent-a: b: c"), Some(("a", "b: c")));
        for title in [
            "sub-agent-explore find it",
            "sub-agent-: x",
            "sub-agent-  : x",
            "Sub-agent-explore: x",
            "explore: x",
        ] {
            assert_eq!(auggie_title(title), None, "{title}");
        }
    }

    #[test]
    fn title_fills_only_what_raw_input_left_empty() {
        let task = Auggie
            .recognise(&FrameView::parse(
                &json!({"title": "sub-agent-explore: find the bug"}),
            ))
            .unwrap();
        assert_eq!(
            (task.subagent_type.as_str(), task.description.as_str()),
            ("explore", "find the bug")
        );
        let task = Auggie
            .recognise(&FrameView::parse(&json!({
                "title": "sub-agent-explore: truncated…",
                "rawInput": {"description": "the full description"}
            })))
            .unwrap();
        assert_eq!(task.description, "the full description");
        assert_eq!(task.subagent_type, "explore");
    }

    #[test]
    fn output_is_result_text_when_a_non_empty_string() {
        let result = |raw: serde_json::Value| {
            let mut task = SubagentTask::default();
            Auggie.enrich(&mut task, &FrameView::parse(&json!({"rawOutput": raw})));
            task.result_text
        };
        assert_eq!(result(json!({"output": "Done."})).as_deref(), Some("Done."));
        assert_eq!(result(json!({"output": 3})), None);
        assert_eq!(result(json!({"output": ""})), None);
    }
}
