//! One Claude Code log line -> an [`Entry`], through the fast parse path: a borrowed
//! serde struct of the few keys read, every other key and every content block's body
//! skipped without being built (see `lenient`).
//!
//! Shapes read (every other field and record type is passed over):
//! - every record: `type`, `sessionId`, `cwd`, `timestamp`, `uuid`, `isSidechain`, `isMeta`;
//! - `type: "assistant"`: `message.{id, model, usage, stop_reason}` and the
//!   `message.content[]` blocks `{type: "tool_use", id, name, input}`; the subagent tool
//!   is `Agent` (older versions: `Task`) with `input.{description, prompt, subagent_type}`.
//!   Claude writes one record per content block, each repeating the response's `usage`
//!   (`input_tokens`, `output_tokens`, `cache_creation_input_tokens`,
//!   `cache_read_input_tokens`); `isApiErrorMessage` records and the model
//!   `<synthetic>` are failed requests, not model responses;
//! - `type: "user"`: a prompt (string content or text blocks), or `tool_result` blocks
//!   `{tool_use_id, is_error, content}` with a top-level `toolUseResult` object that, for
//!   the subagent tool, carries `status`, `agentId`, `agentType`, `totalTokens`,
//!   `totalDurationMs`, `totalToolUseCount`, `isAsync`, `outputFile`, `resolvedModel`,
//!   `content`.

use std::collections::HashSet;

use fanout_acp::SubagentTask;
use fanout_store::{Timestamp, TokenCounts};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::super::lenient::{Flag, Number, Object, Text, TextContent, absent};

/// Claude Code's subagent tool (`Task` before it was renamed `Agent`).
pub(super) const SUBAGENT_TOOL_NAMES: [&str; 2] = ["Agent", "Task"];

/// The model Claude Code writes on the assistant record of a request that failed.
const SYNTHETIC_MODEL: &str = "<synthetic>";

/// What a Claude log line becomes.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) at: Timestamp,
    pub(super) session: String,
    pub(super) cwd: Option<String>,
    pub(super) sidechain: bool,
    pub(super) kind: EntryKind,
    /// Its line is new in this import (written), not only read for context.
    pub(super) writes: bool,
}

#[derive(Debug)]
pub(super) enum EntryKind {
    /// A user prompt; `text` is kept for sidechain prompts only (child-log linking).
    Prompt { key: String, text: Option<String> },
    Assistant {
        uses: Vec<ToolUse>,
        stop_reason: Option<String>,
        response: Option<Response>,
    },
    ToolResults {
        results: Vec<ToolResult>,
        /// The record's `toolUseResult` when it is a subagent's result object.
        agent_result: Option<Box<Map<String, Value>>>,
    },
}

/// One model response's usage, as one record of it carries it (or, once the log is
/// read, as all of its records together).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Response {
    pub(super) id: String,
    pub(super) model: Option<String>,
    pub(super) tokens: TokenCounts,
    /// Some record of it is new in this import, so its ledger row is written.
    pub(super) writes: bool,
}

impl Response {
    /// Folds in another record of the same response: the larger figure per field (a
    /// missing one never wins), the first model.
    pub(super) fn absorb(&mut self, later: &Response, later_writes: bool) {
        let larger = |a: Option<i64>, b: Option<i64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let (t, l) = (&mut self.tokens, &later.tokens);
        t.input_tokens = larger(t.input_tokens, l.input_tokens);
        t.output_tokens = larger(t.output_tokens, l.output_tokens);
        t.cache_creation_tokens = larger(t.cache_creation_tokens, l.cache_creation_tokens);
        t.cache_read_tokens = larger(t.cache_read_tokens, l.cache_read_tokens);
        t.reasoning_tokens = larger(t.reasoning_tokens, l.reasoning_tokens);
        if self.model.is_none() {
            self.model.clone_from(&later.model);
        }
        self.writes |= later_writes;
    }
}

#[derive(Debug)]
pub(super) struct ToolUse {
    pub(super) id: String,
    pub(super) title: String,
    pub(super) kind: &'static str,
    /// Set for the subagent tool.
    pub(super) subagent: Option<SubagentTask>,
}

#[derive(Debug)]
pub(super) struct ToolResult {
    pub(super) tool_use_id: String,
    pub(super) is_error: bool,
    /// Kept for the results of subagent calls only (the result text).
    pub(super) text: Option<String>,
}

