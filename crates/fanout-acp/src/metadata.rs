//! The tool-call message metadata contract (DESIGN 4.1) and the terminal status set.

use serde_json::{Map, Value};

use crate::event::ToolFrame;
use crate::subagent::SubagentTask;

/// DESIGN 3.4: the one definition of the terminal tool statuses, exactly these six.
/// The extra spellings (`complete`, `success`, `error`) come from other writers of the
/// message table. fanout-store builds its backfill SQL from this list.
pub const TERMINAL_TOOL_STATUSES: [&str; 6] = [
    "complete",
    "completed",
    "success",
    "error",
    "failed",
    "cancelled",
];

/// Whether a tool status is terminal (settles a row); see [`TERMINAL_TOOL_STATUSES`].
pub fn is_terminal_tool_status(status: &str) -> bool {
    TERMINAL_TOOL_STATUSES.contains(&status)
}

/// `normalized.kind` of a tool-call message: `subagent_task` for subagents, else the
/// ACP kind mapped onto the vocabulary other writers of the table use, else `generic`.
pub fn normalized_kind(acp_kind: Option<&str>, is_subagent: bool) -> &'static str {
    if is_subagent {
        return "subagent_task";
    }
    match acp_kind {
        Some("read") => "read_file",
        Some("edit" | "delete" | "move") => "modify_file",
        Some("execute") => "shell_exec",
        Some("search") => "code_search",
        Some("fetch") => "http_request",
        _ => "generic",
    }
}

/// Builds `{tool_call_id, title, status, parent_tool_call_id?, normalized: {kind,
/// subagent_task?}}`. `status` is the tool status (`""` when none is known yet);
/// `normalized.subagent_task.status` is the agent's own status.
pub fn tool_call_message_metadata(
    tool_call_id: &str,
    title: Option<&str>,
    tool_status: Option<&str>,
    parent_tool_call_id: Option<&str>,
    acp_kind: Option<&str>,
    subagent: Option<&SubagentTask>,
) -> Value {
    let mut normalized = Map::new();
    normalized.insert(
        "kind".into(),
        normalized_kind(acp_kind, subagent.is_some()).into(),
    );
    if let Some(task) = subagent {
        // Serialising a plain struct of strings, numbers and bools cannot fail.
        let task = serde_json::to_value(task).unwrap_or_else(|_| Value::Object(Map::new()));
        normalized.insert("subagent_task".into(), task);
    }
    let mut metadata = Map::new();
    metadata.insert("tool_call_id".into(), tool_call_id.into());
    metadata.insert("title".into(), title.unwrap_or_default().into());
    metadata.insert("status".into(), tool_status.unwrap_or_default().into());
    if let Some(parent) = parent_tool_call_id.filter(|p| !p.is_empty()) {
        metadata.insert("parent_tool_call_id".into(), parent.into());
    }
    metadata.insert("normalized".into(), Value::Object(normalized));
    Value::Object(metadata)
}

impl ToolFrame {
    /// The message metadata for this row after this frame (uses `last_tool_status`).
    pub fn message_metadata(&self) -> Value {
        tool_call_message_metadata(
            &self.tool_call_id,
            self.title.as_deref(),
            self.last_tool_status.as_deref(),
            self.parent_tool_call_id.as_deref(),
            self.kind.as_deref(),
            self.subagent.as_ref(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn terminal_set_is_exact() {
        for status in [
            "complete",
            "completed",
            "success",
            "error",
            "failed",
            "cancelled",
        ] {
            assert!(is_terminal_tool_status(status), "{status}");
        }
        for status in [
            "pending",
            "in_progress",
            "running",
            "started",
            "",
            "Completed",
            "idle",
            "canceled",
        ] {
            assert!(!is_terminal_tool_status(status), "{status}");
        }
    }

    #[test]
    fn subagent_metadata_shape() {
        let task = SubagentTask {
            description: "d".into(),
            prompt: "p".into(),
            subagent_type: "t".into(),
            status: Some("completed".into()),
            total_tokens: Some(0),
            tool_use_count: Some(0),
            ..SubagentTask::default()
        };
        let metadata = tool_call_message_metadata(
            "toolu_01",
            Some("Task"),
            Some("completed"),
            Some("toolu_00"),
            Some("think"),
            Some(&task),
        );
        assert_eq!(
            metadata,
            json!({
                "tool_call_id": "toolu_01",
                "title": "Task",
                "status": "completed",
                "parent_tool_call_id": "toolu_00",
                "normalized": {"kind": "subagent_task", "subagent_task": {
                    "description": "d", "prompt": "p", "subagent_type": "t",
                    "status": "completed", "tool_use_count": 0
                }}
            })
        );
    }

    #[test]
    fn plain_tool_metadata_shape() {
        let metadata =
            tool_call_message_metadata("t1", None, None, Some(""), Some("execute"), None);
        assert_eq!(
            metadata,
            json!({"tool_call_id": "t1", "title": "", "status": "", "normalized": {"kind": "shell_exec"}})
        );
        assert_eq!(normalized_kind(Some("other"), false), "generic");
        assert_eq!(normalized_kind(None, false), "generic");
        assert_eq!(normalized_kind(Some("read"), true), "subagent_task");
    }
}
