//! claude-agent-acp (Zed's `@zed-industries/…` 0.2x and `@agentclientprotocol/…` 0.10x,
//! DESIGN 3.3): the `Agent` tool call, its `_meta.claudeCode.toolResponse`, the
//! `parentToolUseId` of child tool calls, the background dispatch (`async_launched`) and,
//! without `clientCapabilities.subagents`, the background child's end as a parent
//! `usage_update` whose `_meta["_claude/origin"]` is a peer hand-back.
//!
//! With the capability the same agent speaks ACP's own subagent sessions instead (no
//! Agent tool call on the wire); their field mapping is [`NATIVE_FIELDS`].

use serde_json::{Map, Value};

use super::{DialectRules, NativeField, NativeFields, RowRef, RowSignal};
use crate::frame::{FrameView, content_text};
use crate::json::{is_true, metric, object_at, text};
use crate::subagent::{SubagentInputs, SubagentResult, SubagentTask};

pub(crate) struct Claude;

impl DialectRules for Claude {
    fn name(&self) -> &'static str {
        "claude"
    }

    fn agent_names(&self) -> &'static [&'static str] {
        &[
            "@agentclientprotocol/claude-agent-acp",
            "@zed-industries/claude-agent-acp",
        ]
    }

    /// `_meta.claudeCode.toolName == "Agent"` (not `Monitor`, `ScheduleWakeup`, …).
    fn is_launch(&self, view: &FrameView<'_>) -> bool {
        claude_meta(view)
            .and_then(|meta| meta.get("toolName"))
            .and_then(Value::as_str)
            == Some("Agent")
    }

    fn enrich(&self, task: &mut SubagentTask, view: &FrameView<'_>) {
        task.fill_inputs(&view.inputs());
        if let Some(response) = tool_response(view) {
            task.merge_result(&claude_response(response));
        }
    }

    /// `_meta.claudeCode.parentToolUseId` (strings only).
    fn parent<'a>(&self, view: &FrameView<'a>) -> Option<&'a str> {
        text(claude_meta(view)?.get("parentToolUseId"))
    }

    /// `toolResponse.status == "async_launched"`: dispatched to the background.
    fn dispatched(&self, view: &FrameView<'_>) -> bool {
        tool_response(view)
            .and_then(|response| response.get("status"))
            .and_then(Value::as_str)
            == Some("async_launched")
    }

    /// A parent `usage_update` with `_meta["_claude/origin"] = {kind: "peer", from:
    /// <agentId>, handback: true}`: the background child `from` has ended.
    fn row_signal(&self, update_kind: &str, update: &Value) -> Option<RowSignal> {
        if update_kind != "usage_update" {
            return None;
        }
        let origin = update.get("_meta")?.get("_claude/origin")?;
        let peer = text(origin.get("kind")) == Some("peer") && is_true(origin.get("handback"));
        let from = text(origin.get("from")).filter(|_| peer)?;
        Some(RowSignal {
            row: RowRef::AgentId(from.to_owned()),
            agent_status: "completed".to_owned(),
        })
    }

    fn native_fields(&self) -> NativeFields {
        NATIVE_FIELDS
    }
}

/// claude-agent-acp's subagent sessions: `title` is the Agent call's description,
/// `description` the subagent type, and the child session id is Claude's `agentId`.
const NATIVE_FIELDS: NativeFields = NativeFields {
    description: &[NativeField::Title],
    subagent_type: Some(NativeField::Description),
    child_is_agent_id: true,
};

fn claude_meta<'a>(view: &FrameView<'a>) -> Option<&'a Value> {
    view.meta_at("claudeCode")
}

fn tool_response<'a>(view: &FrameView<'a>) -> Option<&'a Map<String, Value>> {
    object_at(claude_meta(view)?, "toolResponse")
}

/// Claude's subagent result object: `_meta.claudeCode.toolResponse` on the wire and
/// the `toolUseResult` of Claude Code's own session logs, which is the same object
/// (claude-agent-acp forwards it). `status: "async_launched"` is a background dispatch
/// as much as `isAsync: true` is.
pub(crate) fn claude_response(response: &Map<String, Value>) -> SubagentResult {
    let field = |key: &str| text(response.get(key)).map(str::to_owned);
    SubagentResult {
        status: field("status"),
        agent_id: field("agentId"),
        subagent_type: field("agentType"),
        model: field("resolvedModel"),
        output_file: field("outputFile"),
        duration_ms: metric(response.get("totalDurationMs")),
        total_tokens: metric(response.get("totalTokens")),
        tool_use_count: metric(response.get("totalToolUseCount")),
        is_async: is_true(response.get("isAsync"))
            || text(response.get("status")) == Some("async_launched"),
        can_read_output_file: is_true(response.get("canReadOutputFile")),
        result_text: content_text(response.get("content")),
        child_session_id: None,
    }
}