/// One parsed line.
#[derive(Debug, Default)]
pub(super) struct Parsed {
    pub(super) entry: Option<Entry>,
    /// Something of the line was not understood but the rest was kept (a usage figure
    /// that is not a number): said as `file:line: note`, not an error.
    pub(super) note: Option<String>,
}

#[derive(Deserialize, Default)]
struct Record<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Text<'a>,
    #[serde(rename = "sessionId", default, borrow)]
    session_id: Text<'a>,
    #[serde(default, borrow)]
    cwd: Text<'a>,
    #[serde(default, borrow)]
    timestamp: Text<'a>,
    #[serde(default, borrow)]
    uuid: Text<'a>,
    #[serde(rename = "isSidechain", default)]
    sidechain: Flag,
    #[serde(rename = "isMeta", default)]
    meta: Flag,
    #[serde(rename = "isApiErrorMessage", default)]
    api_error: Flag,
    #[serde(default, borrow)]
    message: Object<Message<'a>>,
    #[serde(rename = "toolUseResult", default, borrow)]
    tool_use_result: Object<AgentResult<'a>>,
}

#[derive(Deserialize, Default)]
struct Message<'a> {
    #[serde(default, borrow)]
    id: Text<'a>,
    #[serde(default, borrow)]
    model: Text<'a>,
    #[serde(default, borrow)]
    stop_reason: Text<'a>,
    #[serde(default)]
    usage: Object<Usage>,
    #[serde(default, borrow)]
    content: Content<'a>,
}

#[derive(Deserialize, Default)]
struct Usage {
    #[serde(default)]
    input_tokens: Number,
    #[serde(default)]
    output_tokens: Number,
    #[serde(default)]
    cache_creation_input_tokens: Number,
    #[serde(default)]
    cache_read_input_tokens: Number,
}

/// `message.content`: a string (a prompt), or blocks.
#[derive(Default)]
struct Content<'a> {
    text: Option<String>,
    blocks: Vec<Block<'a>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // A string or an array; anything else is empty. Decided by a visitor, not by an
        // untagged enum (which would buffer the value).
        struct ContentVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for ContentVisitor<'a> {
            type Value = Content<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Content {
                    text: Some(v.to_owned()),
                    blocks: Vec::new(),
                })
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut blocks = Vec::new();
                while let Some(Object(block)) = seq.next_element::<Object<Block<'de>>>()? {
                    blocks.push(block);
                }
                Ok(Content { text: None, blocks })
            }
            absent!(Content::default(); map, bool, numbers, null);
        }
        deserializer.deserialize_any(ContentVisitor(std::marker::PhantomData))
    }
}

/// A content block: the keys of `text`, `tool_use` and `tool_result` blocks. The body of
/// a `tool_result` (`content`) is kept as text; a tool's `input` only for the keys the
/// subagent tool has.
#[derive(Deserialize, Default)]
struct Block<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Text<'a>,
    #[serde(default, borrow)]
    text: Text<'a>,
    #[serde(default, borrow)]
    id: Text<'a>,
    #[serde(default, borrow)]
    name: Text<'a>,
    #[serde(default, borrow)]
    input: Object<Input<'a>>,
    #[serde(default, borrow)]
    tool_use_id: Text<'a>,
    #[serde(default)]
    is_error: Flag,
    #[serde(default)]
    content: TextContent,
}

#[derive(Deserialize, Default)]
struct Input<'a> {
    #[serde(default, borrow)]
    description: Text<'a>,
    #[serde(default, borrow)]
    prompt: Text<'a>,
    #[serde(default, borrow)]
    subagent_type: Text<'a>,
}

/// The keys of a subagent's result object that the Claude rule reads (DESIGN 3.3).
#[derive(Deserialize, Default)]
struct AgentResult<'a> {
    #[serde(default, borrow)]
    status: Text<'a>,
    #[serde(rename = "agentId", default, borrow)]
    agent_id: Text<'a>,
    #[serde(rename = "agentType", default, borrow)]
    agent_type: Text<'a>,
    #[serde(rename = "resolvedModel", default, borrow)]
    resolved_model: Text<'a>,
    #[serde(rename = "outputFile", default, borrow)]
    output_file: Text<'a>,
    #[serde(default, borrow)]
    description: Text<'a>,
    #[serde(default, borrow)]
    prompt: Text<'a>,
    #[serde(rename = "totalDurationMs", default)]
    total_duration_ms: Number,
    #[serde(rename = "totalTokens", default)]
    total_tokens: Number,
    #[serde(rename = "totalToolUseCount", default)]
    total_tool_use_count: Number,
    #[serde(rename = "isAsync", default)]
    is_async: Flag,
    #[serde(rename = "canReadOutputFile", default)]
    can_read_output_file: Flag,
    #[serde(default)]
    content: TextContent,
}

