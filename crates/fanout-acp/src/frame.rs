//! [`FrameView`]: the fields of a `tool_call` / `tool_call_update` that any rule reads,
//! borrowed from the update and read leniently (absent, `null`, empty and wrong-typed all
//! read as `None`).

use serde_json::Value;

use crate::json::{present_at, text, text_at};
use crate::subagent::SubagentInputs;

/// Borrowed view of one tool-call frame.
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

    /// `_meta[key]`, unless absent or `null`.
    pub(crate) fn meta_at(&self, key: &str) -> Option<&'a Value> {
        present_at(self.meta?, key)
    }

    /// `rawInput[key]` as a non-empty string.
    pub(crate) fn input_text(&self, key: &str) -> Option<&'a str> {
        text_at(self.raw_input?, key)
    }

    /// `rawOutput[key]`, unless absent or `null`.
    pub(crate) fn output_at(&self, key: &str) -> Option<&'a Value> {
        present_at(self.raw_output?, key)
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

    /// `rawInput.{description, prompt, subagent_type}`, the inputs most agents send.
    pub(crate) fn inputs(&self) -> SubagentInputs {
        SubagentInputs {
            description: self.input_text("description").map(str::to_owned),
            prompt: self.input_text("prompt").map(str::to_owned),
            subagent_type: self.input_text("subagent_type").map(str::to_owned),
        }
    }
}

/// Text blocks with non-blank text, joined by `\n`, verbatim: ACP content blocks
/// (`{"type":"text","text":…}`) and tool-call content items wrapping one
/// (`{"type":"content","content":{"type":"text",…}}`).
pub(crate) fn content_text(content: Option<&Value>) -> Option<String> {
    let blocks = content?.as_array()?;
    let texts: Vec<&str> = blocks
        .iter()
        .map(|block| match block.get("type").and_then(Value::as_str) {
            Some("content") => block.get("content").unwrap_or(&Value::Null),
            _ => block,
        })
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|block| text(block.get("text")))
        .filter(|text| !text.trim().is_empty())
        .collect();
    if texts.is_empty() {
        None
    } else {
        Some(texts.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    #[test]
    fn content_text_reads_blocks_and_wrapped_items() {
        let content = json!([
            {"type": "text", "text": "  line one"}, {"type": "image"},
            {"type": "text", "text": "   "},
            {"type": "content", "content": {"type": "text", "text": "two"}},
            {"type": "content", "content": "not a block"}
        ]);
        assert_eq!(
            content_text(Some(&content)).as_deref(),
            Some("  line one\ntwo")
        );
        assert_eq!(content_text(Some(&json!([]))), None);
        assert_eq!(content_text(Some(&json!("text"))), None);
    }
}
