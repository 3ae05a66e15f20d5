//! One Codex rollout line -> a [`Record`], through the fast parse path (see `lenient`).
//!
//! Shapes read (DESIGN 3.7; every other record and key is passed over):
//! - `session_meta.payload.{id, session_id, parent_thread_id, forked_from_id, cwd,
//!   agent_path, source.subagent.thread_spawn.agent_path}`;
//! - `event_msg.payload` of `type` `task_started` (`turn_id`,
//!   `turn_attribution.parent_turn_id`), `task_complete` (`turn_id`, `duration_ms`; no
//!   status), `turn_aborted` (`turn_id`, `reason`), `item_completed` with an
//!   `item.type` `SubAgentActivity` (`id` = the spawn's call id, `agent_thread_id`,
//!   `kind`);
//! - `turn_context.payload.{turn_id, model}`;
//! - `response_item.payload` of `type` `function_call` (`call_id`, `name`, `arguments`)
//!   and `function_call_output` (`call_id`, `output`);
//! - `token_usage_record.payload.{response_id, turn_id, usage.{input_tokens,
//!   cached_input_tokens, cache_write_input_tokens, output_tokens,
//!   reasoning_output_tokens}}` (its own `model` is null).

use fanout_store::{Timestamp, TokenCounts};
use serde::Deserialize;

use super::super::lenient::{Number, Object, Text};

/// Record types of a rollout that carry nothing fanout reads, known so that a new one
/// is named instead of passed over silently.
const KNOWN_RECORD_TYPES: [&str; 8] = [
    "session_meta",
    "event_msg",
    "response_item",
    "turn_context",
    "token_usage_record",
    "world_state",
    "inter_agent_communication_metadata",
    "compacted",
];

/// What a rollout line becomes.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Record {
    Meta(Meta),
    TaskStarted {
        turn_id: String,
        /// Set on a subagent thread's own turns (the turn of the parent that started it).
        parent_turn_id: Option<String>,
    },
    TaskComplete {
        turn_id: String,
        duration_ms: Option<i64>,
    },
    TurnAborted {
        turn_id: String,
        reason: Option<String>,
    },
    TurnContext {
        turn_id: String,
        model: Option<String>,
    },
    SpawnActivity {
        call_id: String,
        thread: String,
    },
    FunctionCall {
        call_id: String,
        name: String,
        arguments: Option<String>,
    },
    FunctionCallOutput {
        call_id: String,
        output: Option<String>,
    },
    Usage {
        response_id: String,
        turn_id: Option<String>,
        tokens: TokenCounts,
    },
}

/// A thread's `session_meta`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Meta {
    pub(super) thread: String,
    pub(super) root: String,
    pub(super) parent: Option<String>,
    /// A v2 child starts with a copy of its parent's records.
    pub(super) forked: bool,
    pub(super) cwd: Option<String>,
    /// A v2 child's task path (`/root/<task name>`).
    pub(super) agent_path: Option<String>,
}

/// One parsed line: its timestamp and record (`None`: nothing read), and a note for
/// what was passed over but deserves a mention.
#[derive(Debug, Default)]
pub(super) struct Parsed {
    pub(super) at: Option<Timestamp>,
    pub(super) record: Option<Record>,
    pub(super) note: Option<String>,
}

#[derive(Deserialize, Default)]
struct Line<'a> {
    #[serde(default, borrow)]
    timestamp: Text<'a>,
    #[serde(rename = "type", default, borrow)]
    kind: Text<'a>,
    #[serde(default, borrow)]
    payload: Object<Payload<'a>>,
}

#[derive(Deserialize, Default)]
struct Payload<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Text<'a>,
    #[serde(default, borrow)]
    id: Text<'a>,
    #[serde(default, borrow)]
    session_id: Text<'a>,
    #[serde(default, borrow)]
    parent_thread_id: Text<'a>,
    #[serde(default, borrow)]
    forked_from_id: Text<'a>,
    #[serde(default, borrow)]
    cwd: Text<'a>,
    #[serde(default, borrow)]
    agent_path: Text<'a>,
    #[serde(default, borrow)]
    source: Object<Source<'a>>,
    #[serde(default, borrow)]
    turn_id: Text<'a>,
    #[serde(default, borrow)]
    turn_attribution: Object<Attribution<'a>>,
    #[serde(default)]
    duration_ms: Number,
    #[serde(default, borrow)]
    reason: Text<'a>,
    #[serde(default, borrow)]
    model: Text<'a>,
    #[serde(default, borrow)]
    name: Text<'a>,
    #[serde(default, borrow)]
    call_id: Text<'a>,
    #[serde(default, borrow)]
    arguments: Text<'a>,
    #[serde(default, borrow)]
    output: Text<'a>,
    #[serde(default, borrow)]
    response_id: Text<'a>,
    #[serde(default)]
    usage: Object<Usage>,
    #[serde(default, borrow)]
    item: Object<Item<'a>>,
}

