//! Qwen Code (`qwen --acp`, `agentInfo.name` `qwen-code`, DESIGN 3.3).
//!
//! The launch is a `tool_call` with `_meta.toolName == "agent"` (title `Agent`, `rawInput`
//! `{}` at first); the inputs follow on an update titled `Agent: <description>`. The result
//! is a `rawOutput` of `type: "task_execution"` whose `status` is the agent's own (the ACP
//! tool status says `completed` even when the child failed). Child tool calls and nested
//! launches name their parent in `_meta.parentToolCallId`. A background child (Qwen's
//! default) completes its tool call at once and ends later, in an `agent_message_chunk`
//! whose `_meta.backgroundTask.{toolUseId, status}` names the launch.
//!
//! The child's own message chunks also come on the parent session with
//! `_meta.{parentToolCallId, subagentType, usage}`; the tracker reports them (with that
//! parent and usage) as session updates, never as rows.

use serde_json::Value;

use super::{Caller, DialectRules, RowRef, RowSignal};
use crate::frame::FrameView;
use crate::json::{is_true, metric, text, text_at};
use crate::subagent::{SubagentResult, SubagentTask};

pub(crate) struct Qwen;

impl DialectRules for Qwen {
    fn name(&self) -> &'static str {
        "qwen"
    }

    fn agent_names(&self) -> &'static [&'static str] {
        &["qwen-code"]
    }

    /// `_meta.toolName == "agent"`.
    fn is_launch(&self, view: &FrameView<'_>) -> bool {
        text(view.meta_at("toolName")) == Some("agent")
    }

    /// `rawInput.{description, prompt, subagent_type, run_in_background}`; the
    /// `task_execution` result: `status` verbatim, `subagentName` as the type when none is
    /// known, `executionMode: "background"` -> async, `executionSummary.{totalDurationMs,
    /// totalToolCalls, totalTokens}` -> metrics (`tokenCount` is not the total).
    fn enrich(&self, task: &mut SubagentTask, view: &FrameView<'_>) {
        task.fill_inputs(&view.inputs());
        task.merge_result(&SubagentResult {
            is_async: view
                .raw_input
                .is_some_and(|raw| is_true(raw.get("run_in_background"))),
            ..SubagentResult::default()
        });
        let Some(output) = view
            .raw_output
            .filter(|raw| text_at(raw, "type") == Some("task_execution"))
        else {
            return;
        };
        let summary = output.get("executionSummary").unwrap_or(&Value::Null);
        task.merge_result(&SubagentResult {
            status: text_at(output, "status").map(str::to_owned),
            subagent_type: text_at(output, "subagentName").map(str::to_owned),
            is_async: text_at(output, "executionMode") == Some("background"),
            duration_ms: metric(summary.get("totalDurationMs")),
            tool_use_count: metric(summary.get("totalToolCalls")),
            total_tokens: metric(summary.get("totalTokens")),
            ..SubagentResult::default()
        });
    }

    /// `_meta.parentToolCallId`.
    fn parent<'a>(&self, view: &FrameView<'a>) -> Option<&'a str> {
        text(view.meta_at("parentToolCallId"))
    }

    /// A child's chunk: `_meta.parentToolCallId` and `_meta.usage` (one model call's
    /// token counts).
    fn caller<'a>(&self, update: &'a Value) -> Option<Caller<'a>> {
        let meta = update.get("_meta")?;
        let caller = Caller {
            parent: text_at(meta, "parentToolCallId"),
            usage: meta.get("usage").filter(|usage| usage.is_object()),
        };
        (caller.parent.is_some() || caller.usage.is_some()).then_some(caller)
    }

    /// An `agent_message_chunk` with `_meta.backgroundTask.{toolUseId, status}`.
    fn row_signal(&self, update_kind: &str, update: &Value) -> Option<RowSignal> {
        if update_kind != "agent_message_chunk" {
            return None;
        }
        let task = update.get("_meta")?.get("backgroundTask")?;
        Some(RowSignal {
            row: RowRef::ToolCall(text_at(task, "toolUseId")?.to_owned()),
            agent_status: text_at(task, "status")?.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn enriched(updates: &[Value]) -> SubagentTask {
        let mut task = SubagentTask::default();
        for update in updates {
            Qwen.enrich(&mut task, &FrameView::parse(update));
        }
        task
    }

    #[test]
    fn launch_is_the_agent_tool_name() {
        let launch = json!({"toolCallId": "call_1", "title": "Agent", "status": "pending",
            "rawInput": {}, "_meta": {"toolName": "agent", "phase": "preparing"}});
        assert_eq!(
            Qwen.recognise(&FrameView::parse(&launch)),
            Some(SubagentTask::default())
        );
        for meta in [
            json!({"toolName": "read_file"}),
            json!({"toolName": 1}),
            json!({"claudeCode": {"toolName": "agent"}}),
        ] {
            assert!(
                Qwen.recognise(&FrameView::parse(&json!({"_meta": meta})))
                    .is_none(),
                "{meta}"
            );
        }
    }

    #[test]
    fn foreground_result_gives_status_and_metrics() {
        let task = enriched(&[
            json!({"rawInput": {"description": "Read hello.txt", "prompt": "p",
                "subagent_type": "general-purpose", "run_in_background": false}}),
            json!({"status": "completed", "rawOutput": {"type": "task_execution",
                "subagentName": "other", "executionMode": "foreground", "status": "completed",
                "tokenCount": 25, "executionSummary": {"totalDurationMs": 1813,
                "totalToolCalls": 1, "totalTokens": 230}}}),
        ]);
        assert_eq!(task.description, "Read hello.txt");
        assert_eq!(task.subagent_type, "general-purpose");
        assert_eq!(task.status.as_deref(), Some("completed"));
        assert_eq!(
            (task.total_tokens, task.duration_ms, task.tool_use_count),
            (Some(230), Some(1813), Some(1))
        );
        assert!(!task.is_async);
    }

    #[test]
    fn failed_and_background_results() {
        let failed = enriched(&[
            json!({"status": "completed", "rawOutput": {"type": "task_execution",
            "subagentName": "general-purpose", "status": "failed", "terminateReason": "400"}}),
        ]);
        assert_eq!(failed.status.as_deref(), Some("failed"));
        assert_eq!(failed.subagent_type, "general-purpose");
        assert_eq!(
            (
                failed.total_tokens,
                failed.duration_ms,
                failed.tool_use_count
            ),
            (None, None, None)
        );
        let background = enriched(&[json!({"rawOutput": {"type": "task_execution",
            "executionMode": "background", "status": "background"}})]);
        assert!(background.is_async);
        assert_eq!(background.status.as_deref(), Some("background"));
        assert!(enriched(&[json!({"rawInput": {"run_in_background": true}})]).is_async);
        let other = enriched(&[
            json!({"rawOutput": {"status": "failed", "executionSummary": {"totalTokens": 5}}}),
        ]);
        assert_eq!((other.status, other.total_tokens), (None, None));
    }

    #[test]
    fn parent_and_background_end() {
        let child = json!({"_meta": {"toolName": "read_file", "parentToolCallId": "call_1"}});
        assert_eq!(Qwen.parent(&FrameView::parse(&child)), Some("call_1"));
        let end = json!({"content": {"type": "text", "text": "done"}, "_meta": {"backgroundTask": {
            "taskId": "general-purpose-call_1", "status": "completed", "toolUseId": "call_1"}}});
        assert_eq!(
            Qwen.row_signal("agent_message_chunk", &end),
            Some(RowSignal {
                row: RowRef::ToolCall("call_1".into()),
                agent_status: "completed".into()
            })
        );
        assert_eq!(Qwen.row_signal("tool_call_update", &end), None);
        let partial = json!({"_meta": {"backgroundTask": {"toolUseId": "call_1"}}});
        assert_eq!(Qwen.row_signal("agent_message_chunk", &partial), None);
    }

    #[test]
    fn child_chunks_name_their_caller_and_usage() {
        let chunk = json!({"content": {"type": "text", "text": ""}, "_meta": {
            "usage": {"inputTokens": 102, "outputTokens": 12}, "parentToolCallId": "call_1",
            "subagentType": "general-purpose"}});
        let caller = Qwen.caller(&chunk).unwrap();
        assert_eq!(caller.parent, Some("call_1"));
        assert_eq!(
            caller.usage,
            Some(&json!({"inputTokens": 102, "outputTokens": 12}))
        );
        assert_eq!(Qwen.caller(&json!({"_meta": {"usage": 3}})), None);
    }
}
