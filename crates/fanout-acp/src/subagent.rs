//! The cumulative subagent payload and its never-blank merge rules.

use serde::{Deserialize, Serialize};

/// Everything known about one subagent launch, accumulated over its frames.
///
/// Serialises to the message-metadata shape `normalized.subagent_task` (DESIGN 4.1):
/// `description`, `prompt` and `subagent_type` always (maybe `""`); every other field only
/// when known. `duration_ms`/`total_tokens` of 0 are never written (0 means "not
/// reported"); `tool_use_count` is written iff it was reported, 0 included. Negative
/// metrics are kept as reported: the downstream writer turns them into NULL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubagentTask {
    /// What the launch says the subagent is for.
    pub description: String,
    /// The prompt it was given.
    pub prompt: String,
    /// Its type (agent definition).
    pub subagent_type: String,
    /// The agent's own status (open vocabulary: `running`, `completed`, `async_launched`,
    /// `idle`, …), not the tool status.
    #[serde(skip_serializing_if = "is_blank")]
    pub status: Option<String>,
    /// The agent's own id for the subagent (Claude's `agentId`).
    #[serde(skip_serializing_if = "is_blank")]
    pub agent_id: Option<String>,
    /// The model it ran on.
    #[serde(skip_serializing_if = "is_blank")]
    pub model: Option<String>,
    /// Its session (or thread) id.
    #[serde(skip_serializing_if = "is_blank")]
    pub child_session_id: Option<String>,
    /// Its wall time in milliseconds, as reported.
    #[serde(skip_serializing_if = "is_unreported")]
    pub duration_ms: Option<i64>,
    /// Its tokens, as reported.
    #[serde(skip_serializing_if = "is_unreported")]
    pub total_tokens: Option<i64>,
    /// Its tool calls, when reported (0 included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_use_count: Option<i64>,
    /// Its result as the agent reports it (message metadata only, never a row).
    #[serde(skip_serializing_if = "is_blank")]
    pub result_text: Option<String>,
    /// It runs in the background.
    #[serde(skip_serializing_if = "is_false")]
    pub is_async: bool,
    /// Where its output goes (Claude's background `outputFile`).
    #[serde(skip_serializing_if = "is_blank")]
    pub output_file: Option<String>,
    /// The parent may read that file.
    #[serde(skip_serializing_if = "is_false")]
    pub can_read_output_file: bool,
}

fn is_blank(value: &Option<String>) -> bool {
    value.as_deref().is_none_or(str::is_empty)
}

fn is_unreported(value: &Option<i64>) -> bool {
    matches!(value, None | Some(0))
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// Launch inputs as read from one frame (`rawInput`, a title, a side request…).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SubagentInputs {
    pub description: Option<String>,
    pub prompt: Option<String>,
    pub subagent_type: Option<String>,
}

/// Results as read from one frame, before merging.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SubagentResult {
    pub status: Option<String>,
    pub agent_id: Option<String>,
    pub model: Option<String>,
    pub child_session_id: Option<String>,
    pub output_file: Option<String>,
    pub subagent_type: Option<String>,
    pub duration_ms: Option<i64>,
    pub total_tokens: Option<i64>,
    pub tool_use_count: Option<i64>,
    pub is_async: bool,
    pub can_read_output_file: bool,
    pub result_text: Option<String>,
}

impl SubagentTask {
    /// Later inputs only fill what is still empty.
    pub(crate) fn fill_inputs(&mut self, inputs: &SubagentInputs) {
        fill_text(&mut self.description, inputs.description.as_deref());
        fill_text(&mut self.prompt, inputs.prompt.as_deref());
        fill_text(&mut self.subagent_type, inputs.subagent_type.as_deref());
    }

    /// Merges one frame's results: an absent or empty value never blanks a known one.
    pub(crate) fn merge_result(&mut self, result: &SubagentResult) {
        replace_if_some(&mut self.status, result.status.as_deref());
        replace_if_some(&mut self.agent_id, result.agent_id.as_deref());
        replace_if_some(&mut self.model, result.model.as_deref());
        replace_if_some(
            &mut self.child_session_id,
            result.child_session_id.as_deref(),
        );
        replace_if_some(&mut self.output_file, result.output_file.as_deref());
        fill_text(&mut self.subagent_type, result.subagent_type.as_deref());
        if let Some(ms) = result.duration_ms.filter(|n| *n != 0) {
            self.duration_ms = Some(ms);
        }
        if let Some(tokens) = result.total_tokens.filter(|n| *n != 0) {
            self.total_tokens = Some(tokens);
        }
        if result.tool_use_count.is_some() {
            self.tool_use_count = result.tool_use_count;
        }
        self.is_async |= result.is_async;
        self.can_read_output_file |= result.can_read_output_file;
        if is_blank(&self.result_text)
            && let Some(text) = result.result_text.as_deref().filter(|t| !t.is_empty())
        {
            self.result_text = Some(text.to_owned());
        }
    }

