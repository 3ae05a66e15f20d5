//! OpenAI-compatible chat completions, streaming (`POST {base}/chat/completions`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::http::{EndpointSpec, HttpProvider, SseProtocol, WireFormat};
use super::sse::SseEvent;
use super::{Chunk, ContentPart, Message, ModelRequest, ModelStopReason, Role, Usage};

/// The public endpoint (including `/v1`), used when neither `--base-url` nor
/// `OPENAI_BASE_URL` is set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Environment variable for the base URL (including `/v1`).
pub const BASE_URL_ENV: &str = "OPENAI_BASE_URL";
/// Environment variable for the API key.
pub const API_KEY_ENV: &str = "OPENAI_API_KEY";
/// Model used when `--model` is not given.
pub const DEFAULT_MODEL: &str = "gpt-4.1-mini";
const PROVIDER: &str = "openai";

/// Streams from an OpenAI-compatible chat-completions endpoint.
pub type OpenAiProvider = HttpProvider<OpenAiApi>;

/// The wire format of [`OpenAiProvider`].
#[derive(Debug)]
pub struct OpenAiApi;

impl WireFormat for OpenAiApi {
    const SPEC: EndpointSpec = EndpointSpec {
        provider: PROVIDER,
        default_base_url: DEFAULT_BASE_URL,
        base_url_env: BASE_URL_ENV,
        api_key_env: API_KEY_ENV,
        key_header: "authorization",
        key_prefix: "Bearer ",
    };
    const PATH: &'static str = "chat/completions";
    const HEADERS: &'static [(&'static str, &'static str)] = &[];
    type Sse = OpenAiSse;

    fn request_body(request: &ModelRequest) -> Value {
        request_body(request)
    }
}

/// The JSON body of a streaming chat-completions request.
pub fn request_body(request: &ModelRequest) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = request.system.as_ref().filter(|s| !s.is_empty()) {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        push_messages(&mut messages, message);
    }
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": messages,
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema,
                }})
            })
            .collect();
    }
    body
}

fn push_messages(out: &mut Vec<Value>, message: &Message) {
    match message.role {
        Role::User => {
            let mut text = String::new();
            for part in &message.content {
                match part {
                    ContentPart::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } => {
                        let content = if *is_error {
                            format!("Error: {content}")
                        } else {
                            content.clone()
                        };
                        out.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}));
                    }
                    ContentPart::Text { text: t } => {
                        if !text.is_empty() {
                            text.push_str("\n\n");
                        }
                        text.push_str(t);
                    }
                    ContentPart::ToolUse { .. } => {}
                }
            }
            if !text.is_empty() {
                out.push(json!({"role": "user", "content": text}));
            }
        }
        Role::Assistant => {
            let text = message.text();
            let calls: Vec<Value> = message
                .content
                .iter()
                .filter_map(|part| match part {
                    ContentPart::ToolUse { id, name, input } => Some(json!({
                        "id": id, "type": "function",
                        "function": {"name": name, "arguments": input.to_string()},
                    })),
                    _ => None,
                })
                .collect();
            let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
            if !calls.is_empty() {
                msg["tool_calls"] = json!(calls);
            }
            out.push(msg);
        }
    }
}

/// Decodes chat-completion chunks.
#[derive(Debug, Default)]
pub struct OpenAiSse {
    /// Tool-call index -> id.
    tools: BTreeMap<u64, String>,
    finish_reason: Option<ModelStopReason>,
    usage: Usage,
    done: bool,
}

fn finish_reason(text: &str) -> ModelStopReason {
    match text {
        "tool_calls" | "function_call" => ModelStopReason::ToolUse,
        "length" => ModelStopReason::MaxTokens,
        "content_filter" => ModelStopReason::Refusal,
        _ => ModelStopReason::EndTurn,
    }
}

impl OpenAiSse {
    fn stop(&mut self) -> Chunk {
        self.done = true;
        Chunk::Stop {
            stop_reason: self.finish_reason.unwrap_or(ModelStopReason::EndTurn),
            usage: self.usage,
        }
    }
}

