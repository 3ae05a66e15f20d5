//! fanout's reference agent (DESIGN 5.2): its `_meta.fanout.subagent` block
//! ([`FanoutSubagentMeta`]) on the subagent tool call, which also links the child session
//! (`childSessionId` and, when the client advertised `clientCapabilities.subagents`, a
//! `{"type":"session"}` content block).

use super::{CommandMatch, DialectRules};
use crate::fanout_subagent::FanoutSubagentMeta;
use crate::frame::FrameView;
use crate::subagent::{SubagentResult, SubagentTask};

pub(crate) struct Fanout;

impl DialectRules for Fanout {
    fn name(&self) -> &'static str {
        "fanout"
    }

    fn agent_names(&self) -> &'static [&'static str] {
        &["fanout-agent"]
    }

    /// `_meta.fanout.subagent` is an object.
    fn is_launch(&self, view: &FrameView<'_>) -> bool {
        meta(view).is_some()
    }

    /// `_meta.fanout.subagent.{childSessionId, subagentType, status, model, totalTokens,
    /// durationMs, toolUseCount}` (`mode` has no payload field).
    fn enrich(&self, task: &mut SubagentTask, view: &FrameView<'_>) {
        task.fill_inputs(&view.inputs());
        let Some(meta) = meta(view) else {
            return;
        };
        task.merge_result(&SubagentResult {
            subagent_type: meta.subagent_type().map(str::to_owned),
            child_session_id: meta.child_session_id,
            status: meta.status,
            model: meta.model,
            total_tokens: meta.total_tokens,
            duration_ms: meta.duration_ms,
            tool_use_count: meta.tool_use_count,
            ..SubagentResult::default()
        });
    }

    /// `fanout agent` may be fanout's reference agent; fanout's name is also in the paths
    /// of every checkout of it, so another agent's name in the command wins.
    fn command_names_it(&self, command: &str) -> CommandMatch {
        if command.contains("fanout") && command.contains("agent") {
            CommandMatch::MayName
        } else {
            CommandMatch::No
        }
    }

    /// `_meta.fanout.subagent.childSessionId` of any frame: the child it links.
    fn child_session(&self, view: &FrameView<'_>) -> Option<String> {
        meta(view)?.child_session_id
    }
}

fn meta(view: &FrameView<'_>) -> Option<FanoutSubagentMeta> {
    FanoutSubagentMeta::from_meta(view.meta?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_block_must_be_an_object() {
        let task = Fanout
            .recognise(&FrameView::parse(&json!({
                "title": "task",
                "rawInput": {"description": "d", "prompt": "p"},
                "_meta": {"fanout": {"subagent": {"childSessionId": "c"}}}
            })))
            .unwrap();
        assert_eq!(task.description, "d");
        assert!(
            Fanout
                .recognise(&FrameView::parse(
                    &json!({"_meta": {"fanout": {"subagent": "yes"}}})
                ))
                .is_none()
        );
    }

    #[test]
    fn the_block_enriches() {
        let mut task = SubagentTask::default();
        Fanout.enrich(
            &mut task,
            &FrameView::parse(&json!({
                "rawInput": {"description": "d", "prompt": "p", "subagent_type": "explorer"},
                "_meta": {"fanout": {"subagent": {
                    "childSessionId": "child-1", "mode": "fork", "subagentType": "other",
                    "status": "running", "model": "m", "totalTokens": 10, "durationMs": 0, "toolUseCount": 0
                }}}
            })),
        );
        assert_eq!(task.child_session_id.as_deref(), Some("child-1"));
        assert_eq!(task.subagent_type, "explorer");
        assert_eq!(task.status.as_deref(), Some("running"));
        assert_eq!(task.model.as_deref(), Some("m"));
        assert_eq!(
            (task.total_tokens, task.duration_ms, task.tool_use_count),
            (Some(10), None, Some(0))
        );
    }
}
