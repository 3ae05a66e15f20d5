//! Subagent recognition and result extraction for the tool-call dialects of DESIGN 3.3
//! (Claude, OpenCode, Cursor, Auggie, fanout's own agent). Codex lives in `codex.rs`, the
//! ACP-native `subagent_update` in the tracker. Everything here is a pure function of
//! one `session/update` payload.

use serde_json::{Map, Value};

use crate::fanout_subagent::FanoutSubagentMeta;
use crate::json::{is_true, metric, object_at, present_at, text, text_at};
use crate::subagent::{SubagentInputs, SubagentResult, SubagentTask};

/// Which rule recognised a tool call as a subagent launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// `_meta.claudeCode.toolName == "Agent"`.
    Claude,
    /// Title `task` (trimmed, any case).
    OpenCode,
    /// `rawInput._toolName` `task` (any case), plus the `cursor/task` side request.
    Cursor,
    /// Title `sub-agent-<type>: <description>`.
    Auggie,
    /// `spawnAgent` collaboration or `subagent` lifecycle frames (v1 and v2 shapes).
    Codex,
    /// ACP's own `subagent_update`.
    AcpNative,
    /// fanout's reference agent: `_meta.fanout.subagent`.
    Fanout,
}

impl Dialect {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::OpenCode => "opencode",
            Self::Cursor => "cursor",
            Self::Auggie => "auggie",
            Self::Codex => "codex",
            Self::AcpNative => "acp-native",
            Self::Fanout => "fanout",
        }
    }
}

/// Borrowed view of the fields of a `tool_call` / `tool_call_update` that matter here.
/// Absent, `null`, empty and wrong-typed all read as `None`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FrameView<'a> {
    pub tool_call_id: Option<&'a str>,
    pub title: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub status: Option<&'a str>,
    pub raw_input: Option<&'a Value>,
    pub raw_output: Option<&'a Value>,
    pub content: Option<&'a Value>,
    pub locations: Option<&'a Value>,
    pub meta: Option<&'a Value>,
}

impl<'a> FrameView<'a> {
    pub(crate) fn parse(update: &'a Value) -> Self {
        Self {
            tool_call_id: text_at(update, "toolCallId"),
            title: text_at(update, "title"),
            kind: text_at(update, "kind"),
            status: text_at(update, "status"),
            raw_input: present_at(update, "rawInput"),
            raw_output: present_at(update, "rawOutput"),
            content: present_at(update, "content"),
            locations: present_at(update, "locations"),
            meta: present_at(update, "_meta"),
        }
    }

    /// DESIGN 3.4: a status-less frame with any of these is an `in_progress` change.
    pub(crate) fn carries_payload(&self) -> bool {
        self.title.is_some()
            || self.raw_input.is_some()
            || self.content.is_some()
            || self.locations.is_some()
    }

    fn claude(&self) -> Option<&'a Value> {
        self.meta?.get("claudeCode")
    }

    /// `_meta.claudeCode.parentToolUseId` (strings only).
    pub(crate) fn claude_parent(&self) -> Option<&'a str> {
        text(self.claude()?.get("parentToolUseId"))
    }

    fn claude_tool_response(&self) -> Option<&'a Map<String, Value>> {
        object_at(self.claude()?, "toolResponse")
    }

    /// Claude's background dispatch: `toolResponse.status == "async_launched"`.
    pub(crate) fn is_async_launch(&self) -> bool {
        self.claude_tool_response()
            .and_then(|response| response.get("status"))
            .and_then(Value::as_str)
            == Some("async_launched")
    }

    /// `_meta.fanout.subagent` when it is an object, read leniently.
    pub(crate) fn fanout_subagent(&self) -> Option<FanoutSubagentMeta> {
        FanoutSubagentMeta::from_meta(self.meta?)
    }

    /// Child sessions linked by `{"type":"session","sessionId":…}` content blocks.
    pub(crate) fn session_links(&self) -> Vec<&'a str> {
        let Some(blocks) = self.content.and_then(Value::as_array) else {
            return Vec::new();
        };
        let mut links: Vec<&str> = Vec::new();
        for block in blocks {
            if block.get("type").and_then(Value::as_str) == Some("session")
                && let Some(session) = text_at(block, "sessionId")
                && !links.contains(&session)
            {
                links.push(session);
            }
        }
        links
    }

    /// `rawInput.{description, prompt, subagent_type}`.
    pub(crate) fn inputs(&self) -> SubagentInputs {
        let Some(raw) = self.raw_input else {
            return SubagentInputs::default();
        };
        SubagentInputs {
            description: text_at(raw, "description").map(str::to_owned),
            prompt: text_at(raw, "prompt").map(str::to_owned),
            subagent_type: text_at(raw, "subagent_type").map(str::to_owned),
        }
    }
}

