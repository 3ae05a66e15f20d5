//! The `lanes` transcript order: a third-party agent's parent and subagents
//! write to one stdout concurrently, so their lines interleave differently
//! on every run. What is deterministic is each **lane**: the notifications of
//! one session, of one update kind, about one tool call (`session/update`
//! keyed by `sessionId`, `sessionUpdate`, `toolCallId`; other notifications by
//! method and session), and an agent request with the client's answer. The
//! client's own requests and their responses form the control lane, kept in
//! arrival order first; the other lanes follow, each in arrival order, sorted
//! by their text with run-specific ids blanked. A `session/update` lane is
//! also keyed by the update's other ids (`sessionId` of the subagent a
//! `subagent_update` is about, `senderSessionId`, `messageId`, …). Updates
//! that replace a session's state (ACP's config options, available commands,
//! mode, session info, usage) keep only their last value, and a tool call's
//! `tool_call_update`s (patches: an absent field is unchanged) are folded into
//! one update holding every field's last value; a `subagent_update` lane is
//! split by the set of fields its updates patch, and an update that repeats
//! the one before it in its lane is dropped (a patch setting fields to the
//! values they hold changes nothing): how many intermediate states an agent
//! sends, how often it repeats one, and how it coalesces them, depends on
//! timing (codex-acp 2.6.0 sends a subagent's `running` once or twice).

use std::collections::HashMap;

/// `session/update` kinds that carry a session's whole state of something:
/// the last one is the state.
const STATE_UPDATES: [&str; 5] = [
    "config_option_update",
    "available_commands_update",
    "current_mode_update",
    "session_info_update",
    "usage_update",
];

/// The `session/update` kind whose updates patch a tool call's fields.
const PATCH_UPDATE: &str = "tool_call_update";
/// The `session/update` kind whose updates patch a subagent's fields.
const SUBAGENT_UPDATE: &str = "subagent_update";

use fanout_replay::VolatileRules;
use serde_json::Value;

use crate::acp::{Direction, TranscriptLine};

/// The control lines in arrival order, then every lane (sorted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lanes {
    /// The client's requests and the agent's responses to them.
    pub control: Vec<TranscriptLine>,
    /// The other lanes, sorted.
    pub lanes: Vec<Vec<TranscriptLine>>,
}

