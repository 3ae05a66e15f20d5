//! Copilot CLI (`copilot --acp`, `agentInfo.name` `Copilot`, DESIGN 3.3): the `task` tool,
//! recognised by its `rawInput` holding a string `prompt` and a string `agent_type` (no
//! `_meta`; the title is the description, free text). `mode: "background"` runs it in the
//! background (its launch completes at once); `rawOutput.content` is the result text. A
//! cancelled call never gets a terminal frame. The child's own tool calls carry
//! `_meta["github.com/copilot"].agentId`, which nothing on the launch names, so they are
//! not linked to it.

use serde_json::Value;

use super::DialectRules;
use crate::frame::FrameView;
use crate::json::text;
use crate::subagent::{SubagentInputs, SubagentResult, SubagentTask};

pub(crate) struct Copilot;

impl DialectRules for Copilot {
    fn name(&self) -> &'static str {
        "copilot"
    }

    fn agent_names(&self) -> &'static [&'static str] {
        &["Copilot"]
    }

    fn is_launch(&self, view: &FrameView<'_>) -> bool {
        view.raw_input.is_some_and(|raw| {
            raw.get("prompt").is_some_and(Value::is_string)
                && raw.get("agent_type").is_some_and(Value::is_string)
        })
    }

    /// `rawInput.{description, prompt, agent_type, mode}`; `rawOutput.content`.
    fn enrich(&self, task: &mut SubagentTask, view: &FrameView<'_>) {
        task.fill_inputs(&SubagentInputs {
            description: view.input_text("description").map(str::to_owned),
            prompt: view.input_text("prompt").map(str::to_owned),
            subagent_type: view.input_text("agent_type").map(str::to_owned),
        });
        task.merge_result(&SubagentResult {
            is_async: view.input_text("mode") == Some("background"),
            result_text: text(view.output_at("content")).map(str::to_owned),
            ..SubagentResult::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn launch_needs_string_prompt_and_agent_type() {
        let task = Copilot
            .recognise(&FrameView::parse(
                &json!({"toolCallId": "call_1", "title": "Read hello.txt",
                "status": "pending", "rawInput": {"description": "Read hello.txt", "prompt": "p",
                "agent_type": "general-purpose", "name": "reader-a"}}),
            ))
            .unwrap();
        assert_eq!(
            (
                task.description.as_str(),
                task.prompt.as_str(),
                task.subagent_type.as_str()
            ),
            ("Read hello.txt", "p", "general-purpose")
        );
        assert!(!task.is_async);
        for raw in [
            json!({"prompt": "p"}),
            json!({"agent_type": "x"}),
            json!({"prompt": 1, "agent_type": "x"}),
            json!({"agent_id": "a", "since_turn": 1}),
        ] {
            assert!(
                Copilot
                    .recognise(&FrameView::parse(&json!({"rawInput": raw})))
                    .is_none(),
                "{raw}"
            );
        }
    }

    #[test]
    fn background_mode_and_result_text() {
        let task = Copilot
            .recognise(&FrameView::parse(
                &json!({"rawInput": {"prompt": "p", "agent_type": "t", "mode": "background"}}),
            ))
            .unwrap();
        assert!(task.is_async);
        let mut task = SubagentTask::default();
        Copilot.enrich(
            &mut task,
            &FrameView::parse(&json!({"status": "completed",
            "rawOutput": {"content": "hello.txt says: hi", "detailedContent": "…"}})),
        );
        assert_eq!(task.result_text.as_deref(), Some("hello.txt says: hi"));
    }
}