/// Runs the launch rules on a `tool_call` frame. Codex is checked by the caller first.
pub(crate) fn recognise(view: &FrameView<'_>) -> Option<(Dialect, SubagentTask)> {
    let dialect = if view.fanout_subagent().is_some() {
        Dialect::Fanout
    } else if view
        .claude()
        .and_then(|c| c.get("toolName"))
        .and_then(Value::as_str)
        == Some("Agent")
    {
        Dialect::Claude
    } else if view
        .title
        .is_some_and(|title| title.trim().eq_ignore_ascii_case("task"))
    {
        Dialect::OpenCode
    } else if view
        .raw_input
        .and_then(|raw| raw.get("_toolName"))
        .and_then(Value::as_str)
        .is_some_and(|name| name.eq_ignore_ascii_case("task"))
    {
        Dialect::Cursor
    } else if view.title.and_then(auggie_title).is_some() {
        Dialect::Auggie
    } else {
        return None;
    };
    let mut task = SubagentTask::from_inputs(view.inputs());
    if dialect == Dialect::Auggie
        && let Some((subagent_type, description)) = view.title.and_then(auggie_title)
    {
        // rawInput wins; the title only fills what it left empty.
        task.fill_inputs(&SubagentInputs {
            description: Some(description.to_owned()),
            prompt: None,
            subagent_type: Some(subagent_type.to_owned()),
        });
    }
    Some((dialect, task))
}

/// Parses `sub-agent-<type>: <description>` into `(type, description)`.
pub(crate) fn auggie_title(title: &str) -> Option<(&str, &str)> {
    let rest = title.strip_prefix("sub-agent-")?;
    let (subagent_type, description) = rest.split_once(':')?;
    let subagent_type = subagent_type.trim();
    if subagent_type.is_empty() {
        return None;
    }
    Some((subagent_type, description.trim()))
}

/// Applies everything one frame says about a recognised subagent: later inputs fill
/// empty fields, and every result shape is merged (not dialect-gated, except Auggie's
/// bare `output`, which is read only for Auggie-recognised calls).
pub(crate) fn enrich(task: &mut SubagentTask, dialect: Dialect, view: &FrameView<'_>) {
    task.fill_inputs(&view.inputs());
    if let Some(result) = claude_result(view) {
        task.merge_result(&result);
    }
    if let Some(result) = opencode_result(view) {
        task.merge_result(&result);
    }
    if let Some(result) = cursor_result(view) {
        task.merge_result(&result);
    }
    if dialect == Dialect::Auggie
        && let Some(output) = view.raw_output.and_then(|raw| text_at(raw, "output"))
    {
        task.merge_result(&SubagentResult {
            result_text: Some(output.to_owned()),
            ..SubagentResult::default()
        });
    }
    if let Some(result) = fanout_result(view) {
        task.merge_result(&result);
    }
}

fn owned(value: Option<&str>) -> Option<String> {
    value.map(str::to_owned)
}

/// `_meta.claudeCode.toolResponse`.
fn claude_result(view: &FrameView<'_>) -> Option<SubagentResult> {
    view.claude_tool_response().map(claude_response)
}

/// Claude's subagent result object: `_meta.claudeCode.toolResponse` on the wire and
/// the `toolUseResult` of Claude Code's own session logs, which is the same object
/// (claude-agent-acp forwards it). `status: "async_launched"` is a background dispatch
/// as much as `isAsync: true` is.
pub(crate) fn claude_response(response: &Map<String, Value>) -> SubagentResult {
    let field = |key: &str| text(response.get(key));
    SubagentResult {
        status: owned(field("status")),
        agent_id: owned(field("agentId")),
        subagent_type: owned(field("agentType")),
        model: owned(field("resolvedModel")),
        output_file: owned(field("outputFile")),
        duration_ms: metric(response.get("totalDurationMs")),
        total_tokens: metric(response.get("totalTokens")),
        tool_use_count: metric(response.get("totalToolUseCount")),
        is_async: is_true(response.get("isAsync")) || field("status") == Some("async_launched"),
        can_read_output_file: is_true(response.get("canReadOutputFile")),
        result_text: content_text(response.get("content")),
        child_session_id: None,
    }
}

