//! Replaying a recording's run-specific values as the live run's: a response
//! recorded in workspace `/tmp/a/workspace` names files there, and the live
//! agent works in `/tmp/b/workspace`.
//!
//! A streamed answer splits its text and tool arguments into deltas at
//! arbitrary points, so a path is often cut in two. Each SSE event's JSON is
//! therefore read as string fragments grouped into **streams**: the leaves a
//! client concatenates (the same field under the same event type and the same
//! `index`, `output_index`, `content_index` or `item_id`: Anthropic's
//! `content_block_delta` of block 0, a chat-completions tool call's
//! `arguments`, a Responses item's `delta`). Values are replaced in the
//! concatenation, and the fragments rewritten so that they still concatenate
//! to it: a replacement goes where its match began. Only events that change
//! are re-serialised; every other byte is sent as recorded.

use serde_json::Value;

use super::format::ResponseBody;

/// Fields that tell one delta stream from another within an event.
const DISCRIMINATORS: [&str; 5] = ["type", "index", "output_index", "content_index", "item_id"];

/// (recorded value, live value) pairs, longest recorded value first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Substitutions {
    pairs: Vec<(String, String)>,
}

impl Substitutions {
    /// Replace each recorded value with its live value; identical and empty
    /// values are dropped.
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut pairs: Vec<(String, String)> = pairs
            .into_iter()
            .filter(|(recorded, live)| !recorded.is_empty() && recorded != live)
            .collect();
        pairs.sort_by_key(|(recorded, _)| std::cmp::Reverse(recorded.len()));
        Self { pairs }
    }

    /// Whether there is nothing to replace.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// A recorded body's bytes as the live run should get them.
    pub fn body(&self, body: &ResponseBody) -> Vec<u8> {
        match body {
            ResponseBody::Base64(_) => body.bytes().unwrap_or_default(),
            _ if self.is_empty() => body.bytes().unwrap_or_default(),
            ResponseBody::Text(text) => self.text(text).into_bytes(),
            ResponseBody::Events(events) => self.events(events).concat().into_bytes(),
        }
    }

    /// Plain text (and JSON text: a value is replaced in its escaped form too).
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (recorded, live) in &self.pairs {
            out = out.replace(recorded.as_str(), live);
            let (escaped_recorded, escaped_live) = (json_inner(recorded), json_inner(live));
            if escaped_recorded != *recorded {
                out = out.replace(&escaped_recorded, &escaped_live);
            }
        }
        out
    }

    /// SSE event blocks, with split values replaced across their fragments.
    pub fn events(&self, blocks: &[String]) -> Vec<String> {
        let mut parsed: Vec<Option<Value>> = blocks.iter().map(|block| event_data(block)).collect();
        // Every string leaf: (event, JSON pointer, stream key).
        let mut leaves: Vec<(usize, String, String)> = Vec::new();
        for (event, data) in parsed.iter().enumerate() {
            if let Some(data) = data {
                collect_leaves(data, "", "", event, &mut leaves);
            }
        }
        let mut streams: Vec<(String, Vec<usize>)> = Vec::new();
        for (at, (_, _, key)) in leaves.iter().enumerate() {
            match streams.iter_mut().find(|(known, _)| known == key) {
                Some((_, members)) => members.push(at),
                None => streams.push((key.clone(), vec![at])),
            }
        }
        let mut changed = vec![false; blocks.len()];
        for (_, members) in &streams {
            let fragments: Vec<String> = members
                .iter()
                .map(|&leaf| {
                    let (event, pointer, _) = &leaves[leaf];
                    parsed[*event]
                        .as_ref()
                        .and_then(|data| data.pointer(pointer))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                })
                .collect();
            let Some(rewritten) = self.fragments(&fragments) else {
                continue;
            };
            for ((&leaf, old), new) in members.iter().zip(&fragments).zip(rewritten) {
                if *old == new {
                    continue;
                }
                let (event, pointer, _) = &leaves[leaf];
                if let Some(slot) = parsed[*event]
                    .as_mut()
                    .and_then(|data| data.pointer_mut(pointer))
                {
                    *slot = Value::String(new);
                    changed[*event] = true;
                }
            }
        }
        blocks
            .iter()
            .zip(parsed)
            .zip(changed)
            .map(|((block, data), changed)| match (changed, data) {
                (true, Some(data)) => rebuild(block, &data),
                (false, Some(_)) => block.clone(),
                // Not JSON: plain replacement.
                (_, None) => self.text(block),
            })
            .collect()
    }

    /// The fragments rewritten so they concatenate to the replaced
    /// concatenation; `None` when nothing matches.
    fn fragments(&self, fragments: &[String]) -> Option<Vec<String>> {
        let whole: String = fragments.concat();
        // Matches (start, end, replacement), left to right, longest value first
        // at each position.
        let mut matches: Vec<(usize, usize, &str)> = Vec::new();
        let mut at = 0;
        while at < whole.len() {
            let found = self
                .pairs
                .iter()
                .find(|(recorded, _)| whole[at..].starts_with(recorded.as_str()));
            match found {
                Some((recorded, live)) => {
                    matches.push((at, at + recorded.len(), live.as_str()));
                    at += recorded.len();
                }
                None => at += whole[at..].chars().next().map_or(1, char::len_utf8),
            }
        }
        if matches.is_empty() {
            return None;
        }
        let mut out = Vec::with_capacity(fragments.len());
        let mut start = 0;
        for fragment in fragments {
            let end = start + fragment.len();
            let mut text = String::new();
            let mut position = start;
            while position < end {
                match matches
                    .iter()
                    .find(|(s, e, _)| *s <= position && position < *e)
                {
                    Some(&(s, e, live)) => {
                        if s >= start {
                            text.push_str(live);
                        }
                        position = e.min(end);
                    }
                    None => {
                        let next = matches
                            .iter()
                            .map(|(s, _, _)| *s)
                            .filter(|s| *s > position)
                            .min()
                            .unwrap_or(end)
                            .min(end);
                        text.push_str(&whole[position..next]);
                        position = next;
                    }
                }
            }
            out.push(text);
            start = end;
        }
        Some(out)
    }
}

