//! codex-acp at the tracker: spawns whose child is known late, lifecycle frames on other
//! wire ids, controls, reused wire ids and nested spawns.

mod common;

use common::*;
use fanout_acp::{Dialect, FrameOrigin, IgnoredReason};
use serde_json::{Value, json};

// ---------------------------------------------------------------- Codex

fn codex_spawn(id: &str, receivers: Value, raw_input: Value, sender: &str) -> Value {
    json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": "spawnAgent", "kind": "other", "status": "in_progress",
           "rawInput": raw_input,
           "_meta": {"codex": {"collaboration": {"tool": "spawnAgent", "senderThreadId": sender, "receiverThreadIds": receivers}}}})
}

fn codex_lifecycle(id: &str, child: &str, path: &str, activity: &str, with_meta: bool) -> Value {
    let mut update = json!({"sessionUpdate": "tool_call", "toolCallId": id,
        "title": format!("{} subagent x", if activity == "started" { "Start" } else { "Complete" }),
        "kind": "other", "status": "completed",
        "rawInput": {"agentThreadId": child, "agentPath": path, "activityKind": activity}});
    if with_meta {
        update["_meta"] =
            json!({"codex": {"subagent": {"threadId": child, "path": path, "activity": activity}}});
    }
    update
}

#[test]
fn codex_child_known_only_on_the_completing_update() {
    let mut wire = Wire::new();
    let launch = one_tool(&wire.update(
        "cx",
        codex_spawn(
            "call-1",
            json!([]),
            json!({"prompt": "Audit", "model": "m1"}),
            "main",
        ),
    ));
    assert_eq!(launch.dialect.map(Dialect::name), Some("codex"));
    assert_eq!(task(&launch).child_session_id, None);
    assert_eq!(task(&launch).description, "Audit");
    assert_eq!(task(&launch).status, None);
    let done = one_tool(&wire.update(
        "cx",
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "completed",
        "rawInput": {"agentsStates": {"thread-9": {"status": "running", "message": "Reading"}}},
        "_meta": {"codex": {"collaboration": {"tool": "spawnAgent", "receiverThreadIds": []}}}}),
    ));
    assert_eq!(done.tool_call_id, "call-1");
    assert_eq!(task(&done).child_session_id.as_deref(), Some("thread-9"));
    assert_eq!(
        task(&done).status.as_deref(),
        Some("running"),
        "an explicit child state survives a completed tool status"
    );
    assert_eq!(
        (
            task(&done).total_tokens,
            task(&done).duration_ms,
            task(&done).tool_use_count
        ),
        (None, None, None)
    );
}

#[test]
fn codex_lifecycle_on_another_wire_id_updates_the_original_row() {
    for with_meta in [true, false] {
        let mut wire = Wire::new();
        wire.update(
            "cx",
            codex_spawn(
                "call-spawn",
                json!(["thread-child"]),
                json!({"prompt": "p", "agentsStates": {"thread-child": {"status": "running"}}}),
                "main",
            ),
        );
        let frame = one_tool(&wire.update(
            "cx",
            codex_lifecycle(
                "call-term",
                "thread-child",
                "/agents/review_agent",
                "completed",
                with_meta,
            ),
        ));
        assert_eq!(frame.tool_call_id, "call-spawn");
        assert_eq!(frame.wire_tool_call_id, "call-spawn");
        assert_eq!(frame.origin, FrameOrigin::CodexLifecycle);
        assert!(!frame.is_new);
        assert_eq!(frame.tool_status.as_deref(), Some("completed"));
        assert_eq!(task(&frame).status.as_deref(), Some("completed"));
        assert_eq!(task(&frame).subagent_type, "review_agent");
        // The lifecycle call's own follow-ups stay folded.
        let events = wire.update("cx", json!({"sessionUpdate": "tool_call_update", "toolCallId": "call-term", "status": "completed"}));
        assert_eq!(ignored(&events), [IgnoredReason::CodexLifecycleFollowUp]);
        // A late `started` on a tool_call does not regress the agent status.
        let frame = one_tool(&wire.update(
            "cx",
            codex_lifecycle(
                "call-late",
                "thread-child",
                "/agents/review_agent",
                "started",
                with_meta,
            ),
        ));
        assert_eq!(task(&frame).status.as_deref(), Some("completed"));
    }
}

