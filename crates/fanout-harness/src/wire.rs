//! Encoding a replayed response as the streaming wire format of a provider:
//! Anthropic Messages SSE and OpenAI chat-completions SSE.
//!
//! Anthropic's format carries every [`Chunk`] field, so a response decodes back
//! to exactly the recorded chunks. OpenAI's has no stop-sequence reason and no
//! cache-write token count: `stop_sequence` is sent as `stop` and
//! `cacheCreationInputTokens` is dropped.

use std::collections::HashMap;

use fanout_replay::ReplayedResponse;
use fanout_sessionlog::{Chunk, ModelStopReason, Usage};
use serde_json::{Value, json};

/// One SSE event's text (`event:` line when named, one `data:` line, blank line).
fn sse_event(name: Option<&str>, data: &Value) -> String {
    match name {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

fn anthropic_stop_reason(reason: ModelStopReason) -> &'static str {
    match reason {
        ModelStopReason::EndTurn => "end_turn",
        ModelStopReason::ToolUse => "tool_use",
        ModelStopReason::MaxTokens => "max_tokens",
        ModelStopReason::StopSequence => "stop_sequence",
        ModelStopReason::Refusal => "refusal",
    }
}

fn openai_finish_reason(reason: ModelStopReason) -> &'static str {
    match reason {
        ModelStopReason::EndTurn | ModelStopReason::StopSequence => "stop",
        ModelStopReason::ToolUse => "tool_calls",
        ModelStopReason::MaxTokens => "length",
        ModelStopReason::Refusal => "content_filter",
    }
}

/// The usage object of Anthropic events; cache fields only when recorded.
fn anthropic_usage(usage: &Usage) -> Value {
    let mut value = json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
    });
    if let Some(read) = usage.cache_read_input_tokens {
        value["cache_read_input_tokens"] = json!(read);
    }
    if let Some(created) = usage.cache_creation_input_tokens {
        value["cache_creation_input_tokens"] = json!(created);
    }
    value
}

/// The content block currently open in an Anthropic stream.
#[derive(Debug, PartialEq)]
enum OpenBlock {
    None,
    Text(usize),
    ToolUse(usize),
}

/// The SSE events of one Anthropic Messages streaming response.
pub fn anthropic_events(response: &ReplayedResponse, model: &str, message_id: &str) -> Vec<String> {
    let mut events = Vec::with_capacity(response.chunks.len() * 2 + 4);
    let stop_usage = response.chunks.iter().find_map(|chunk| match chunk {
        Chunk::Stop { usage, .. } => Some(*usage),
        _ => None,
    });
    // message_start carries the prompt-side usage, as the API does; the output
    // count follows in message_delta.
    let mut start_usage = anthropic_usage(&stop_usage.unwrap_or_default());
    start_usage["output_tokens"] = json!(0);
    events.push(sse_event(
        Some("message_start"),
        &json!({"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": start_usage,
        }}),
    ));
    let mut open = OpenBlock::None;
    let mut next_index = 0usize;
    let mut tool_blocks: HashMap<&str, usize> = HashMap::new();
    let close = |open: &mut OpenBlock, events: &mut Vec<String>| {
        if let OpenBlock::Text(index) | OpenBlock::ToolUse(index) = *open {
            events.push(sse_event(
                Some("content_block_stop"),
                &json!({"type": "content_block_stop", "index": index}),
            ));
        }
        *open = OpenBlock::None;
    };
    for chunk in &response.chunks {
        match chunk {
            Chunk::TextDelta { text } => {
                let index = match open {
                    OpenBlock::Text(index) => index,
                    _ => {
                        close(&mut open, &mut events);
                        let index = next_index;
                        next_index += 1;
                        events.push(sse_event(
                            Some("content_block_start"),
                            &json!({"type": "content_block_start", "index": index,
                                "content_block": {"type": "text", "text": ""}}),
                        ));
                        open = OpenBlock::Text(index);
                        index
                    }
                };
                events.push(sse_event(
                    Some("content_block_delta"),
                    &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": text}}),
                ));
            }
            Chunk::ToolUseStart { id, name } => {
                close(&mut open, &mut events);
                let index = next_index;
                next_index += 1;
                tool_blocks.insert(id.as_str(), index);
                events.push(sse_event(
                    Some("content_block_start"),
                    &json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
                ));
                open = OpenBlock::ToolUse(index);
            }
            Chunk::ToolUseDelta { id, partial_json } => {
                // A delta always belongs to its tool use's block, even if
                // another block was opened in between.
                let Some(&index) = tool_blocks.get(id.as_str()) else {
                    events.push(anthropic_error(&format!(
                        "recorded tool-use delta for unknown tool use {id:?}"
                    )));
                    return events;
                };
                events.push(sse_event(
                    Some("content_block_delta"),
                    &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": partial_json}}),
                ));
            }
            Chunk::Stop { stop_reason, usage } => {
                close(&mut open, &mut events);
                events.push(sse_event(
                    Some("message_delta"),
                    &json!({"type": "message_delta",
                        "delta": {"stop_reason": anthropic_stop_reason(*stop_reason), "stop_sequence": null},
                        "usage": anthropic_usage(usage)}),
                ));
                events.push(sse_event(
                    Some("message_stop"),
                    &json!({"type": "message_stop"}),
                ));
            }
        }
    }
    if let Some(message) = &response.error {
        events.push(anthropic_error(message));
    }
    events
}