impl SseProtocol for OpenAiSse {
    fn on_event(&mut self, event: SseEvent) -> Result<Vec<Chunk>, String> {
        if event.data.trim() == "[DONE]" {
            if self.finish_reason.is_none() {
                return Err("the stream ended ([DONE]) without a finish_reason".into());
            }
            return Ok(vec![self.stop()]);
        }
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|e| format!("chunk is not JSON ({e}): {:.200}", event.data))?;
        if data.get("error").is_some() {
            let message = super::http::error_message(&event.data).unwrap_or_default();
            return Err(format!("the API sent an error: {message}"));
        }
        let mut out = Vec::new();
        if let Some(usage) = data.get("usage").filter(|u| u.is_object()) {
            let n = |k: &str| usage.get(k).and_then(Value::as_u64);
            self.usage.input_tokens = n("prompt_tokens").unwrap_or(self.usage.input_tokens);
            self.usage.output_tokens = n("completion_tokens").unwrap_or(self.usage.output_tokens);
            if let Some(cached) = usage
                .pointer("/prompt_tokens_details/cached_tokens")
                .and_then(Value::as_u64)
            {
                self.usage.cache_read_input_tokens = Some(cached);
            }
        }
        let choices = data.get("choices").and_then(Value::as_array);
        for choice in choices.into_iter().flatten() {
            let delta = choice.get("delta");
            if let Some(text) = delta
                .and_then(|d| d.get("content"))
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                out.push(Chunk::TextDelta {
                    text: text.to_string(),
                });
            }
            let calls = delta
                .and_then(|d| d.get("tool_calls"))
                .and_then(Value::as_array);
            for call in calls.into_iter().flatten() {
                let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                let function = call.get("function");
                let id = match self.tools.get(&index) {
                    Some(id) => id.clone(),
                    None => {
                        let id = call
                            .get("id")
                            .and_then(Value::as_str)
                            .filter(|s| !s.is_empty())
                            .map(str::to_string)
                            .unwrap_or_else(|| format!("call_{index}"));
                        let name = function
                            .and_then(|f| f.get("name"))
                            .and_then(Value::as_str)
                            .ok_or_else(|| {
                                format!("tool call {index} starts without a function name")
                            })?;
                        self.tools.insert(index, id.clone());
                        out.push(Chunk::ToolUseStart {
                            id: id.clone(),
                            name: name.to_string(),
                        });
                        id
                    }
                };
                if let Some(args) = function
                    .and_then(|f| f.get("arguments"))
                    .and_then(Value::as_str)
                    .filter(|a| !a.is_empty())
                {
                    out.push(Chunk::ToolUseDelta {
                        id,
                        partial_json: args.to_string(),
                    });
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(finish_reason(reason));
            }
        }
        Ok(out)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn on_eof(&mut self) -> Result<Vec<Chunk>, String> {
        if self.done {
            Ok(Vec::new())
        } else if self.finish_reason.is_some() {
            // Some compatible servers omit the final `[DONE]`.
            Ok(vec![self.stop()])
        } else {
            Err("the stream ended before a finish_reason (incomplete response)".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(events: &[&str]) -> Result<Vec<Chunk>, String> {
        let mut p = OpenAiSse::default();
        let mut out = Vec::new();
        for data in events {
            out.extend(p.on_event(SseEvent {
                event: None,
                data: (*data).to_string(),
            })?);
        }
        out.extend(p.on_eof()?);
        Ok(out)
    }

    #[test]
    fn decodes_text_tool_calls_and_usage() {
        let chunks = feed(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"list_dir","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":\".\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":6}}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(
            chunks,
            vec![
                Chunk::TextDelta { text: "Hi".into() },
                Chunk::ToolUseStart {
                    id: "call_a".into(),
                    name: "list_dir".into()
                },
                Chunk::ToolUseDelta {
                    id: "call_a".into(),
                    partial_json: "{\"pa".into()
                },
                Chunk::ToolUseDelta {
                    id: "call_a".into(),
                    partial_json: "th\":\".\"}".into()
                },
                Chunk::Stop {
                    stop_reason: ModelStopReason::ToolUse,
                    usage: Usage {
                        input_tokens: 5,
                        output_tokens: 6,
                        ..Usage::default()
                    }
                },
            ]
        );
    }

    #[test]
    fn incomplete_streams_fail() {
        let err = feed(&[r#"{"choices":[{"index":0,"delta":{"content":"Hi"}}]}"#]).unwrap_err();
        assert!(err.contains("before a finish_reason"), "{err}");
        let err = feed(&["[DONE]"]).unwrap_err();
        assert!(err.contains("without a finish_reason"), "{err}");
        let err = feed(&[r#"{"error":{"message":"boom"}}"#]).unwrap_err();
        assert!(err.contains("boom"), "{err}");
    }

    #[test]
    fn request_body_splits_tool_results() {
        let req = ModelRequest {
            model: "m".into(),
            system: Some("sys".into()),
            messages: vec![
                Message::user_text("hi"),
                Message {
                    role: Role::Assistant,
                    content: vec![ContentPart::ToolUse {
                        id: "t".into(),
                        name: "n".into(),
                        input: json!({"a":1}),
                    }],
                },
                Message {
                    role: Role::User,
                    content: vec![
                        ContentPart::ToolResult {
                            tool_use_id: "t".into(),
                            content: "r".into(),
                            is_error: false,
                        },
                        ContentPart::Text {
                            text: "more".into(),
                        },
                    ],
                },
            ],
            tools: vec![],
            max_tokens: 5,
        };
        let body = request_body(&req);
        let roles: Vec<_> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{\"a\":1}"
        );
    }
}