impl AgentResult<'_> {
    /// The result object as the Claude rule reads it (`merge_claude_result`), when it is
    /// a subagent's (it names an agent or a status).
    fn to_map(&self) -> Option<Map<String, Value>> {
        if self.agent_id.get().is_none() && self.status.get().is_none() {
            return None;
        }
        let mut map = Map::new();
        let mut text = |key: &str, value: &Text<'_>| {
            if let Some(v) = value.get() {
                map.insert(key.to_owned(), Value::String(v.to_owned()));
            }
        };
        text("status", &self.status);
        text("agentId", &self.agent_id);
        text("agentType", &self.agent_type);
        text("resolvedModel", &self.resolved_model);
        text("outputFile", &self.output_file);
        text("description", &self.description);
        text("prompt", &self.prompt);
        for (key, number) in [
            ("totalDurationMs", self.total_duration_ms),
            ("totalTokens", self.total_tokens),
            ("totalToolUseCount", self.total_tool_use_count),
        ] {
            if let Some(v) = number.get() {
                map.insert(key.to_owned(), Value::from(v));
            }
        }
        if self.is_async.0 {
            map.insert("isAsync".to_owned(), Value::Bool(true));
        }
        if self.can_read_output_file.0 {
            map.insert("canReadOutputFile".to_owned(), Value::Bool(true));
        }
        if let Some(content) = &self.content.0 {
            map.insert(
                "content".to_owned(),
                serde_json::json!([{"type": "text", "text": content}]),
            );
        }
        Some(map)
    }
}

/// Per-log parse state: the subagent calls seen so far (their results keep their text).
#[derive(Default)]
pub(super) struct LogState {
    subagent_calls: HashSet<String>,
}

/// Quick rejection: a record the importer reads has `"user"` or `"assistant"` in it (its
/// type's value); any other line is at most checked to be a JSON object's shape.
fn may_be_read(line: &[u8]) -> bool {
    memchr::memmem::find(line, b"\"assistant\"").is_some()
        || memchr::memmem::find(line, b"\"user\"").is_some()
}