/// Text blocks with non-blank text, joined by `\n`, verbatim.
fn content_text(content: Option<&Value>) -> Option<String> {
    let blocks = content?.as_array()?;
    let texts: Vec<&str> = blocks
        .iter()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .filter(|text| !text.trim().is_empty())
        .collect();
    if texts.is_empty() {
        None
    } else {
        Some(texts.join("\n"))
    }
}

/// `rawOutput.metadata.{sessionId, model{providerID, modelID}}`.
fn opencode_result(view: &FrameView<'_>) -> Option<SubagentResult> {
    let metadata = view.raw_output?.get("metadata")?;
    let child_session_id = text_at(metadata, "sessionId");
    let model = metadata.get("model").and_then(|model| {
        match (text_at(model, "providerID"), text_at(model, "modelID")) {
            (Some(provider), Some(model)) => Some(format!("{provider}/{model}")),
            (Some(part), None) | (None, Some(part)) => Some(part.to_owned()),
            (None, None) => None,
        }
    });
    if child_session_id.is_none() && model.is_none() {
        return None;
    }
    Some(SubagentResult {
        child_session_id: owned(child_session_id),
        model,
        ..SubagentResult::default()
    })
}

/// Flat `rawOutput.{durationMs, isBackground}`.
fn cursor_result(view: &FrameView<'_>) -> Option<SubagentResult> {
    let raw = view.raw_output?.as_object()?;
    if !raw.contains_key("durationMs") && !raw.contains_key("isBackground") {
        return None;
    }
    Some(SubagentResult {
        duration_ms: metric(raw.get("durationMs")),
        is_async: is_true(raw.get("isBackground")),
        ..SubagentResult::default()
    })
}

/// `_meta.fanout.subagent.{childSessionId, subagentType, status, model, totalTokens,
/// durationMs, toolUseCount}` (`mode` has no payload field).
fn fanout_result(view: &FrameView<'_>) -> Option<SubagentResult> {
    let meta = view.fanout_subagent()?;
    Some(SubagentResult {
        subagent_type: owned(meta.subagent_type()),
        child_session_id: meta.child_session_id,
        status: meta.status,
        model: meta.model,
        total_tokens: meta.total_tokens,
        duration_ms: meta.duration_ms,
        tool_use_count: meta.tool_use_count,
        ..SubagentResult::default()
    })
}

