//! Gemini CLI (`gemini --acp`, `agentInfo.name` `gemini-cli`, DESIGN 3.3): the
//! `invoke_agent` tool, whose ACP tool call id is `invoke_agent__<call id>` and whose title
//! is `Delegating to agent '<name>'`. Nothing else is on the wire: no `rawInput`, no
//! result fields, no child traffic. A launch denied by policy arrives as one lone failed
//! `tool_call_update` without a title; it is still a launch attempt, so updates can
//! launch a row here.

use super::DialectRules;
use crate::frame::FrameView;
use crate::subagent::{SubagentInputs, SubagentTask};

const ID_PREFIX: &str = "invoke_agent__";

pub(crate) struct Gemini;

impl DialectRules for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn agent_names(&self) -> &'static [&'static str] {
        &["gemini-cli"]
    }

    fn launches_on_updates(&self) -> bool {
        true
    }

    fn is_launch(&self, view: &FrameView<'_>) -> bool {
        view.tool_call_id
            .is_some_and(|id| id.starts_with(ID_PREFIX))
            || view.title.and_then(agent_name).is_some()
    }

    /// `<name>` of the title -> type.
    fn enrich(&self, task: &mut SubagentTask, view: &FrameView<'_>) {
        task.fill_inputs(&SubagentInputs {
            subagent_type: view.title.and_then(agent_name).map(str::to_owned),
            ..SubagentInputs::default()
        });
    }
}

/// `Delegating to agent '<name>'` -> `<name>`.
fn agent_name(title: &str) -> Option<&str> {
    let name = title
        .strip_prefix("Delegating to agent '")?
        .strip_suffix('\'')?;
    (!name.trim().is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn launch_by_id_or_title() {
        let task = Gemini
            .recognise(&FrameView::parse(&json!({"toolCallId": "invoke_agent__gemini_invoke_1",
                "status": "in_progress", "title": "Delegating to agent 'codebase_investigator'", "kind": "think"})))
            .unwrap();
        assert_eq!(task.subagent_type, "codebase_investigator");
        assert_eq!(task.description, "");
        let denied = Gemini
            .recognise(&FrameView::parse(
                &json!({"toolCallId": "invoke_agent__1", "status": "failed"}),
            ))
            .unwrap();
        assert_eq!(denied, SubagentTask::default());
        assert!(
            Gemini
                .recognise(&FrameView::parse(
                    &json!({"toolCallId": "t", "title": "Delegating to agent 'x'"})
                ))
                .is_some()
        );
        for title in [
            "Delegating to agent ''",
            "Delegating to agent 'x",
            "Delegating to x",
            "ReadFile",
        ] {
            assert!(
                Gemini
                    .recognise(&FrameView::parse(
                        &json!({"toolCallId": "t", "title": title})
                    ))
                    .is_none(),
                "{title}"
            );
        }
    }
}