/// Which lane a received line belongs to; `None` for the control lane.
fn lane_of(line: &str) -> Option<String> {
    let Ok(message) = serde_json::from_str::<Value>(line) else {
        return Some("other".to_string());
    };
    let text = |value: &Value| value.as_str().unwrap_or("").to_string();
    let method = message.get("method").map(text)?;
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let session = text(params.get("sessionId").unwrap_or(&Value::Null));
    if message.get("id").is_some() {
        let tool = params
            .pointer("/toolCall/toolCallId")
            .map(text)
            .unwrap_or_default();
        return Some(format!("request\u{0}{method}\u{0}{session}\u{0}{tool}"));
    }
    let update = params.get("update").cloned().unwrap_or(Value::Null);
    let kind = text(update.get("sessionUpdate").unwrap_or(&Value::Null));
    // Every id the update names (tool call, the subagent it is about, sender, …).
    let ids: Vec<String> = update
        .as_object()
        .map(|fields| {
            fields
                .iter()
                .filter(|(name, value)| name.ends_with("Id") && value.is_string())
                .map(|(name, value)| format!("{name}={}", text(value)))
                .collect()
        })
        .unwrap_or_default();
    // A subagent_update patches some of a subagent's fields; each set of
    // fields is its own lane (its order is the agent's, the interleaving of
    // two sets is timing).
    let fields: Vec<String> = if kind == SUBAGENT_UPDATE {
        update
            .as_object()
            .map(|fields| {
                fields
                    .keys()
                    .filter(|name| *name != "sessionUpdate" && !name.ends_with("Id"))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let state = if STATE_UPDATES.contains(&kind.as_str()) {
        "state"
    } else if kind == PATCH_UPDATE {
        "patch"
    } else if kind == SUBAGENT_UPDATE {
        "subagent"
    } else {
        "events"
    };
    Some(format!(
        "notification\u{0}{method}\u{0}{session}\u{0}{kind}\u{0}{}\u{0}{}\u{0}{state}",
        ids.join("\u{0}"),
        fields.join(",")
    ))
}

/// The id of a JSON-RPC message, as JSON text.
fn id_of(line: &str) -> Option<String> {
    serde_json::from_str::<Value>(line)
        .ok()?
        .get("id")
        .map(Value::to_string)
}

/// Splits `transcript` into the control lane and the sorted lanes. `known_ids`
/// are run-specific ids (sessions, agents, threads) with the stable
/// placeholders they are sorted by (the transcript's own).
pub fn order(transcript: &[TranscriptLine], known_ids: &[(String, String)]) -> Lanes {
    let mut control = Vec::new();
    let mut lanes: Vec<(String, Vec<TranscriptLine>)> = Vec::new();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    // Agent request id -> its lane, so the client's answer joins it.
    let mut asked: HashMap<String, usize> = HashMap::new();
    for line in transcript {
        let lane = match line.direction {
            Direction::Received => lane_of(&line.text).map(|key| {
                let at = *by_key.entry(key.clone()).or_insert_with(|| {
                    lanes.push((key, Vec::new()));
                    lanes.len() - 1
                });
                if lanes[at].0.starts_with("request\u{0}")
                    && let Some(id) = id_of(&line.text)
                {
                    asked.insert(id, at);
                }
                at
            }),
            Direction::Sent => {
                let answer = serde_json::from_str::<Value>(&line.text)
                    .ok()
                    .filter(|message| message.get("method").is_none());
                answer
                    .and_then(|_| id_of(&line.text))
                    .and_then(|id| asked.get(&id).copied())
            }
        };
        match lane {
            Some(at) => lanes[at].1.push(line.clone()),
            None => control.push(line.clone()),
        }
    }
    let rules = VolatileRules::new();
    let mut known: Vec<&(String, String)> =
        known_ids.iter().filter(|(id, _)| !id.is_empty()).collect();
    known.sort_by_key(|(id, _)| std::cmp::Reverse(id.len()));
    let blank = |text: &str| {
        let mut text = text.to_string();
        for (id, placeholder) in &known {
            text = text.replace(id.as_str(), placeholder);
        }
        rules.apply(&text)
    };
    let mut keyed: Vec<(String, Vec<TranscriptLine>)> = lanes
        .into_iter()
        .map(|(key, mut lines)| {
            if key.ends_with("\u{0}state") && lines.len() > 1 {
                lines.drain(..lines.len() - 1);
            }
            if key.ends_with("\u{0}patch") && !lines.is_empty() {
                lines = vec![fold_patches(&lines)];
            }
            if key.ends_with("\u{0}subagent") {
                lines.dedup_by(|repeat, before| repeat.text == before.text);
            }
            let key = lines
                .iter()
                .map(|line| blank(&line.text))
                .collect::<Vec<_>>()
                .join("\n");
            (key, lines)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    Lanes {
        control,
        lanes: keyed.into_iter().map(|(_, lines)| lines).collect(),
    }
}

/// One update with every field's last value over `lines`, objects such as
/// `_meta` merged a level down, re-serialised (so one update and its split
/// halves give the same text); the last line as is if one is not JSON.
fn fold_patches(lines: &[TranscriptLine]) -> TranscriptLine {
    let last = lines[lines.len() - 1].clone();
    let mut folded: Option<Value> = None;
    for line in lines {
        let Ok(message) = serde_json::from_str::<Value>(&line.text) else {
            return last;
        };
        let Some(folded) = folded.as_mut() else {
            folded = Some(message);
            continue;
        };
        let (Some(into), Some(Value::Object(fields))) = (
            folded
                .pointer_mut("/params/update")
                .and_then(Value::as_object_mut),
            message.pointer("/params/update"),
        ) else {
            return last;
        };
        for (name, value) in fields {
            match (into.get_mut(name), value) {
                (Some(Value::Object(old)), Value::Object(new)) => {
                    old.extend(new.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                _ => {
                    into.insert(name.clone(), value.clone());
                }
            }
        }
    }
    TranscriptLine {
        direction: last.direction,
        text: folded.map_or(last.text, |folded| folded.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn received(text: &str) -> TranscriptLine {
        TranscriptLine {
            direction: Direction::Received,
            text: text.to_string(),
        }
    }

    fn sent(text: &str) -> TranscriptLine {
        TranscriptLine {
            direction: Direction::Sent,
            text: text.to_string(),
        }
    }

    fn update(session: &str, kind: &str, tool: &str, n: u32) -> TranscriptLine {
        received(&format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{{"sessionUpdate":"{kind}","toolCallId":"{tool}","n":{n}}}}}}}"#
        ))
    }

    #[test]
    fn interleavings_of_concurrent_sessions_give_one_order() {
        let prompt = sent(r#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{}}"#);
        let done = received(r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#);
        let a = [
            update("child-a-111", "tool_call", "toolu_A", 1),
            update("child-a-111", "tool_call_update", "toolu_A", 2),
        ];
        let b = [
            update("child-b-222", "tool_call", "toolu_B", 1),
            update("child-b-222", "tool_call_update", "toolu_B", 2),
        ];
        let one = vec![
            prompt.clone(),
            a[0].clone(),
            b[0].clone(),
            a[1].clone(),
            b[1].clone(),
            done.clone(),
        ];
        let two = vec![
            prompt.clone(),
            b[0].clone(),
            b[1].clone(),
            a[0].clone(),
            a[1].clone(),
            done.clone(),
        ];
        let ids = [
            ("child-a-111".to_string(), "<a>".to_string()),
            ("child-b-222".to_string(), "<b>".to_string()),
        ];
        let (x, y) = (order(&one, &ids), order(&two, &ids));
        assert_eq!(x, y);
        assert_eq!(x.control, [prompt, done]);
        assert_eq!(x.lanes.len(), 4);
        // Within a lane, arrival order; each lane is one session's one tool call's kind.
        assert!(x.lanes.iter().all(|lane| lane.len() == 1));
    }

    #[test]
    fn state_updates_keep_their_last_value_and_subagent_updates_split_by_subagent() {
        let state = |n: u32| update("s", "usage_update", "", n);
        let about = |child: &str, n: u32| {
            received(&format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"p","update":{{"sessionUpdate":"subagent_update","sessionId":"{child}","n":{n}}}}}}}"#
            ))
        };
        let lanes = order(
            &[
                state(1),
                about("a", 1),
                state(2),
                about("b", 1),
                about("a", 2),
                state(3),
            ],
            &[],
        );
        assert!(lanes.lanes.contains(&vec![state(3)]));
        assert!(lanes.lanes.contains(&vec![about("a", 1), about("a", 2)]));
        assert!(lanes.lanes.contains(&vec![about("b", 1)]));
        assert_eq!(lanes.lanes.len(), 3);
    }

    #[test]
    fn a_subagent_update_repeating_the_one_before_it_changes_nothing() {
        let state = |value: &str| {
            received(&format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"p","update":{{"sessionUpdate":"subagent_update","sessionId":"c","state":{{"state":"{value}"}}}}}}}}"#
            ))
        };
        let (running, idle) = (state("running"), state("idle"));
        let once = order(&[running.clone(), idle.clone()], &[]);
        let twice = order(&[running.clone(), running.clone(), idle.clone()], &[]);
        assert_eq!(once, twice);
        assert_eq!(once.lanes, [vec![running.clone(), idle.clone()]]);
        // Not a repeat of the one before it: a state the subagent went back to.
        let back = order(&[running.clone(), idle.clone(), running.clone()], &[]);
        assert_eq!(back.lanes, [vec![running.clone(), idle, running]]);
    }

    #[test]
    fn a_tool_calls_patches_fold_into_one_however_they_were_coalesced() {
        let patch = |fields: &str| {
            received(&format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s","update":{{"sessionUpdate":"tool_call_update","toolCallId":"t1",{fields}}}}}}}"#
            ))
        };
        let split = [
            patch(r#""_meta":{"terminal_output_delta":{"data":"hi\n"}}"#),
            patch(r#""status":"completed","rawOutput":{"exit_code":0}"#),
        ];
        let merged = [patch(
            r#""status":"completed","rawOutput":{"exit_code":0},"_meta":{"terminal_output_delta":{"data":"hi\n"}}"#,
        )];
        let one = order(&split, &[]);
        assert_eq!(one, order(&merged, &[]));
        assert_eq!(one.lanes.len(), 1);
        assert_eq!(one.lanes[0].len(), 1);
        assert!(one.lanes[0][0].text.contains(r#""status":"completed""#));
    }

    #[test]
    fn agent_requests_keep_the_clients_answer() {
        let ask = received(
            r#"{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t"}}}"#,
        );
        let answer = sent(r#"{"jsonrpc":"2.0","id":"p1","error":{"code":-32601}}"#);
        let junk = received("not json");
        let lanes = order(&[ask.clone(), junk.clone(), answer.clone()], &[]);
        assert!(lanes.control.is_empty());
        assert!(lanes.lanes.contains(&vec![ask, answer]));
        assert!(lanes.lanes.contains(&vec![junk]));
    }
}