#[test]
fn codex_unmatched_lifecycle_frames() {
    let mut wire = Wire::new();
    // Terminal for an unknown child: suppressed, no state.
    let events = wire.update(
        "cx",
        codex_lifecycle("t1", "ghost", "/a/ghost", "completed", true),
    );
    assert_eq!(ignored(&events), [IgnoredReason::UnmatchedCodexLifecycle]);
    assert!(tools(&events).is_empty());
    // `started` for an unknown child creates a row (v2, no _meta).
    let frame = one_tool(&wire.update(
        "cx",
        codex_lifecycle("s1", "thread-2", "/agents/review_agent", "started", false),
    ));
    assert!(frame.is_new);
    assert_eq!(frame.tool_call_id, "s1");
    let payload = task(&frame);
    assert_eq!(
        (payload.subagent_type.as_str(), payload.description.as_str()),
        ("review_agent", "review_agent")
    );
    assert_eq!(payload.child_session_id.as_deref(), Some("thread-2"));
    assert_eq!(payload.status.as_deref(), Some("started"));
    let frame = one_tool(&wire.update(
        "cx",
        codex_lifecycle("c1", "thread-2", "/agents/review_agent", "errored", false),
    ));
    assert_eq!(frame.tool_call_id, "s1");
    assert_eq!(task(&frame).status.as_deref(), Some("errored"));
    // Rejected activity: not a lifecycle frame, just a tool call.
    let frame = one_tool(&wire.update(
        "cx",
        json!({"sessionUpdate": "tool_call", "toolCallId": "i1", "title": "x",
        "_meta": {"codex": {"subagent": {"threadId": "thread-2", "activity": "interacted"}}}}),
    ));
    assert!(frame.subagent.is_none());
}

#[test]
fn codex_ambiguous_childless_lifecycle_is_suppressed() {
    let mut wire = Wire::new();
    wire.update(
        "cx",
        codex_spawn("a", json!([]), json!({"prompt": "one"}), "main"),
    );
    wire.update(
        "cx",
        codex_spawn("b", json!([]), json!({"prompt": "two"}), "main"),
    );
    let events = wire.update(
        "cx",
        codex_lifecycle("c", "thread-x", "/a/x", "completed", true),
    );
    assert_eq!(ignored(&events), [IgnoredReason::UnmatchedCodexLifecycle]);
    // With a sole child-less card, the child is adopted.
    let mut wire = Wire::new();
    wire.update(
        "cx",
        codex_spawn("a", json!([]), json!({"prompt": "one"}), "main"),
    );
    let frame = one_tool(&wire.update(
        "cx",
        codex_lifecycle("c", "thread-x", "/a/x", "completed", true),
    ));
    assert_eq!(frame.tool_call_id, "a");
    assert_eq!(task(&frame).child_session_id.as_deref(), Some("thread-x"));
}

