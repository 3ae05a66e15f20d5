//! Test support for every crate of the workspace (feature `testing`): proptest
//! strategies for fuzzing anything that reads ACP (JSON values whose strings and keys
//! are mostly the words the dialects look for, so random input reaches real branches
//! rather than bouncing off the first field check).

use proptest::prelude::*;
use serde_json::{Map, Value};

/// Strings that mean something to some dialect, so random values hit real branches.
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
];

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
];

/// One of [`WORDS`], or now and then any printable string.
pub fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(WORDS).prop_map(str::to_owned),
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
