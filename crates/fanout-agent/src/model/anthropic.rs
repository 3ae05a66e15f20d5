//! Anthropic Messages API, streaming (`POST {base}/v1/messages`, SSE).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::http::{EndpointSpec, HttpProvider, SseProtocol, WireFormat};
use super::sse::SseEvent;
use super::{Chunk, ContentPart, Message, ModelRequest, ModelStopReason, Role, Usage};

/// The public endpoint, used when neither `--base-url` nor `ANTHROPIC_BASE_URL` is set.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// Environment variable for the base URL (without `/v1`).
pub const BASE_URL_ENV: &str = "ANTHROPIC_BASE_URL";
/// Environment variable for the API key.
pub const API_KEY_ENV: &str = "ANTHROPIC_API_KEY";
/// Model used when `--model` is not given.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
const API_VERSION: &str = "2023-06-01";
const PROVIDER: &str = "anthropic";

/// Streams from the Anthropic Messages API.
pub type AnthropicProvider = HttpProvider<AnthropicApi>;

/// The wire format of [`AnthropicProvider`].
#[derive(Debug)]
pub struct AnthropicApi;

impl WireFormat for AnthropicApi {
    const SPEC: EndpointSpec = EndpointSpec {
        provider: PROVIDER,
        default_base_url: DEFAULT_BASE_URL,
        base_url_env: BASE_URL_ENV,
        api_key_env: API_KEY_ENV,
        key_header: "x-api-key",
        key_prefix: "",
    };
    const PATH: &'static str = "v1/messages";
    const HEADERS: &'static [(&'static str, &'static str)] = &[("anthropic-version", API_VERSION)];
    type Sse = AnthropicSse;

    fn request_body(request: &ModelRequest) -> Value {
        request_body(request)
    }
}

/// The JSON body of a streaming Messages request.
pub fn request_body(request: &ModelRequest) -> Value {
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "stream": true,
        "messages": request.messages.iter().map(message_json).collect::<Vec<_>>(),
    });
    if let Some(system) = request.system.as_ref().filter(|s| !s.is_empty()) {
        body["system"] = json!(system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
    }
    body
}