/// The JSON-escaped form of `text`, without quotes.
fn json_inner(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap_or_default();
    quoted[1..quoted.len().saturating_sub(1).max(1)].to_string()
}

/// The JSON of an SSE event's data lines, if it is JSON.
fn event_data(block: &str) -> Option<Value> {
    let data: Vec<&str> = block
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| data.strip_prefix(' ').unwrap_or(data))
        .collect();
    if data.is_empty() {
        return None;
    }
    serde_json::from_str(&data.join("\n"))
        .ok()
        .filter(Value::is_object)
}

/// `block` with its data lines replaced by `data` on one line.
fn rebuild(block: &str, data: &Value) -> String {
    let newline = if block.contains("\r\n") { "\r\n" } else { "\n" };
    let mut out = String::new();
    let mut wrote_data = false;
    for line in block.lines() {
        if line.starts_with("data:") {
            if !wrote_data {
                out.push_str(&format!("data: {data}{newline}"));
                wrote_data = true;
            }
        } else if !line.is_empty() {
            out.push_str(line);
            out.push_str(newline);
        }
    }
    out.push_str(newline);
    out
}

/// Every string leaf under `value` at `pointer`, with its stream key.
fn collect_leaves(
    value: &Value,
    pointer: &str,
    key: &str,
    event: usize,
    out: &mut Vec<(usize, String, String)>,
) {
    match value {
        Value::String(_) => out.push((event, pointer.to_string(), key.to_string())),
        Value::Array(items) => {
            for (position, item) in items.iter().enumerate() {
                let slot = item
                    .get("index")
                    .filter(|index| index.is_number())
                    .map_or_else(|| format!("#{position}"), |index| format!("index={index}"));
                collect_leaves(
                    item,
                    &format!("{pointer}/{position}"),
                    &format!("{key}[{slot}]"),
                    event,
                    out,
                );
            }
        }
        Value::Object(fields) => {
            let mut scope = key.to_string();
            for name in DISCRIMINATORS {
                // Only an event's own `type` names its kind: a nested one (a
                // chat tool call's `"type": "function"`) comes in the first
                // fragment only.
                if name == "type" && !pointer.is_empty() {
                    continue;
                }
                if let Some(discriminator) =
                    fields.get(name).filter(|v| v.is_string() || v.is_number())
                {
                    scope.push_str(&format!("{{{name}={discriminator}}}"));
                }
            }
            for (name, child) in fields {
                if DISCRIMINATORS.contains(&name.as_str()) {
                    continue;
                }
                let escaped = name.replace('~', "~0").replace('/', "~1");
                collect_leaves(
                    child,
                    &format!("{pointer}/{escaped}"),
                    &format!("{scope}.{name}"),
                    event,
                    out,
                );
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn subs() -> Substitutions {
        Substitutions::new([
            (
                "/tmp/rec-1/workspace".to_string(),
                "/tmp/live-22/workspace".to_string(),
            ),
            ("/tmp/rec-1".to_string(), "/tmp/live-22".to_string()),
        ])
    }

    fn anthropic_delta(index: u32, partial: &str) -> String {
        format!(
            "event: content_block_delta\ndata: {}\n\n",
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": partial}})
        )
    }

    fn partials(blocks: &[String]) -> Vec<String> {
        blocks
            .iter()
            .filter_map(|b| event_data(b))
            .filter_map(|d| {
                d.pointer("/delta/partial_json")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect()
    }

    #[test]
    fn a_path_split_across_deltas_is_replaced_where_it_began() {
        let arguments = r#"{"file_path": "/tmp/rec-1/workspace/hello.txt"}"#;
        let (head, tail) = arguments.split_at(24);
        let blocks = vec![
            "event: message_start\ndata: {\"type\":\"message_start\"}\n\n".to_string(),
            anthropic_delta(0, head),
            anthropic_delta(1, "unrelated /tmp/rec-1/x"),
            anthropic_delta(0, tail),
            "data: [DONE]\n\n".to_string(),
        ];
        let out = subs().events(&blocks);
        assert_eq!(out[0], blocks[0], "unchanged events keep their bytes");
        assert_eq!(out[4], blocks[4]);
        let got = partials(&out);
        assert_eq!(
            format!("{}{}", got[0], got[2]),
            r#"{"file_path": "/tmp/live-22/workspace/hello.txt"}"#
        );
        assert_eq!(got[1], "unrelated /tmp/live-22/x");
    }

    #[test]
    fn chat_and_responses_streams_are_told_apart_by_index_and_item() {
        let chunk = |index: u32, args: &str| {
            format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "function": {"arguments": args}}]}}]})
            )
        };
        // The first fragment of a tool call also carries its id and type.
        let first = format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "read", "arguments": "/tmp/re"}}]}}]})
        );
        let out = subs().events(&[first, chunk(1, "/tmp/rec-1"), chunk(0, "c-1/a")]);
        let args: Vec<String> = out
            .iter()
            .filter_map(|b| event_data(b))
            .map(|d| {
                d.pointer("/choices/0/delta/tool_calls/0/function/arguments")
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(args, ["/tmp/live-22", "/tmp/live-22", "/a"]);
        let responses = |item: &str, delta: &str| {
            format!(
                "event: d\ndata: {}\n\n",
                json!({"type": "response.function_call_arguments.delta", "item_id": item, "delta": delta})
            )
        };
        let out = subs().events(&[
            responses("fc_1", "/tmp/rec-"),
            responses("fc_2", "x"),
            responses("fc_1", "1/y"),
        ]);
        assert!(out[0].contains(r#""delta":"/tmp/live-22""#), "{}", out[0]);
        assert_eq!(out[1], responses("fc_2", "x"));
        assert!(out[2].contains(r#""delta":"/y""#), "{}", out[2]);
    }

    #[test]
    fn text_bodies_and_empty_substitutions() {
        assert_eq!(
            subs().text(r#"{"path":"/tmp/rec-1/workspace/a"}"#),
            r#"{"path":"/tmp/live-22/workspace/a"}"#
        );
        let none = Substitutions::new([("/same".to_string(), "/same".to_string())]);
        assert!(none.is_empty());
        let body = ResponseBody::Events(vec![anthropic_delta(0, "/tmp/rec-1")]);
        assert_eq!(none.body(&body), body.bytes().unwrap());
    }
}