impl SubagentTask {
    /// Merges a Claude result object (`toolResponse` on the wire, `toolUseResult` in
    /// Claude Code's own logs) by the Claude rule of DESIGN 3.3, exactly as a live frame
    /// carrying it would; its `description` and `prompt` only fill empty inputs.
    pub fn merge_claude_result(&mut self, response: &Map<String, Value>) {
        let field = |key: &str| text(response.get(key)).map(str::to_owned);
        self.fill_inputs(&SubagentInputs {
            description: field("description"),
            prompt: field("prompt"),
            subagent_type: None,
        });
        self.merge_result(&claude_response(response));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn recognised(update: Value) -> Option<SubagentTask> {
        let view = FrameView::parse(&update);
        Claude.is_launch(&view).then(|| {
            let mut task = SubagentTask::default();
            Claude.enrich(&mut task, &view);
            task
        })
    }

    fn enriched(updates: &[Value]) -> SubagentTask {
        let mut task = SubagentTask::default();
        for update in updates {
            Claude.enrich(&mut task, &FrameView::parse(update));
        }
        task
    }

    #[test]
    fn agent_is_recognised_with_empty_or_full_input() {
        let task = recognised(json!({
            "toolCallId": "t", "title": "Task", "rawInput": {},
            "_meta": {"claudeCode": {"toolName": "Agent"}}
        }))
        .unwrap();
        assert_eq!(task, SubagentTask::default());
        let task = recognised(json!({
            "rawInput": {"description": "d", "prompt": "p", "subagent_type": "general-purpose"},
            "_meta": {"claudeCode": {"toolName": "Agent"}}
        }))
        .unwrap();
        assert_eq!(
            (task.description.as_str(), task.prompt.as_str()),
            ("d", "p")
        );
        assert_eq!(task.subagent_type, "general-purpose");
    }

    #[test]
    fn non_agent_tools_are_not_subagents() {
        for tool in ["Monitor", "ScheduleWakeup", "Bash", "agent", "Task"] {
            let update = json!({"title": "x", "_meta": {"claudeCode": {"toolName": tool}}});
            assert!(recognised(update).is_none(), "{tool}");
        }
        assert!(recognised(json!({"_meta": {"claudeCode": {"toolName": 1}}})).is_none());
        assert!(recognised(json!({})).is_none());
        assert!(recognised(json!({"title": "Bash", "rawInput": {"command": "ls"}})).is_none());
    }

    #[test]
    fn tool_response_is_extracted() {
        let task = enriched(&[json!({"_meta": {"claudeCode": {"toolResponse": {
            "agentId": "agent_abc", "agentType": "general-purpose", "status": "completed",
            "totalDurationMs": 12345, "totalTokens": 6789.7, "totalToolUseCount": 11,
            "resolvedModel": "claude-opus-4-8[1m]",
            "content": [{"type": "text", "text": "  line one"}, {"type": "image"},
                        {"type": "text", "text": "   "}, {"type": "text", "text": "two"}]
        }}}})]);
        assert_eq!(task.agent_id.as_deref(), Some("agent_abc"));
        assert_eq!(task.subagent_type, "general-purpose");
        assert_eq!(task.status.as_deref(), Some("completed"));
        assert_eq!(task.duration_ms, Some(12345));
        assert_eq!(task.total_tokens, Some(6789));
        assert_eq!(task.tool_use_count, Some(11));
        assert_eq!(task.model.as_deref(), Some("claude-opus-4-8[1m]"));
        assert_eq!(task.result_text.as_deref(), Some("  line one\ntwo"));
    }

    #[test]
    fn tool_use_count_is_reported_iff_a_number() {
        let count = |response: Value| {
            enriched(&[json!({"_meta": {"claudeCode": {"toolResponse": response}}})]).tool_use_count
        };
        assert_eq!(count(json!({"totalToolUseCount": 0})), Some(0));
        assert_eq!(count(json!({"status": "completed"})), None);
        assert_eq!(count(json!({"totalToolUseCount": "11"})), None);
    }

    #[test]
    fn result_text_survives_later_empty_frames() {
        let task = enriched(&[
            json!({"_meta": {"claudeCode": {"toolResponse": {"content": [{"type": "text", "text": "VERDICT"}]}}}}),
            json!({"_meta": {"claudeCode": {"toolResponse": {"content": []}}}}),
            json!({"_meta": {"claudeCode": {"toolResponse": {"content": "not an array"}}}}),
        ]);
        assert_eq!(task.result_text.as_deref(), Some("VERDICT"));
    }

    #[test]
    fn async_launch_sets_async_fields_without_metrics() {
        let update = json!({"_meta": {"claudeCode": {"toolResponse": {
            "agentId": "ab9a", "status": "async_launched", "isAsync": true,
            "outputFile": "/tmp/tasks/ab9a.output", "canReadOutputFile": true
        }}}});
        assert!(Claude.dispatched(&FrameView::parse(&update)));
        let task = enriched(&[update]);
        assert!(task.is_async && task.can_read_output_file);
        assert_eq!(task.status.as_deref(), Some("async_launched"));
        assert_eq!(task.output_file.as_deref(), Some("/tmp/tasks/ab9a.output"));
        assert_eq!(
            (task.duration_ms, task.total_tokens, task.tool_use_count),
            (None, None, None)
        );
        let completed = json!({"_meta": {"claudeCode": {"toolResponse": {"status": "completed"}}}});
        assert!(!Claude.dispatched(&FrameView::parse(&completed)));
        let alone = enriched(&[
            json!({"_meta": {"claudeCode": {"toolResponse": {"status": "async_launched"}}}}),
        ]);
        assert!(alone.is_async);
    }

    /// Claude Code's own logs carry the same object as `toolUseResult`: importing it
    /// gives the task a live frame gives (plus its description and prompt as inputs).
    #[test]
    fn a_claude_log_result_merges_as_the_live_frame_does() {
        let response = json!({
            "agentId": "a1", "agentType": "reviewer", "status": "completed",
            "totalDurationMs": 900, "totalTokens": 1234, "totalToolUseCount": 0,
            "resolvedModel": "claude-opus-4-8", "isAsync": false,
            "content": [{"type": "text", "text": "VERDICT"}],
            "description": "Review", "prompt": "Review the diff"
        });
        let live = enriched(&[json!({"_meta": {"claudeCode": {"toolResponse": response}}})]);
        let mut imported = SubagentTask::default();
        imported.merge_claude_result(response.as_object().unwrap());
        assert_eq!(
            (imported.description.as_str(), imported.prompt.as_str()),
            ("Review", "Review the diff")
        );
        imported.description.clear();
        imported.prompt.clear();
        assert_eq!(imported, live);
        assert_eq!(live.tool_use_count, Some(0));
        assert_eq!(live.model.as_deref(), Some("claude-opus-4-8"));
    }

    #[test]
    fn parent_is_read_from_strings_only() {
        let parent = |meta: Value| {
            let update = json!({"_meta": meta});
            Claude.parent(&FrameView::parse(&update)).map(str::to_owned)
        };
        assert_eq!(
            parent(json!({"claudeCode": {"parentToolUseId": "toolu_01"}})),
            Some("toolu_01".into())
        );
        assert_eq!(parent(json!({"claudeCode": {"parentToolUseId": 5}})), None);
        assert_eq!(
            parent(json!({"claudeCode": {"parentToolUseId": null}})),
            None
        );
        assert_eq!(parent(json!({"claudeCode": {}})), None);
        assert_eq!(parent(json!({})), None);
    }

    #[test]
    fn only_a_peer_hand_back_is_a_background_end() {
        let signal = |origin: Value| {
            Claude.row_signal(
                "usage_update",
                &json!({"used": 1, "_meta": {"_claude/origin": origin}}),
            )
        };
        assert_eq!(
            signal(json!({"kind": "peer", "from": "a1", "handback": true, "body": "…"})),
            Some(RowSignal {
                row: RowRef::AgentId("a1".into()),
                agent_status: "completed".into()
            })
        );
        assert_eq!(signal(json!({"kind": "peer", "from": "a1"})), None);
        assert_eq!(
            signal(json!({"kind": "human", "from": "a1", "handback": true})),
            None
        );
        assert_eq!(
            signal(json!({"kind": "peer", "from": 7, "handback": true})),
            None
        );
        assert_eq!(signal(json!({"kind": "task-notification"})), None);
        assert_eq!(
            Claude.row_signal(
                "agent_message_chunk",
                &json!({"_meta": {"_claude/origin": {"kind": "peer", "from": "a1", "handback": true}}})
            ),
            None
        );
    }

    /// With the subagents capability: `title` -> description, `description` -> type, the
    /// child session id -> agent id.
    #[test]
    fn subagent_session_fields() {
        let meta = crate::dialect::native::NativeMeta {
            title: Some("Read hello.txt".into()),
            description: Some("general-purpose".into()),
        };
        let mut task = SubagentTask::default();
        meta.apply_to(&mut task, Claude.native_fields(), "kid");
        assert_eq!(
            (task.description, task.subagent_type, task.agent_id),
            (
                "Read hello.txt".into(),
                "general-purpose".into(),
                Some("kid".into())
            )
        );
        assert!(!Claude.native_fields().description_is_description());
    }
}
