//! The second rung of conversation identity (DESIGN 5.5): a request's content
//! root, and how far into its conversation it is.
//!
//! The **root** is what a conversation starts from and never changes while it
//! goes on: its system prompt and its first user turn (every user message
//! before the first assistant output). Its text goes through the declared
//! [`VolatileRules`] and is hashed (SHA-256), so two runs of the same agent on
//! the same task give the same root, and a parent and each of its subagents
//! (whose first user turn is the task they were given) give different ones.
//!
//! The **step** is the number of assistant outputs the request's history
//! already holds: a conversation's n-th model call has step n-1. Two recorded
//! conversations with the same root are told apart by it.
//!
//! Read per wire format: Anthropic Messages (`system`, `messages`), OpenAI chat
//! completions (`messages` with system/developer roles) and OpenAI Responses
//! (`instructions`, `input` items).

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::volatile::VolatileRules;

/// The model API a request speaks, from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFormat {
    /// `…/v1/messages` (Anthropic Messages).
    AnthropicMessages,
    /// `…/chat/completions` (OpenAI chat completions).
    ChatCompletions,
    /// `…/responses` (OpenAI Responses).
    Responses,
    /// Anything else (token counting, model lists, …): no content root.
    Other,
}

impl WireFormat {
    /// The format of a request to `path` (query string ignored).
    pub fn of_path(path: &str) -> Self {
        let path = path.split('?').next().unwrap_or(path).trim_end_matches('/');
        if path.ends_with("/messages") {
            WireFormat::AnthropicMessages
        } else if path.ends_with("/chat/completions") {
            WireFormat::ChatCompletions
        } else if path.ends_with("/responses") {
            WireFormat::Responses
        } else {
            WireFormat::Other
        }
    }
}

/// A conversation's normalised root and its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentRoot {
    /// The normalised root text (for "closest conversation" messages).
    pub text: String,
    /// `sha256:<hex>` of the text.
    pub hash: String,
}

impl ContentRoot {
    /// The root of already-normalised text.
    pub fn of_text(text: String) -> Self {
        let hash = format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())));
        Self { text, hash }
    }

    /// The first 12 hex digits of the hash, for summaries.
    pub fn short(&self) -> &str {
        let hex = self.hash.strip_prefix("sha256:").unwrap_or(&self.hash);
        &hex[..hex.len().min(12)]
    }
}

/// What a request's body says about its conversation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestContent {
    /// The content root; `None` when the format has none or the body lacks it.
    pub root: Option<ContentRoot>,
    /// Assistant outputs already in the history; `None` when unknown.
    pub step: Option<usize>,
}

/// The root and step of a JSON request body in `format`.
pub fn request_content(format: WireFormat, body: &Value, rules: &VolatileRules) -> RequestContent {
    let (system, first_turn, step) = match format {
        WireFormat::AnthropicMessages => anthropic(body),
        WireFormat::ChatCompletions => chat(body),
        WireFormat::Responses => responses(body),
        WireFormat::Other => return RequestContent::default(),
    };
    let root = match (system.is_empty(), first_turn.is_empty()) {
        (true, true) => None,
        _ => Some(ContentRoot::of_text(
            rules.apply(&format!("system:\n{system}\n\nuser:\n{first_turn}")),
        )),
    };
    RequestContent { root, step }
}

/// The text of a content value: a string, or a list of blocks whose `text`
/// fields are taken and whose other blocks are kept as JSON.
fn text_of(content: &Value) -> String {
    match content {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|block| match block {
                Value::String(text) => text.clone(),
                Value::Object(fields) => match fields.get("text").and_then(Value::as_str) {
                    Some(text) => text.to_string(),
                    None => block.to_string(),
                },
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn role(message: &Value) -> Option<&str> {
    message.get("role").and_then(Value::as_str)
}

/// The user messages up to the first assistant one, and how many assistant
/// messages there are.
fn first_turn_and_step<'a>(
    messages: impl Iterator<Item = &'a Value>,
    is_user: impl Fn(&Value) -> bool,
    is_assistant: impl Fn(&Value) -> bool,
) -> (String, usize) {
    let mut turn = Vec::new();
    let mut step = 0;
    let mut assistant_seen = false;
    let mut in_assistant_run = false;
    for message in messages {
        if is_assistant(message) {
            if !in_assistant_run {
                step += 1;
            }
            in_assistant_run = true;
            assistant_seen = true;
        } else {
            in_assistant_run = false;
            if !assistant_seen && is_user(message) {
                turn.push(text_of(message.get("content").unwrap_or(&Value::Null)));
            }
        }
    }
    (turn.join("\n"), step)
}

fn anthropic(body: &Value) -> (String, String, Option<usize>) {
    let system = text_of(body.get("system").unwrap_or(&Value::Null));
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return (system, String::new(), None);
    };
    let (turn, step) = first_turn_and_step(
        messages.iter(),
        |m| role(m) == Some("user"),
        |m| role(m) == Some("assistant"),
    );
    (system, turn, Some(step))
}

fn chat(body: &Value) -> (String, String, Option<usize>) {
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return (String::new(), String::new(), None);
    };
    let mut system = Vec::new();
    for message in messages {
        match role(message) {
            Some("system" | "developer") => {
                system.push(text_of(message.get("content").unwrap_or(&Value::Null)));
            }
            Some("user") => break,
            _ => {}
        }
    }
    let (turn, step) = first_turn_and_step(
        messages.iter(),
        |m| role(m) == Some("user"),
        |m| role(m) == Some("assistant"),
    );
    (system.join("\n"), turn, Some(step))
}