fn anthropic_error(message: &str) -> String {
    sse_event(
        Some("error"),
        &json!({"type": "error", "error": {"type": "api_error", "message": message}}),
    )
}

/// The JSON body of an Anthropic error response.
pub fn anthropic_error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// The SSE events of one OpenAI chat-completions streaming response
/// (`stream_options.include_usage` style: usage in a last, choice-less chunk).
pub fn openai_events(response: &ReplayedResponse, model: &str, completion_id: &str) -> Vec<String> {
    let frame = |choices: Value| {
        sse_event(
            None,
            &json!({"id": completion_id, "object": "chat.completion.chunk", "created": 0,
                "model": model, "choices": choices}),
        )
    };
    let delta = |delta: Value| frame(json!([{"index": 0, "delta": delta, "finish_reason": null}]));
    let mut events = Vec::with_capacity(response.chunks.len() + 4);
    events.push(delta(json!({"role": "assistant"})));
    let mut tool_indexes: HashMap<&str, usize> = HashMap::new();
    for chunk in &response.chunks {
        match chunk {
            Chunk::TextDelta { text } => events.push(delta(json!({"content": text}))),
            Chunk::ToolUseStart { id, name } => {
                let index = tool_indexes.len();
                tool_indexes.insert(id.as_str(), index);
                events.push(delta(json!({"tool_calls": [{"index": index, "id": id,
                    "type": "function", "function": {"name": name, "arguments": ""}}]})));
            }
            Chunk::ToolUseDelta { id, partial_json } => {
                let Some(&index) = tool_indexes.get(id.as_str()) else {
                    events.push(openai_error(&format!(
                        "recorded tool-use delta for unknown tool use {id:?}"
                    )));
                    return events;
                };
                events.push(delta(json!({"tool_calls": [{"index": index,
                    "function": {"arguments": partial_json}}]})));
            }
            Chunk::Stop { stop_reason, usage } => {
                events.push(frame(json!([{"index": 0, "delta": {},
                    "finish_reason": openai_finish_reason(*stop_reason)}])));
                let mut usage_json = json!({
                    "prompt_tokens": usage.input_tokens,
                    "completion_tokens": usage.output_tokens,
                    "total_tokens": usage.total(),
                });
                if let Some(cached) = usage.cache_read_input_tokens {
                    usage_json["prompt_tokens_details"] = json!({"cached_tokens": cached});
                }
                events.push(sse_event(
                    None,
                    &json!({"id": completion_id, "object": "chat.completion.chunk", "created": 0,
                        "model": model, "choices": [], "usage": usage_json}),
                ));
                events.push("data: [DONE]\n\n".to_string());
            }
        }
    }
    if let Some(message) = &response.error {
        events.push(openai_error(message));
    }
    events
}

fn openai_error(message: &str) -> String {
    sse_event(None, &openai_error_body("api_error", message))
}

/// The JSON body of an OpenAI error response.
pub fn openai_error_body(kind: &str, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "code": null}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(chunks: Vec<Chunk>, error: Option<&str>) -> ReplayedResponse {
        ReplayedResponse {
            script: 0,
            call: 0,
            model: "m".into(),
            chunks,
            error: error.map(Into::into),
        }
    }

    fn data_lines(events: &[String]) -> Vec<Value> {
        events
            .iter()
            .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    #[test]
    fn anthropic_blocks_open_and_close_around_kinds() {
        let chunks = vec![
            Chunk::TextDelta { text: "a".into() },
            Chunk::TextDelta { text: "b".into() },
            Chunk::ToolUseStart {
                id: "t1".into(),
                name: "read_file".into(),
            },
            Chunk::ToolUseStart {
                id: "t2".into(),
                name: "list_dir".into(),
            },
            Chunk::ToolUseDelta {
                id: "t1".into(),
                partial_json: "{}".into(),
            },
            Chunk::Stop {
                stop_reason: ModelStopReason::ToolUse,
                usage: Usage {
                    input_tokens: 5,
                    output_tokens: 2,
                    cache_read_input_tokens: Some(1),
                    cache_creation_input_tokens: None,
                },
            },
        ];
        let data = data_lines(&anthropic_events(&response(chunks, None), "m", "msg_1"));
        let kinds: Vec<&str> = data.iter().map(|d| d["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        // The late delta for t1 goes to t1's block (index 1), not the open one.
        assert_eq!(data[8]["index"], 1);
        assert_eq!(data[10]["usage"]["cache_read_input_tokens"], 1);
        assert!(
            data[10]["usage"]
                .get("cache_creation_input_tokens")
                .is_none()
        );
    }

    #[test]
    fn recorded_errors_end_the_stream() {
        let events = anthropic_events(
            &response(vec![Chunk::TextDelta { text: "x".into() }], Some("boom")),
            "m",
            "id",
        );
        assert!(events.last().unwrap().starts_with("event: error\n"));
        let events = openai_events(&response(vec![], Some("boom")), "m", "id");
        assert_eq!(
            data_lines(&events).last().unwrap()["error"]["message"],
            "boom"
        );
    }
}