#[test]
fn codex_controls_never_create_rows_but_report_child_status() {
    let mut wire = Wire::new();
    wire.update(
        "cx",
        codex_spawn("call-spawn", json!(["t1"]), json!({"prompt": "p"}), "main"),
    );
    let events = wire.update("cx", json!({"sessionUpdate": "tool_call", "toolCallId": "w1", "title": "wait", "status": "in_progress",
        "rawInput": {"agentsStates": {"t1": {"status": "completed"}, "unknown": {"status": "running"}}},
        "_meta": {"codex": {"collaboration": {"tool": "wait", "receiverThreadIds": ["t1"]}}}}));
    let frames = tools(&events);
    assert_eq!(frames.len(), 2, "{frames:#?}");
    assert_eq!(frames[0].tool_call_id, "w1");
    assert!(frames[0].subagent.is_none());
    assert_eq!(frames[1].tool_call_id, "call-spawn");
    assert_eq!(frames[1].origin, FrameOrigin::CodexControl);
    assert_eq!(frames[1].tool_status, None);
    assert_eq!(task(&frames[1]).status.as_deref(), Some("completed"));
    // A 2.x control without _meta, same rule.
    let frame = one_tool(&wire.update(
        "cx",
        json!({"sessionUpdate": "tool_call", "toolCallId": "close-1", "title": "close",
        "rawInput": {"receiverThreadIds": ["t9"]}}),
    ));
    assert!(frame.subagent.is_none());
}

#[test]
fn codex_reused_wire_id_with_a_different_child_gets_a_new_id() {
    let mut wire = Wire::new();
    let first = one_tool(&wire.update(
        "cx",
        codex_spawn("call-1", json!(["t1"]), json!({"prompt": "one"}), "main"),
    ));
    let second = one_tool(&wire.update(
        "cx",
        codex_spawn("call-1", json!(["t2"]), json!({"prompt": "two"}), "main"),
    ));
    assert_eq!(first.tool_call_id, "call-1");
    assert_eq!(second.tool_call_id, "call-1~codex-subagent~2-dDI");
    assert_eq!(second.wire_tool_call_id, "call-1");
    assert!(second.is_new);
    assert_eq!(task(&second).description, "two");
    // Updates find their own card by child; repeated frames keep their ids.
    let update = one_tool(&wire.update("cx", json!({"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "completed",
        "rawInput": {"agentsStates": {"t1": {"status": "completed"}}},
        "_meta": {"codex": {"collaboration": {"tool": "spawnAgent", "receiverThreadIds": ["t1"]}}}})));
    assert_eq!(update.tool_call_id, "call-1");
    let again = one_tool(&wire.update(
        "cx",
        codex_spawn("call-1", json!(["t2"]), json!({}), "main"),
    ));
    assert_eq!(again.tool_call_id, "call-1~codex-subagent~2-dDI");
    assert!(!again.is_new);
}

#[test]
fn codex_nested_spawn_parent_is_the_senders_row() {
    let mut wire = Wire::new();
    wire.update(
        "cx",
        codex_spawn(
            "outer",
            json!(["t-outer"]),
            json!({"prompt": "outer"}),
            "main",
        ),
    );
    let inner = one_tool(&wire.update(
        "cx",
        codex_spawn(
            "inner",
            json!(["t-inner"]),
            json!({"prompt": "inner"}),
            "t-outer",
        ),
    ));
    assert_eq!(inner.parent_tool_call_id.as_deref(), Some("outer"));
    let top = one_tool(&wire.update(
        "cx",
        codex_spawn("top2", json!(["t-3"]), json!({"prompt": "x"}), "main"),
    ));
    assert_eq!(top.parent_tool_call_id, None);
}

#[test]
fn codex_v2_spawn_without_meta() {
    let mut wire = Wire::new();
    let frame = one_tool(&wire.update("cx", json!({"sessionUpdate": "tool_call", "toolCallId": "sp", "title": "spawnAgent",
        "rawInput": {"senderThreadId": "main", "receiverThreadIds": ["t7"], "prompt": "Do it", "model": "gpt"}})));
    assert_eq!(frame.dialect.map(Dialect::name), Some("codex"));
    assert_eq!(task(&frame).child_session_id.as_deref(), Some("t7"));
    assert_eq!(task(&frame).model.as_deref(), Some("gpt"));
    assert_eq!(task(&frame).prompt, "Do it");
    let frame = one_tool(&wire.update("cx", json!({"sessionUpdate": "tool_call", "toolCallId": "sp2", "title": "spawnAgent", "rawInput": {"prompt": "x"}})));
    assert!(frame.subagent.is_none(), "a bare title is not enough");
}