/// One log line -> its entry (`None`: a record type or shape that records nothing).
/// `Err` is the reason the line is bad (`file:line: reason`).
pub(super) fn parse_line(
    line: &[u8],
    fallback_session: &str,
    number: u64,
    state: &mut LogState,
) -> Result<Parsed, String> {
    if !may_be_read(line) {
        let trimmed = line.trim_ascii();
        return if trimmed.first() == Some(&b'{') && trimmed.last() == Some(&b'}') {
            Ok(Parsed::default())
        } else if trimmed.first() == Some(&b'[') {
            Err("not a JSON object".to_owned())
        } else {
            Err("not JSON".to_owned())
        };
    }
    let record: Record<'_> = match serde_json::from_slice::<Object<Record<'_>>>(line) {
        Ok(Object(record)) => record,
        Err(e) => return Err(format!("not JSON: {e}")),
    };
    let entry_type = record.kind.get().unwrap_or_default();
    if entry_type != "user" && entry_type != "assistant" {
        if record.kind.0.is_none() && !line.trim_ascii_start().starts_with(b"{") {
            return Err("not a JSON object".to_owned());
        }
        return Ok(Parsed::default());
    }
    let at = record
        .timestamp
        .get()
        .ok_or_else(|| format!("{entry_type} entry without a \"timestamp\" string"))
        .and_then(|t| Timestamp::parse(t).map_err(|e| format!("bad \"timestamp\": {e}")))?;
    let message = &record.message.0;
    let session = record
        .session_id
        .owned()
        .unwrap_or_else(|| fallback_session.to_owned());
    let sidechain = record.sidechain.0;
    let mut note = None;
    let kind = if entry_type == "assistant" {
        let uses: Vec<ToolUse> = message
            .content
            .blocks
            .iter()
            .filter(|b| b.kind.get() == Some("tool_use"))
            .filter_map(tool_use)
            .collect();
        for tool in &uses {
            if tool.subagent.is_some() {
                state.subagent_calls.insert(tool.id.clone());
            }
        }
        let (response, usage_note) = response(&record, message);
        note = usage_note;
        let stop_reason = message.stop_reason.owned();
        if uses.is_empty() && stop_reason.is_none() && response.is_none() {
            return Ok(Parsed { entry: None, note });
        }
        EntryKind::Assistant {
            uses,
            stop_reason,
            response,
        }
    } else {
        let results: Vec<ToolResult> = message
            .content
            .blocks
            .iter()
            .filter(|b| b.kind.get() == Some("tool_result"))
            .filter_map(|b| {
                let tool_use_id = b.tool_use_id.owned()?;
                let text = state
                    .subagent_calls
                    .contains(&tool_use_id)
                    .then(|| b.content.0.clone())
                    .flatten();
                Some(ToolResult {
                    tool_use_id,
                    is_error: b.is_error.0,
                    text,
                })
            })
            .collect();
        if !results.is_empty() {
            EntryKind::ToolResults {
                results,
                agent_result: record.tool_use_result.0.to_map().map(Box::new),
            }
        } else if record.meta.0 {
            return Ok(Parsed::default());
        } else {
            let Some(prompt) = prompt_text(&message.content) else {
                return Ok(Parsed::default());
            };
            let key = record
                .uuid
                .owned()
                .unwrap_or_else(|| format!("line-{number}"));
            EntryKind::Prompt {
                key,
                text: sidechain.then_some(prompt),
            }
        }
    };
    Ok(Parsed {
        entry: Some(Entry {
            at,
            session,
            cwd: record.cwd.owned(),
            sidechain,
            kind,
            writes: true,
        }),
        note,
    })
}

/// The record's response usage, unless it is a failed request's (`<synthetic>` model or
/// `isApiErrorMessage`), and a note naming every usage figure that is not a number.
fn response(record: &Record<'_>, message: &Message<'_>) -> (Option<Response>, Option<String>) {
    let Some(id) = message.id.owned() else {
        return (None, None);
    };
    let model = message.model.owned();
    if record.api_error.0 || model.as_deref() == Some(SYNTHETIC_MODEL) {
        return (None, None);
    }
    let usage = &message.usage.0;
    let figures = [
        ("input_tokens", usage.input_tokens),
        ("output_tokens", usage.output_tokens),
        (
            "cache_creation_input_tokens",
            usage.cache_creation_input_tokens,
        ),
        ("cache_read_input_tokens", usage.cache_read_input_tokens),
    ];
    if figures.iter().all(|(_, n)| *n == Number::Absent) {
        return (None, None);
    }
    let bad: Vec<&str> = figures
        .iter()
        .filter(|(_, n)| *n == Number::Mistyped)
        .map(|(name, _)| *name)
        .collect();
    let note = (!bad.is_empty()).then(|| {
        format!(
            "usage of {id}: {} not a number (read as not reported)",
            bad.join(", ")
        )
    });
    let tokens = TokenCounts {
        input_tokens: usage.input_tokens.get(),
        output_tokens: usage.output_tokens.get(),
        cache_creation_tokens: usage.cache_creation_input_tokens.get(),
        cache_read_tokens: usage.cache_read_input_tokens.get(),
        reasoning_tokens: None,
    };
    (
        Some(Response {
            id,
            model,
            tokens,
            writes: true,
        }),
        note,
    )
}

/// The text of a prompt: string content, or its text blocks joined.
fn prompt_text(content: &Content<'_>) -> Option<String> {
    if let Some(text) = &content.text {
        return Some(text.clone());
    }
    let parts: Vec<&str> = content
        .blocks
        .iter()
        .filter(|b| b.kind.get() == Some("text"))
        .filter_map(|b| b.text.get())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n"))
}