/// `_meta.fanout.subagent.childSessionId`.
pub(crate) fn fanout_child(view: &FrameView<'_>) -> Option<String> {
    view.fanout_subagent()?.child_session_id
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn recognised(update: Value) -> Option<(Dialect, SubagentTask)> {
        recognise(&FrameView::parse(&update))
    }

    fn enriched(dialect: Dialect, updates: &[Value]) -> SubagentTask {
        let mut task = SubagentTask::default();
        for update in updates {
            enrich(&mut task, dialect, &FrameView::parse(update));
        }
        task
    }

    #[test]
    fn claude_agent_is_recognised_with_empty_or_full_input() {
        let (dialect, task) = recognised(json!({
            "toolCallId": "t", "title": "Task", "rawInput": {},
            "_meta": {"claudeCode": {"toolName": "Agent"}}
        }))
        .unwrap();
        assert_eq!(dialect, Dialect::Claude);
        assert_eq!(task, SubagentTask::default());
        let (_, task) = recognised(json!({
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
    fn claude_non_agent_tools_are_not_subagents() {
        for tool in ["Monitor", "ScheduleWakeup", "Bash", "agent", "Task"] {
            let update = json!({"title": "x", "_meta": {"claudeCode": {"toolName": tool}}});
            assert!(recognised(update).is_none(), "{tool}");
        }
        assert!(recognised(json!({"_meta": {"claudeCode": {"toolName": 1}}})).is_none());
        assert!(recognised(json!({})).is_none());
        assert!(recognised(json!({"title": "Bash", "rawInput": {"command": "ls"}})).is_none());
    }

    #[test]
    fn opencode_title_task_any_case_trimmed() {
        for title in ["task", "Task", "TASK", "  task "] {
            let (dialect, _) = recognised(json!({"title": title})).unwrap();
            assert_eq!(dialect, Dialect::OpenCode);
        }
        assert!(recognised(json!({"title": "tasks"})).is_none());
        assert!(recognised(json!({"title": "Task: Subagent task"})).is_none());
    }

    #[test]
    fn cursor_tool_name_task_any_case() {
        let (dialect, _) = recognised(json!({
            "title": "Task: Subagent task", "rawInput": {"_toolName": "TASK"}
        }))
        .unwrap();
        assert_eq!(dialect, Dialect::Cursor);
        assert!(recognised(json!({"rawInput": {"_toolName": "read"}})).is_none());
        assert!(recognised(json!({"rawInput": {"_toolName": ["task"]}})).is_none());
    }

    #[test]
    fn auggie_title_parsing() {
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
        assert_eq!(auggie_title("sub-agent-explore find it"), None);
        assert_eq!(auggie_title("sub-agent-: x"), None);
        assert_eq!(auggie_title("sub-agent-  : x"), None);
        assert_eq!(auggie_title("Sub-agent-explore: x"), None);
        assert_eq!(auggie_title("explore: x"), None);
    }

    #[test]
    fn auggie_title_fills_only_what_raw_input_left_empty() {
        let (dialect, task) =
            recognised(json!({"title": "sub-agent-explore: find the bug"})).unwrap();
        assert_eq!(dialect, Dialect::Auggie);
        assert_eq!(
            (task.subagent_type.as_str(), task.description.as_str()),
            ("explore", "find the bug")
        );
        let (_, task) = recognised(json!({
            "title": "sub-agent-explore: truncated…",
            "rawInput": {"description": "the full description"}
        }))
        .unwrap();
        assert_eq!(task.description, "the full description");
        assert_eq!(task.subagent_type, "explore");
    }

    #[test]
    fn fanout_meta_block_wins_and_must_be_an_object() {
        let (dialect, task) = recognised(json!({
            "title": "task",
            "rawInput": {"description": "d", "prompt": "p"},
            "_meta": {"fanout": {"subagent": {"childSessionId": "c"}}}
        }))
        .unwrap();
        assert_eq!(dialect, Dialect::Fanout);
        assert_eq!(task.description, "d");
        assert!(recognised(json!({"_meta": {"fanout": {"subagent": "yes"}}})).is_none());
    }

    #[test]
    fn claude_tool_response_is_extracted() {
        let task = enriched(
            Dialect::Claude,
            &[json!({"_meta": {"claudeCode": {"toolResponse": {
                "agentId": "agent_abc", "agentType": "general-purpose", "status": "completed",
                "totalDurationMs": 12345, "totalTokens": 6789.7, "totalToolUseCount": 11,
                "resolvedModel": "claude-opus-4-8[1m]",
                "content": [{"type": "text", "text": "  line one"}, {"type": "image"},
                            {"type": "text", "text": "   "}, {"type": "text", "text": "two"}]
            }}}})],
        );
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
    fn claude_tool_use_count_is_reported_iff_a_number() {
        let zero = enriched(
            Dialect::Claude,
            &[json!({"_meta": {"claudeCode": {"toolResponse": {"totalToolUseCount": 0}}}})],
        );
        assert_eq!(zero.tool_use_count, Some(0));
        let absent = enriched(
            Dialect::Claude,
            &[json!({"_meta": {"claudeCode": {"toolResponse": {"status": "completed"}}}})],
        );
        assert_eq!(absent.tool_use_count, None);
        let wrong = enriched(
            Dialect::Claude,
            &[json!({"_meta": {"claudeCode": {"toolResponse": {"totalToolUseCount": "11"}}}})],
        );
        assert_eq!(wrong.tool_use_count, None);
    }

    #[test]
    fn claude_result_text_survives_later_empty_frames() {
        let task = enriched(
            Dialect::Claude,
            &[
                json!({"_meta": {"claudeCode": {"toolResponse": {"content": [{"type": "text", "text": "VERDICT"}]}}}}),
                json!({"_meta": {"claudeCode": {"toolResponse": {"content": []}}}}),
                json!({"_meta": {"claudeCode": {"toolResponse": {"content": "not an array"}}}}),
            ],
        );
        assert_eq!(task.result_text.as_deref(), Some("VERDICT"));
    }

    #[test]
    fn claude_async_launch_sets_async_fields_without_metrics() {
        let update = json!({"_meta": {"claudeCode": {"toolResponse": {
            "agentId": "ab9a", "status": "async_launched", "isAsync": true,
            "outputFile": "/tmp/tasks/ab9a.output", "canReadOutputFile": true
        }}}});
        assert!(FrameView::parse(&update).is_async_launch());
        let task = enriched(Dialect::Claude, &[update]);
        assert!(task.is_async && task.can_read_output_file);
        assert_eq!(task.status.as_deref(), Some("async_launched"));
        assert_eq!(task.output_file.as_deref(), Some("/tmp/tasks/ab9a.output"));
        assert_eq!(
            (task.duration_ms, task.total_tokens, task.tool_use_count),
            (None, None, None)
        );
        assert!(
            !FrameView::parse(
                &json!({"_meta": {"claudeCode": {"toolResponse": {"status": "completed"}}}})
            )
            .is_async_launch()
        );
    }

    #[test]
    fn async_launched_alone_marks_the_launch_async() {
        let task = enriched(
            Dialect::Claude,
            &[json!({"_meta": {"claudeCode": {"toolResponse": {"status": "async_launched"}}}})],
        );
        assert!(task.is_async);
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
        let live = enriched(
            Dialect::Claude,
            &[json!({"_meta": {"claudeCode": {"toolResponse": response}}})],
        );
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
    fn claude_parent_is_read_from_strings_only() {
        let parent = |meta: Value| {
            let update = json!({"_meta": meta});
            FrameView::parse(&update).claude_parent().map(str::to_owned)
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
    fn opencode_metadata_model_parts() {
        let model = |metadata: Value| {
            enriched(
                Dialect::OpenCode,
                &[json!({"rawOutput": {"metadata": metadata}})],
            )
            .model
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
        let task = enriched(
            Dialect::OpenCode,
            &[
                json!({"rawOutput": {"output": "ignored", "metadata": {"sessionId": "ses_child", "parentSessionId": "p"}}}),
            ],
        );
        assert_eq!(task.child_session_id.as_deref(), Some("ses_child"));
        assert_eq!(task.result_text, None);
    }

    #[test]
    fn cursor_raw_output_duration_and_background() {
        let task = enriched(
            Dialect::Cursor,
            &[json!({"rawOutput": {"durationMs": 4200, "isBackground": false}})],
        );
        assert_eq!(task.duration_ms, Some(4200));
        assert!(!task.is_async);
        let task = enriched(
            Dialect::Cursor,
            &[json!({"rawOutput": {"isBackground": true}})],
        );
        assert!(task.is_async);
        assert_eq!(task.duration_ms, None);
    }

    #[test]
    fn auggie_output_is_read_only_for_auggie_calls() {
        let update = json!({"rawOutput": {"output": "Done."}});
        assert_eq!(
            enriched(Dialect::Auggie, std::slice::from_ref(&update))
                .result_text
                .as_deref(),
            Some("Done.")
        );
        assert_eq!(
            enriched(Dialect::OpenCode, std::slice::from_ref(&update)).result_text,
            None
        );
        assert_eq!(enriched(Dialect::Claude, &[update]).result_text, None);
        assert_eq!(
            enriched(Dialect::Auggie, &[json!({"rawOutput": {"output": 3}})]).result_text,
            None
        );
        assert_eq!(
            enriched(Dialect::Auggie, &[json!({"rawOutput": {"output": ""}})]).result_text,
            None
        );
    }

    #[test]
    fn fanout_meta_enriches() {
        let task = enriched(
            Dialect::Fanout,
            &[json!({
                "rawInput": {"description": "d", "prompt": "p", "subagent_type": "explorer"},
                "_meta": {"fanout": {"subagent": {
                    "childSessionId": "child-1", "mode": "fork", "subagentType": "other",
                    "status": "running", "model": "m", "totalTokens": 10, "durationMs": 0, "toolUseCount": 0
                }}}
            })],
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

    #[test]
    fn session_links_are_deduplicated_and_typed() {
        let update = json!({"content": [
            {"type": "session", "sessionId": "c1"}, {"type": "session", "sessionId": "c1"},
            {"type": "session", "sessionId": 3}, {"type": "text", "sessionId": "c2"},
            {"type": "session", "sessionId": "c3"}
        ]});
        assert_eq!(FrameView::parse(&update).session_links(), vec!["c1", "c3"]);
        assert!(
            FrameView::parse(&json!({"content": {"type": "session"}}))
                .session_links()
                .is_empty()
        );
    }

    #[test]
    fn status_less_payload_detection() {
        assert!(FrameView::parse(&json!({"title": "x"})).carries_payload());
        assert!(FrameView::parse(&json!({"rawInput": {}})).carries_payload());
        assert!(FrameView::parse(&json!({"content": []})).carries_payload());
        assert!(FrameView::parse(&json!({"locations": []})).carries_payload());
        assert!(
            !FrameView::parse(&json!({"title": "", "rawInput": null, "_meta": {}}))
                .carries_payload()
        );
    }
}