fn message_json(message: &Message) -> Value {
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let content: Vec<Value> = message
        .content
        .iter()
        .filter_map(|part| match part {
            ContentPart::Text { text } if text.is_empty() => None,
            ContentPart::Text { text } => Some(json!({"type": "text", "text": text})),
            ContentPart::ToolUse { id, name, input } => {
                Some(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
            }
            ContentPart::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => Some(json!({
                "type": "tool_result",
                "tool_use_id": tool_use_id,
                "content": content,
                "is_error": is_error,
            })),
        })
        .collect();
    json!({"role": role, "content": content})
}

#[derive(Debug)]
enum Block {
    Text,
    ToolUse(String),
    Ignored,
}

/// Decodes Anthropic's streaming events.
#[derive(Debug, Default)]
pub struct AnthropicSse {
    blocks: HashMap<u64, Block>,
    usage: Usage,
    stop_reason: Option<ModelStopReason>,
    done: bool,
}

fn stop_reason(text: &str) -> ModelStopReason {
    match text {
        "tool_use" => ModelStopReason::ToolUse,
        "max_tokens" => ModelStopReason::MaxTokens,
        "stop_sequence" => ModelStopReason::StopSequence,
        "refusal" => ModelStopReason::Refusal,
        _ => ModelStopReason::EndTurn,
    }
}

fn read_usage(usage: &mut Usage, value: &Value) {
    let n = |k: &str| value.get(k).and_then(Value::as_u64);
    if let Some(v) = n("input_tokens") {
        usage.input_tokens = v;
    }
    if let Some(v) = n("output_tokens") {
        usage.output_tokens = v;
    }
    if let Some(v) = n("cache_read_input_tokens") {
        usage.cache_read_input_tokens = Some(v);
    }
    if let Some(v) = n("cache_creation_input_tokens") {
        usage.cache_creation_input_tokens = Some(v);
    }
}

impl SseProtocol for AnthropicSse {
    fn on_event(&mut self, event: SseEvent) -> Result<Vec<Chunk>, String> {
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|e| format!("event data is not JSON ({e}): {:.200}", event.data))?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or(event.event)
            .unwrap_or_default();
        let index = data.get("index").and_then(Value::as_u64);
        let mut out = Vec::new();
        match kind.as_str() {
            "message_start" => {
                if let Some(usage) = data.pointer("/message/usage") {
                    read_usage(&mut self.usage, usage);
                }
            }
            "content_block_start" => {
                let index = index.ok_or("content_block_start without index")?;
                let block = data
                    .get("content_block")
                    .ok_or("content_block_start without content_block")?;
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        self.blocks.insert(index, Block::Text);
                        if let Some(text) = block
                            .get("text")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            out.push(Chunk::TextDelta {
                                text: text.to_string(),
                            });
                        }
                    }
                    Some("tool_use") => {
                        let id = block
                            .get("id")
                            .and_then(Value::as_str)
                            .ok_or("tool_use block without id")?;
                        let name = block
                            .get("name")
                            .and_then(Value::as_str)
                            .ok_or("tool_use block without name")?;
                        self.blocks.insert(index, Block::ToolUse(id.to_string()));
                        out.push(Chunk::ToolUseStart {
                            id: id.to_string(),
                            name: name.to_string(),
                        });
                    }
                    _ => {
                        self.blocks.insert(index, Block::Ignored);
                    }
                }
            }
            "content_block_delta" => {
                let index = index.ok_or("content_block_delta without index")?;
                let block = self
                    .blocks
                    .get(&index)
                    .ok_or_else(|| format!("delta for unknown content block {index}"))?;
                let delta = data
                    .get("delta")
                    .ok_or("content_block_delta without delta")?;
                match (block, delta.get("type").and_then(Value::as_str)) {
                    (Block::Text, Some("text_delta")) => {
                        if let Some(text) = delta
                            .get("text")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            out.push(Chunk::TextDelta {
                                text: text.to_string(),
                            });
                        }
                    }
                    (Block::ToolUse(id), Some("input_json_delta")) => {
                        if let Some(part) = delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            out.push(Chunk::ToolUseDelta {
                                id: id.clone(),
                                partial_json: part.to_string(),
                            });
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(stop_reason(reason));
                }
                if let Some(usage) = data.get("usage") {
                    read_usage(&mut self.usage, usage);
                }
            }
            "message_stop" => {
                self.done = true;
                out.push(Chunk::Stop {
                    stop_reason: self.stop_reason.unwrap_or(ModelStopReason::EndTurn),
                    usage: self.usage,
                });
            }
            "error" => {
                let message =
                    super::http::error_message(&event.data).unwrap_or_else(|| "error event".into());
                return Err(format!("the API sent an error event: {message}"));
            }
            _ => {}
        }
        Ok(out)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn on_eof(&mut self) -> Result<Vec<Chunk>, String> {
        if self.done {
            Ok(Vec::new())
        } else {
            Err("the stream ended before message_stop (incomplete response)".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(events: &[&str]) -> Result<Vec<Chunk>, String> {
        let mut p = AnthropicSse::default();
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
    fn decodes_text_and_tool_use() {
        let chunks = feed(&[
            r#"{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"read_file","input":{}}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"a\"}"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":7}}"#,
            r#"{"type":"message_stop"}"#,
        ])
        .unwrap();
        assert_eq!(
            chunks,
            vec![
                Chunk::TextDelta { text: "Hi".into() },
                Chunk::ToolUseStart {
                    id: "toolu_1".into(),
                    name: "read_file".into()
                },
                Chunk::ToolUseDelta {
                    id: "toolu_1".into(),
                    partial_json: "{\"path\":".into()
                },
                Chunk::ToolUseDelta {
                    id: "toolu_1".into(),
                    partial_json: "\"a\"}".into()
                },
                Chunk::Stop {
                    stop_reason: ModelStopReason::ToolUse,
                    usage: Usage {
                        input_tokens: 10,
                        output_tokens: 7,
                        ..Usage::default()
                    }
                },
            ]
        );
    }

    #[test]
    fn incomplete_and_error_streams_fail() {
        let err = feed(&[r#"{"type":"message_start","message":{}}"#]).unwrap_err();
        assert!(err.contains("before message_stop"), "{err}");
        let err = feed(&[
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ])
        .unwrap_err();
        assert!(err.contains("overloaded_error: Overloaded"), "{err}");
        let err = feed(&[r#"{"type":"content_block_delta","index":4,"delta":{}}"#]).unwrap_err();
        assert!(err.contains("unknown content block 4"), "{err}");
    }

    #[test]
    fn request_body_shape() {
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
                        input: json!({}),
                    }],
                },
                Message {
                    role: Role::User,
                    content: vec![ContentPart::ToolResult {
                        tool_use_id: "t".into(),
                        content: "r".into(),
                        is_error: true,
                    }],
                },
            ],
            tools: vec![],
            max_tokens: 5,
        };
        let body = request_body(&req);
        assert_eq!(body["system"], "sys");
        assert_eq!(body["stream"], true);
        assert!(body.get("tools").is_none());
        assert_eq!(body["messages"][1]["content"][0]["type"], "tool_use");
        assert_eq!(body["messages"][2]["content"][0]["is_error"], true);
    }
}