fn tool_use(block: &Block<'_>) -> Option<ToolUse> {
    let id = block.id.owned()?;
    let name = block.name.get().unwrap_or_default();
    let input = &block.input.0;
    let is_subagent = SUBAGENT_TOOL_NAMES.contains(&name);
    let subagent = is_subagent.then(|| SubagentTask {
        description: input.description.owned().unwrap_or_default(),
        prompt: input.prompt.owned().unwrap_or_default(),
        subagent_type: input.subagent_type.owned().unwrap_or_default(),
        ..SubagentTask::default()
    });
    let title = if is_subagent {
        input.description.owned().unwrap_or_else(|| name.to_owned())
    } else {
        name.to_owned()
    };
    Some(ToolUse {
        id,
        title,
        kind: acp_kind(name),
        subagent,
    })
}

/// The ACP tool kind claude-agent-acp reports for a Claude Code tool.
fn acp_kind(tool_name: &str) -> &'static str {
    match tool_name {
        "Read" | "NotebookRead" => "read",
        "Edit" | "MultiEdit" | "Write" | "NotebookEdit" => "edit",
        "Bash" | "BashOutput" | "KillShell" => "execute",
        "Grep" | "Glob" | "LS" => "search",
        "WebFetch" | "WebSearch" => "fetch",
        "Agent" | "Task" | "TodoWrite" | "ExitPlanMode" => "think",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &[u8]) -> Result<Parsed, String> {
        parse_line(line, "f", 1, &mut LogState::default())
    }

    #[test]
    fn agent_tool_use_becomes_a_subagent_launch_with_its_usage() {
        let line = br#"{"type":"assistant","sessionId":"s","cwd":"/p","timestamp":"2026-08-03T15:32:21Z","message":{"id":"msg_1","model":"claude-x","role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"tool_use","id":"toolu_1","name":"Agent","input":{"description":"d","prompt":"p","subagent_type":"t"}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":1,"cache_creation_input_tokens":5,"cache_read_input_tokens":7,"service_tier":"standard"}}}"#;
        let entry = parse(line).unwrap().entry.expect("an entry");
        let EntryKind::Assistant {
            uses,
            stop_reason,
            response,
        } = entry.kind
        else {
            panic!("assistant entry");
        };
        assert_eq!(stop_reason.as_deref(), Some("tool_use"));
        assert_eq!(uses[0].title, "d");
        assert_eq!(
            uses[0].subagent.as_ref().map(|t| t.subagent_type.as_str()),
            Some("t")
        );
        let response = response.expect("usage");
        assert_eq!(response.id, "msg_1");
        assert_eq!(response.tokens.cache_read_tokens, Some(7));
        assert_eq!(response.tokens.reasoning_tokens, None);
    }

    #[test]
    fn failed_requests_are_no_responses() {
        let synthetic = br#"{"type":"assistant","timestamp":"2026-08-03T15:32:21Z","isApiErrorMessage":true,"message":{"id":"7f0c","model":"<synthetic>","content":[{"type":"text","text":"API Error"}],"usage":{"input_tokens":0,"output_tokens":0}}}"#;
        assert!(parse(synthetic).unwrap().entry.is_none());
    }

    #[test]
    fn a_usage_figure_that_is_a_string_is_named_and_the_rest_kept() {
        let line = br#"{"type":"assistant","timestamp":"2026-08-03T15:32:21Z","message":{"id":"msg_1","model":"m","content":[],"usage":{"input_tokens":"12","output_tokens":4}}}"#;
        let parsed = parse(line).unwrap();
        assert!(parsed.note.unwrap().contains("input_tokens not a number"));
        let Some(Entry {
            kind: EntryKind::Assistant {
                response: Some(r), ..
            },
            ..
        }) = parsed.entry
        else {
            panic!("entry with usage");
        };
        assert_eq!(
            (r.tokens.input_tokens, r.tokens.output_tokens),
            (None, Some(4))
        );
    }

    #[test]
    fn bad_entries_say_why() {
        assert!(parse(b"{").is_err_and(|e| e.contains("not JSON")));
        assert!(parse(b"[1]").is_err_and(|e| e.contains("object")));
        assert!(
            parse(br#"{"type":"user","message":{"content":"hi"}}"#)
                .is_err_and(|e| e.contains("timestamp"))
        );
        assert!(parse(br#"{"type":"summary","summary":"x"}"#).is_ok_and(|p| p.entry.is_none()));
        assert!(parse(br#"{"type":"attachment","x":"user"}"#).is_ok_and(|p| p.entry.is_none()));
    }
}