/// Responses `input` items the model produced (one model output may hold
/// several: reasoning, text, parallel calls).
fn is_output_item(item: &Value) -> bool {
    match item.get("type").and_then(Value::as_str) {
        Some("message") | None => role(item) == Some("assistant"),
        Some(kind) => {
            matches!(
                kind,
                "reasoning"
                    | "function_call"
                    | "custom_tool_call"
                    | "local_shell_call"
                    | "web_search_call"
                    | "file_search_call"
                    | "computer_call"
                    | "image_generation_call"
                    | "code_interpreter_call"
                    | "mcp_call"
            )
        }
    }
}

fn responses(body: &Value) -> (String, String, Option<usize>) {
    let mut system = vec![text_of(body.get("instructions").unwrap_or(&Value::Null))];
    let input = match body.get("input") {
        Some(Value::String(text)) => return (system.concat(), text.clone(), Some(0)),
        Some(Value::Array(items)) => items,
        _ => return (system.concat(), String::new(), None),
    };
    let is_message = |item: &Value| {
        matches!(
            item.get("type").and_then(Value::as_str),
            Some("message") | None
        )
    };
    for item in input {
        if !is_message(item) {
            continue;
        }
        match role(item) {
            Some("system" | "developer") => {
                system.push(text_of(item.get("content").unwrap_or(&Value::Null)));
            }
            Some("user") => break,
            _ => {}
        }
    }
    let (turn, step) = first_turn_and_step(
        input.iter(),
        |item| is_message(item) && role(item) == Some("user"),
        is_output_item,
    );
    (
        system
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        turn,
        Some(step),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn content(format: WireFormat, body: Value) -> RequestContent {
        request_content(format, &body, &VolatileRules::new())
    }

    #[test]
    fn formats_by_path() {
        assert_eq!(
            WireFormat::of_path("/v1/messages?beta=true"),
            WireFormat::AnthropicMessages
        );
        assert_eq!(
            WireFormat::of_path("/v1/chat/completions"),
            WireFormat::ChatCompletions
        );
        assert_eq!(
            WireFormat::of_path("/chat/completions/"),
            WireFormat::ChatCompletions
        );
        assert_eq!(WireFormat::of_path("/v1/responses"), WireFormat::Responses);
        assert_eq!(
            WireFormat::of_path("/v1/messages/count_tokens"),
            WireFormat::Other
        );
    }

    #[test]
    fn anthropic_root_ignores_later_turns_and_volatile_values() {
        let first = json!({"system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=1.abc;"},
                {"type": "text", "text": "You are Claude. Today is 2026-12-01."}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "FANOUT-CHILD-A: read"}]}]});
        let later = json!({"system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=1.def;"},
                {"type": "text", "text": "You are Claude. Today is 2026-12-02."}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "FANOUT-CHILD-A: read"}]},
                {"role": "system", "content": "env"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "hi"}]}]});
        let other = json!({"system": "You are Claude. Today is 2026-12-01.",
            "messages": [{"role": "user", "content": "FANOUT-CHILD-B: read"}]});
        let (a, b, c) = (
            content(WireFormat::AnthropicMessages, first),
            content(WireFormat::AnthropicMessages, later),
            content(WireFormat::AnthropicMessages, other),
        );
        assert_eq!(a.root, b.root);
        assert_eq!((a.step, b.step), (Some(0), Some(1)));
        assert_ne!(a.root, c.root);
        assert!(a.root.unwrap().text.contains("<billing>"));
    }

    #[test]
    fn chat_completions_root_and_step() {
        let body = json!({"messages": [
            {"role": "system", "content": "You are opencode. <env>\n  Working directory: /w\n</env>"},
            {"role": "user", "content": "Delegate"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1"}]},
            {"role": "tool", "content": "done"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "again"}]});
        let got = content(WireFormat::ChatCompletions, body);
        assert_eq!(got.step, Some(2));
        assert_eq!(
            got.root.unwrap().text,
            "system:\nYou are opencode. <env><environment></env>\n\nuser:\nDelegate"
        );
    }

    #[test]
    fn responses_first_user_turn_spans_every_user_message_before_output() {
        let body = json!({"input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context><cwd>/w</cwd></environment_context>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "FANOUT-CHILD-reader_a: go"}]},
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "spawn_agent", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "spawn_agent", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "x"},
            {"type": "function_call_output", "call_id": "c2", "output": "y"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}]});
        let got = content(WireFormat::Responses, body);
        assert_eq!(got.step, Some(2));
        assert_eq!(
            got.root.unwrap().text,
            "system:\nYou are Codex.\n\nuser:\n<environment_context><environment></environment_context>\nFANOUT-CHILD-reader_a: go"
        );
    }

    #[test]
    fn bodies_without_the_fields_have_no_root() {
        assert_eq!(content(WireFormat::AnthropicMessages, json!({})).root, None);
        assert_eq!(
            content(WireFormat::Other, json!({"messages": []})),
            RequestContent::default()
        );
        assert_eq!(
            content(WireFormat::Responses, json!({"input": 3})).step,
            None
        );
    }
}