#[derive(Deserialize, Default)]
struct Source<'a> {
    #[serde(default, borrow)]
    subagent: Object<SubagentSource<'a>>,
}

#[derive(Deserialize, Default)]
struct SubagentSource<'a> {
    #[serde(default, borrow)]
    thread_spawn: Object<ThreadSpawn<'a>>,
}

#[derive(Deserialize, Default)]
struct ThreadSpawn<'a> {
    #[serde(default, borrow)]
    agent_path: Text<'a>,
}

#[derive(Deserialize, Default)]
struct Attribution<'a> {
    #[serde(default, borrow)]
    parent_turn_id: Text<'a>,
}

#[derive(Deserialize, Default)]
struct Item<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Text<'a>,
    #[serde(default, borrow)]
    id: Text<'a>,
    #[serde(default, borrow)]
    agent_thread_id: Text<'a>,
    #[serde(rename = "kind", default, borrow)]
    activity: Text<'a>,
}

#[derive(Deserialize, Default)]
struct Usage {
    #[serde(default)]
    input_tokens: Number,
    #[serde(default)]
    cached_input_tokens: Number,
    #[serde(default)]
    cache_write_input_tokens: Number,
    #[serde(default)]
    output_tokens: Number,
    #[serde(default)]
    reasoning_output_tokens: Number,
}

impl Usage {
    /// The ledger's disjoint figures (DESIGN 4.1, data contract): OpenAI's
    /// `input_tokens` includes the cached input read and written, and `output_tokens`
    /// the reasoning, so those parts are taken out (never below 0).
    fn tokens(&self) -> TokenCounts {
        let part = |n: Number| n.get().unwrap_or(0).max(0);
        let input = self.input_tokens.get().map(|all| {
            all.saturating_sub(part(self.cached_input_tokens))
                .saturating_sub(part(self.cache_write_input_tokens))
                .max(0)
        });
        let output = self.output_tokens.get().map(|all| {
            all.saturating_sub(part(self.reasoning_output_tokens))
                .max(0)
        });
        TokenCounts {
            input_tokens: input,
            output_tokens: output,
            cache_creation_tokens: self.cache_write_input_tokens.get(),
            cache_read_tokens: self.cached_input_tokens.get(),
            reasoning_tokens: self.reasoning_output_tokens.get(),
        }
    }

    fn not_numbers(&self) -> Vec<&'static str> {
        [
            ("input_tokens", self.input_tokens),
            ("cached_input_tokens", self.cached_input_tokens),
            ("cache_write_input_tokens", self.cache_write_input_tokens),
            ("output_tokens", self.output_tokens),
            ("reasoning_output_tokens", self.reasoning_output_tokens),
        ]
        .into_iter()
        .filter(|(_, n)| *n == Number::Mistyped)
        .map(|(name, _)| name)
        .collect()
    }
}