    /// Replaces the agent status when the new one is non-empty.
    pub(crate) fn set_status(&mut self, status: Option<&str>) {
        replace_if_some(&mut self.status, status);
    }
}

fn fill_text(slot: &mut String, value: Option<&str>) {
    if slot.is_empty()
        && let Some(value) = value.filter(|v| !v.is_empty())
    {
        value.clone_into(slot);
    }
}

fn replace_if_some(slot: &mut Option<String>, value: Option<&str>) {
    if let Some(value) = value.filter(|v| !v.is_empty()) {
        *slot = Some(value.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serialises_required_fields_and_omits_unknown_ones() {
        let task = SubagentTask::default();
        assert_eq!(
            serde_json::to_value(&task).unwrap(),
            json!({"description": "", "prompt": "", "subagent_type": ""})
        );
    }

    #[test]
    fn zero_tokens_and_duration_are_never_written_but_zero_tool_uses_are() {
        let task = SubagentTask {
            duration_ms: Some(0),
            total_tokens: Some(0),
            tool_use_count: Some(0),
            status: Some(String::new()),
            ..SubagentTask::default()
        };
        let value = serde_json::to_value(&task).unwrap();
        assert_eq!(value.get("duration_ms"), None);
        assert_eq!(value.get("total_tokens"), None);
        assert_eq!(value.get("status"), None);
        assert_eq!(value["tool_use_count"], json!(0));
    }

    #[test]
    fn negative_metrics_are_kept_as_reported() {
        let mut task = SubagentTask::default();
        task.merge_result(&SubagentResult {
            total_tokens: Some(-5),
            tool_use_count: Some(-1),
            ..SubagentResult::default()
        });
        let value = serde_json::to_value(&task).unwrap();
        assert_eq!(value["total_tokens"], json!(-5));
        assert_eq!(value["tool_use_count"], json!(-1));
    }

    #[test]
    fn merge_never_blanks_and_follows_per_field_rules() {
        let mut task = SubagentTask::default();
        task.fill_inputs(&SubagentInputs {
            description: Some("d".into()),
            ..SubagentInputs::default()
        });
        task.merge_result(&SubagentResult {
            status: Some("running".into()),
            agent_id: Some("a1".into()),
            model: Some("m1".into()),
            subagent_type: Some("t1".into()),
            duration_ms: Some(10),
            total_tokens: Some(100),
            tool_use_count: Some(3),
            is_async: true,
            can_read_output_file: true,
            result_text: Some("first".into()),
            output_file: Some("/o".into()),
            child_session_id: Some("c1".into()),
        });
        task.merge_result(&SubagentResult {
            status: Some("completed".into()),
            agent_id: Some(String::new()),
            model: None,
            subagent_type: Some("t2".into()),
            duration_ms: Some(0),
            total_tokens: Some(250),
            tool_use_count: Some(0),
            is_async: false,
            can_read_output_file: false,
            result_text: Some("second".into()),
            output_file: None,
            child_session_id: Some("c2".into()),
        });
        assert_eq!(task.status.as_deref(), Some("completed"));
        assert_eq!(task.agent_id.as_deref(), Some("a1"));
        assert_eq!(task.model.as_deref(), Some("m1"));
        assert_eq!(task.subagent_type, "t1");
        assert_eq!(task.duration_ms, Some(10));
        assert_eq!(task.total_tokens, Some(250));
        assert_eq!(task.tool_use_count, Some(0));
        assert!(task.is_async);
        assert!(task.can_read_output_file);
        assert_eq!(task.result_text.as_deref(), Some("first"));
        assert_eq!(task.output_file.as_deref(), Some("/o"));
        assert_eq!(task.child_session_id.as_deref(), Some("c2"));
        assert_eq!(task.description, "d");
    }

    #[test]
    fn later_inputs_only_fill_empty_fields() {
        let mut task = SubagentTask::default();
        task.fill_inputs(&SubagentInputs {
            description: Some("first".into()),
            prompt: None,
            subagent_type: Some(String::new()),
        });
        task.fill_inputs(&SubagentInputs {
            description: Some("second".into()),
            prompt: Some("p".into()),
            subagent_type: Some("explore".into()),
        });
        assert_eq!(task.description, "first");
        assert_eq!(task.prompt, "p");
        assert_eq!(task.subagent_type, "explore");
    }

    #[test]
    fn round_trips_through_serde() {
        let task = SubagentTask {
            description: "d".into(),
            tool_use_count: Some(0),
            is_async: true,
            model: Some("m".into()),
            ..SubagentTask::default()
        };
        let back: SubagentTask =
            serde_json::from_value(serde_json::to_value(&task).unwrap()).unwrap();
        assert_eq!(back, task);
    }
}
