//! Test support for every crate of the workspace (feature `testing`): proptest
//! strategies for fuzzing anything that reads ACP (JSON values whose strings and keys
//! are mostly the words the dialects look for, so random input reaches real branches
//! rather than bouncing off the first field check).

use std::collections::HashSet;
use std::path::Path;

use proptest::prelude::*;
use serde_json::{Map, Value};

/// Strings that mean something to some dialect, so random values hit real branches (with
/// the agents' names, in [`vocabulary`]).
pub const WORDS: &[&str] = &[
    "",
    "s1",
    "s2",
    "c1",
    "t1",
    "t2",
    "tool_call",
    "tool_call_update",
    "subagent_update",
    "agent_message_chunk",
    "session/update",
    "session/new",
    "session/load",
    "session/prompt",
    "cursor/task",
    "Agent",
    "Bash",
    "task",
    "TASK",
    "spawnAgent",
    "wait",
    "interact",
    "close",
    "session",
    "text",
    "completed",
    "failed",
    "in_progress",
    "pending",
    "started",
    "errored",
    "async_launched",
    "idle",
    "running",
    "sub-agent-x: y",
    "sub-agent-: y",
    "/a/b",
    "2.0",
    "requires_action",
    "cancelled",
    "end_turn",
    "error",
    "agent",
    "invoke_agent__1",
    "Delegating to agent 'x'",
    "general-purpose",
    "background",
    "task_execution",
    "peer",
    "human",
    "subagent_spawned",
    "subagent_state_update",
    "session_message",
    "session_message_chunk",
    "usage_update",
    "initialize",
    "s1#2",
];

/// Keys that mean something to some dialect, so random objects hit real branches.
pub const KEYS: &[&str] = &[
    "jsonrpc",
    "id",
    "method",
    "params",
    "result",
    "error",
    "sessionId",
    "update",
    "sessionUpdate",
    "toolCallId",
    "title",
    "kind",
    "status",
    "rawInput",
    "rawOutput",
    "_meta",
    "content",
    "locations",
    "claudeCode",
    "toolName",
    "toolResponse",
    "parentToolUseId",
    "codex",
    "collaboration",
    "tool",
    "receiverThreadIds",
    "senderThreadId",
    "agentsStates",
    "subagent",
    "threadId",
    "path",
    "activity",
    "agentThreadId",
    "agentPath",
    "activityKind",
    "fanout",
    "childSessionId",
    "state",
    "description",
    "prompt",
    "subagent_type",
    "type",
    "metadata",
    "model",
    "providerID",
    "modelID",
    "durationMs",
    "isBackground",
    "output",
    "totalTokens",
    "totalToolUseCount",
    "totalDurationMs",
    "isAsync",
    "_toolName",
    "cwd",
    "stopReason",
    "message",
    "code",
    "agentId",
    "text",
    "agentInfo",
    "name",
    "parentToolCallId",
    "backgroundTask",
    "toolUseId",
    "executionMode",
    "executionSummary",
    "totalToolCalls",
    "subagentName",
    "run_in_background",
    "agent_type",
    "mode",
    "_claude/origin",
    "kind",
    "from",
    "handback",
    "subagentSessionId",
    "task",
    "messageId",
    "senderSessionId",
    "recipientSessionId",
    "usage",
    "github.com/copilot",
];

/// [`WORDS`] and every registered dialect's `agentInfo.name` values.
pub fn vocabulary() -> Vec<&'static str> {
    let names = crate::Dialect::registered().flat_map(crate::Dialect::agent_names);
    WORDS.iter().chain(names).copied().collect()
}

/// One of the [`vocabulary`], or now and then any printable string.
pub fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vocabulary()).prop_map(str::to_owned),
        1 => "\\PC{0,12}",
    ]
}

/// One of [`KEYS`], or now and then any short printable string.
pub fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(KEYS).prop_map(str::to_owned),
        1 => "\\PC{0,8}",
    ]
}

/// Any JSON value up to five levels deep, its strings and keys mostly ACP vocabulary.
pub fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
        word().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Every JSON line of the fanout transcripts (`*.jsonl`, header skipped) in `dirs`, each
/// once and at most `max_bytes` long: the real frames fuzzers mutate, so every dialect's
/// shapes are reached. Panics on an unreadable file (test support).
pub fn transcript_templates(dirs: &[&Path], max_bytes: usize) -> Vec<Value> {
    let mut seen = HashSet::new();
    let mut templates = Vec::new();
    for dir in dirs {
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
            .collect();
        paths.sort();
        for path in paths {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for record in text.lines().skip(1) {
                let Ok(record) = serde_json::from_str::<Value>(record) else {
                    continue;
                };
                let Some(line) = record["line"].as_str() else {
                    continue;
                };
                if line.len() <= max_bytes
                    && seen.insert(line.to_owned())
                    && let Ok(value) = serde_json::from_str::<Value>(line)
                {
                    templates.push(value);
                }
            }
        }
    }
    templates
}

/// Replaces the node reached by following `selectors` (child index modulo its size).
pub fn mutate(value: &mut Value, selectors: &[usize], replacement: Value) {
    let Some((first, rest)) = selectors.split_first() else {
        *value = replacement;
        return;
    };
    let child = match value {
        Value::Object(map) if !map.is_empty() => {
            let index = first % map.len();
            map.values_mut().nth(index)
        }
        Value::Array(items) if !items.is_empty() => {
            let index = first % items.len();
            items.get_mut(index)
        }
        _ => None,
    };
    match child {
        Some(child) => mutate(child, rest, replacement),
        None => *value = replacement,
    }
}

/// Swaps every session id (and thread, child and sender/recipient session id) for
/// `session` and every tool call id for `tool_call_id`, so templates collide.
pub fn rename(value: &mut Value, session: &str, tool_call_id: &str) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                match (key.as_str(), child.is_string()) {
                    (
                        "sessionId" | "threadId" | "agentThreadId" | "subagentSessionId"
                        | "senderSessionId" | "recipientSessionId",
                        true,
                    ) => *child = Value::from(session),
                    ("toolCallId" | "toolUseId" | "parentToolCallId", true) => {
                        *child = Value::from(tool_call_id);
                    }
                    _ => rename(child, session, tool_call_id),
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| rename(item, session, tool_call_id)),
        _ => {}
    }
}