/// One rollout line. `Err` is the reason the line is bad (`file:line: reason`).
pub(super) fn parse_line(line: &[u8]) -> Result<Parsed, String> {
    let trimmed = line.trim_ascii();
    if trimmed.first() != Some(&b'{') {
        return Err(if trimmed.first() == Some(&b'[') {
            "not a JSON object".to_owned()
        } else {
            "not JSON".to_owned()
        });
    }
    let Object(line): Object<Line<'_>> =
        serde_json::from_slice(trimmed).map_err(|e| format!("not JSON: {e}"))?;
    let kind = line.kind.get().unwrap_or_default();
    let at = match line.timestamp.get() {
        Some(t) => Some(Timestamp::parse(t).map_err(|e| format!("bad \"timestamp\": {e}"))?),
        None => None,
    };
    let p = &line.payload.0;
    let mut note = None;
    let record = match kind {
        "session_meta" => Some(Record::Meta(Meta {
            thread: p.id.owned().unwrap_or_default(),
            root: p
                .session_id
                .owned()
                .or_else(|| p.id.owned())
                .unwrap_or_default(),
            parent: p.parent_thread_id.owned(),
            forked: p.forked_from_id.get().is_some(),
            cwd: p.cwd.owned(),
            agent_path: p
                .agent_path
                .owned()
                .or_else(|| p.source.0.subagent.0.thread_spawn.0.agent_path.owned()),
        })),
        "event_msg" => event(p),
        "turn_context" => p.turn_id.owned().map(|turn_id| Record::TurnContext {
            turn_id,
            model: p.model.owned(),
        }),
        "response_item" => response_item(p),
        "token_usage_record" => {
            let usage = &p.usage.0;
            let bad = usage.not_numbers();
            let response_id = p.response_id.owned();
            if !bad.is_empty() {
                note = Some(format!(
                    "usage of {}: {} not a number (read as not reported)",
                    response_id.as_deref().unwrap_or("a response"),
                    bad.join(", ")
                ));
            }
            response_id.map(|response_id| Record::Usage {
                response_id,
                turn_id: p.turn_id.owned(),
                tokens: usage.tokens(),
            })
        }
        other if KNOWN_RECORD_TYPES.contains(&other) => None,
        "" => return Err("a record without a \"type\"".to_owned()),
        other => {
            note = Some(format!("unknown record type {other:?}: passed over"));
            None
        }
    };
    if record.is_some() && at.is_none() {
        return Err(format!("{kind} record without a \"timestamp\" string"));
    }
    Ok(Parsed { at, record, note })
}

fn event(p: &Payload<'_>) -> Option<Record> {
    let turn_id = p.turn_id.owned();
    match p.kind.get()? {
        "task_started" => Some(Record::TaskStarted {
            turn_id: turn_id?,
            parent_turn_id: p.turn_attribution.0.parent_turn_id.owned(),
        }),
        "task_complete" => Some(Record::TaskComplete {
            turn_id: turn_id?,
            duration_ms: p.duration_ms.get(),
        }),
        "turn_aborted" => Some(Record::TurnAborted {
            turn_id: turn_id?,
            reason: p.reason.owned(),
        }),
        "item_completed" => {
            let item = &p.item.0;
            (item.kind.get() == Some("SubAgentActivity") && item.activity.get() == Some("started"))
                .then(|| {
                    Some(Record::SpawnActivity {
                        call_id: item.id.owned()?,
                        thread: item.agent_thread_id.owned()?,
                    })
                })
                .flatten()
        }
        _ => None,
    }
}

fn response_item(p: &Payload<'_>) -> Option<Record> {
    match p.kind.get()? {
        "function_call" | "custom_tool_call" => Some(Record::FunctionCall {
            call_id: p.call_id.owned()?,
            name: p.name.owned().unwrap_or_default(),
            arguments: p.arguments.owned(),
        }),
        "function_call_output" | "custom_tool_call_output" => Some(Record::FunctionCallOutput {
            call_id: p.call_id.owned()?,
            output: p.output.owned(),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_stored_disjoint() {
        let line = br#"{"timestamp":"2026-12-01T09:35:34.235Z","type":"token_usage_record","payload":{"response_id":"resp_1","turn_id":"t1","model":null,"usage":{"input_tokens":9315,"cached_input_tokens":8704,"cache_write_input_tokens":0,"output_tokens":81,"reasoning_output_tokens":64}}}"#;
        let Some(Record::Usage { tokens, .. }) = parse_line(line).unwrap().record else {
            panic!("usage record");
        };
        assert_eq!(
            tokens,
            TokenCounts {
                input_tokens: Some(611),
                output_tokens: Some(17),
                cache_creation_tokens: Some(0),
                cache_read_tokens: Some(8704),
                reasoning_tokens: Some(64),
            }
        );
    }

    #[test]
    fn unknown_record_types_and_bad_usage_are_named() {
        let unknown =
            parse_line(br#"{"timestamp":"2026-12-01T09:35:34Z","type":"brand_new","payload":{}}"#)
                .unwrap();
        assert!(unknown.record.is_none());
        assert!(unknown.note.unwrap().contains("brand_new"));
        let known = parse_line(
            br#"{"timestamp":"2026-12-01T09:35:34Z","type":"world_state","payload":{}}"#,
        )
        .unwrap();
        assert!(known.note.is_none());
        let bad = parse_line(br#"{"timestamp":"2026-12-01T09:35:34Z","type":"token_usage_record","payload":{"response_id":"r","usage":{"input_tokens":"9"}}}"#).unwrap();
        assert!(bad.note.unwrap().contains("input_tokens"));
        assert!(parse_line(b"{oops").is_err());
        assert!(parse_line(b"[]").is_err());
    }
}
