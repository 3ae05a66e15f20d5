//! Tracker behaviour per dialect and per JSON-RPC rule, including the negative cases.

mod common;

use common::*;
use fanout_acp::{
    Dialect, FrameOrigin, IgnoredReason, NotUnderstoodReason, SessionOpenMethod, SubagentTask,
    Tracker, TrackerEvent,
};
use serde_json::{Value, json};

// ---------------------------------------------------------------- JSON-RPC and sessions

#[test]
fn session_new_opens_with_cwd_from_the_request() {
    let mut wire = Wire::new();
    assert!(wire.send(C2A, json!({"jsonrpc": "2.0", "id": "n1", "method": "session/new", "params": {"cwd": "/proj"}})).is_empty());
    let events = wire.send(
        A2C,
        json!({"jsonrpc": "2.0", "id": "n1", "result": {"sessionId": "s1"}}),
    );
    assert_eq!(
        events,
        vec![TrackerEvent::SessionOpened {
            acp_session_id: "s1".into(),
            cwd: Some("/proj".into()),
            method: SessionOpenMethod::New,
        }]
    );
    // A failed session/new opens nothing.
    wire.send(
        C2A,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": 3}}),
    );
    let events = wire.send(
        A2C,
        json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "no"}}),
    );
    assert!(events.is_empty());
}

#[test]
fn session_load_opens_the_requested_session_and_suppresses_its_replay() {
    let mut wire = Wire::new();
    wire.send(
        C2A,
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/load",
                          "params": {"sessionId": "old", "cwd": "/p", "mcpServers": []}}),
    );
    let replayed = wire.update("old", claude_agent("toolu_old", json!({})));
    assert_eq!(ignored(&replayed), [IgnoredReason::LoadReplay]);
    assert!(tools(&replayed).is_empty());
    let events = wire.send(A2C, json!({"jsonrpc": "2.0", "id": 1, "result": null}));
    assert_eq!(
        events,
        vec![TrackerEvent::SessionOpened {
            acp_session_id: "old".into(),
            cwd: Some("/p".into()),
            method: SessionOpenMethod::Load,
        }]
    );
    let live = wire.update("old", claude_agent("toolu_new", json!({})));
    assert!(one_tool(&live).is_new);
}

#[test]
fn prompt_turns_start_and_end_with_stop_reason_or_error() {
    let mut wire = Wire::new();
    assert_eq!(
        wire.prompt("s1", 7),
        vec![TrackerEvent::PromptStarted {
            acp_session_id: "s1".into(),
            request_id: "7".into()
        }]
    );
    assert_eq!(
        wire.end_prompt(7),
        vec![TrackerEvent::PromptEnded {
            acp_session_id: "s1".into(),
            request_id: "7".into(),
            stop_reason: Some("end_turn".into()),
            error: None,
        }]
    );
    wire.send(C2A, json!({"jsonrpc": "2.0", "id": "p-8", "method": "session/prompt", "params": {"sessionId": "s1"}}));
    let events = wire.send(A2C, json!({"jsonrpc": "2.0", "id": "p-8", "error": {"code": -32603, "message": "Internal error"}}));
    assert_eq!(
        events,
        vec![TrackerEvent::PromptEnded {
            acp_session_id: "s1".into(),
            request_id: "p-8".into(),
            stop_reason: None,
            error: Some("Internal error".into()),
        }]
    );
    let events = wire.send(
        C2A,
        json!({"jsonrpc": "2.0", "id": 9, "method": "session/prompt", "params": {}}),
    );
    assert_eq!(ignored(&events), [IgnoredReason::MissingSessionId]);
    assert!(
        wire.send(A2C, json!({"jsonrpc": "2.0", "id": 9, "result": {}}))
            .is_empty()
    );
}

#[test]
fn responses_are_matched_against_the_other_direction_by_typed_id() {
    let mut wire = Wire::new();
    // Both sides have a request with id 5 in flight.
    wire.prompt("s1", 5);
    wire.send(
        A2C,
        json!({"jsonrpc": "2.0", "id": 5, "method": "session/request_permission", "params": {}}),
    );
    // The client answers the agent's request: not the prompt.
    assert!(
        wire.send(
            C2A,
            json!({"jsonrpc": "2.0", "id": 5, "result": {"outcome": {}}})
        )
        .is_empty()
    );
    // A string "5" is another id.
    let events = wire.send(A2C, json!({"jsonrpc": "2.0", "id": "5", "result": {}}));
    assert_eq!(ignored(&events), [IgnoredReason::UnmatchedResponse]);
    let events = wire.end_prompt(5);
    assert!(matches!(
        events.as_slice(),
        [TrackerEvent::PromptEnded { .. }]
    ));
    // Answered once only.
    assert_eq!(
        ignored(&wire.end_prompt(5)),
        [IgnoredReason::UnmatchedResponse]
    );
    let events = wire.send(
        A2C,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}),
    );
    assert_eq!(ignored(&events), [IgnoredReason::UnmatchedResponse]);
    assert_eq!(wire.tracker.stats().unmatched_responses, 3);
}

#[test]
fn not_understood_lines_are_reported_and_counted() {
    let mut tracker = Tracker::new();
    let cases: [(&str, NotUnderstoodReason); 4] = [
        ("Content-Length: 12", NotUnderstoodReason::InvalidJson),
        ("", NotUnderstoodReason::Blank),
        (
            "[{\"jsonrpc\":\"2.0\",\"method\":\"x\"}]",
            NotUnderstoodReason::NotAnObject,
        ),
        (
            "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":true}",
            NotUnderstoodReason::InvalidId,
        ),
    ];
    for (line, reason) in cases {
        assert_eq!(
            tracker.observe(C2A, line),
            vec![TrackerEvent::NotUnderstood {
                direction: C2A,
                reason
            }]
        );
    }
    assert_eq!(
        tracker.observe_bytes(A2C, b"{\"a\":\"\xff\"}"),
        vec![TrackerEvent::NotUnderstood {
            direction: A2C,
            reason: NotUnderstoodReason::InvalidUtf8
        }]
    );
    let stats = tracker.stats();
    assert_eq!((stats.lines, stats.not_understood), (5, 5));
}

#[test]
fn unknown_methods_and_update_kinds_pass_over() {
    let mut wire = Wire::new();
    assert!(
        wire.send(
            C2A,
            json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}})
        )
        .is_empty()
    );
    assert!(
        wire.send(
            A2C,
            json!({"jsonrpc": "2.0", "id": 3, "method": "fs/read_text_file", "params": {}})
        )
        .is_empty()
    );
    let events = wire.update(
        "s1",
        json!({"sessionUpdate": "brand_new_kind", "whatever": [1, 2]}),
    );
    assert_eq!(
        events,
        vec![TrackerEvent::SessionUpdate {
            acp_session_id: "s1".into(),
            wire_session_id: "s1".into(),
            update_kind: "brand_new_kind".into(),
            parent_tool_call_id: None,
            usage: None,
        }]
    );
    let events = wire.update("s1", json!({"noKind": true}));
    assert_eq!(ignored(&events), [IgnoredReason::MalformedUpdate]);
    let events = wire.send(C2A, json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {"sessionUpdate": "tool_call", "toolCallId": "x"}}}));
    assert_eq!(ignored(&events), [IgnoredReason::UnexpectedDirection]);
}

#[test]
fn tool_frames_without_identity_are_reported_but_not_accumulated() {
    let mut wire = Wire::new();
    let frame = one_tool(&wire.update("", claude_agent("toolu_1", json!({"description": "d"}))));
    assert_eq!(frame.acp_session_id, "");
    assert_eq!(task(&frame).description, "d");
    let frame =
        one_tool(&wire.update("s1", json!({"sessionUpdate": "tool_call", "title": "task"})));
    assert_eq!(frame.tool_call_id, "");
    assert!(frame.is_new && frame.subagent.is_some());
    let again = one_tool(&wire.update(
        "s1",
        json!({"sessionUpdate": "tool_call_update", "title": "x"}),
    ));
    assert!(again.is_new && again.subagent.is_none());
}

// ---------------------------------------------------------------- tool statuses

#[test]
fn tool_status_rules() {
    let mut wire = Wire::new();
    let launch = one_tool(&wire.update(
        "s1",
        json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls"}),
    ));
    assert_eq!(launch.tool_status.as_deref(), Some("in_progress"));
    assert!(launch.is_new);
    let status = |wire: &mut Wire, update: Value| {
        let mut update = update;
        update["sessionUpdate"] = json!("tool_call_update");
        update["toolCallId"] = json!("t1");
        one_tool(&wire.update("s1", update)).tool_status
    };
    assert_eq!(
        status(&mut wire, json!({"status": "pending"})).as_deref(),
        Some("pending")
    );
    assert_eq!(
        status(&mut wire, json!({"content": []})).as_deref(),
        Some("in_progress")
    );
    assert_eq!(
        status(&mut wire, json!({"locations": [{"path": "/a"}]})).as_deref(),
        Some("in_progress")
    );
    assert_eq!(
        status(&mut wire, json!({"rawInput": {}})).as_deref(),
        Some("in_progress")
    );
    assert_eq!(status(&mut wire, json!({"_meta": {"x": 1}})), None);
    assert_eq!(
        status(&mut wire, json!({"rawOutput": "x", "title": ""})),
        None
    );
    let done = {
        let events = wire.update(
            "s1",
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "cancelled"}),
        );
        one_tool(&events)
    };
    assert_eq!(done.tool_status.as_deref(), Some("cancelled"));
    assert_eq!(done.last_tool_status.as_deref(), Some("cancelled"));
    assert!(!done.is_new);
    assert_eq!(done.title.as_deref(), Some("ls"), "title is cumulative");
    // Terminal sticks in the cumulative status; the frame still reports what it said.
    let late = one_tool(&wire.update(
        "s1",
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "in_progress"}),
    ));
    assert_eq!(late.tool_status.as_deref(), Some("in_progress"));
    assert_eq!(late.last_tool_status.as_deref(), Some("cancelled"));
    assert!(!late.is_new, "settled calls are remembered");
}

// ---------------------------------------------------------------- Claude

#[test]
fn claude_launch_then_inputs_on_a_status_less_update() {
    let mut wire = Wire::new();
    let launch = one_tool(&wire.update("s1", claude_agent("toolu_1", json!({}))));
    assert_eq!(launch.dialect.map(Dialect::name), Some("claude"));
    assert_eq!(launch.tool_status.as_deref(), Some("pending"));
    assert_eq!(task(&launch), &SubagentTask::default());
    let inputs = one_tool(&wire.update("s1", json!({
        "sessionUpdate": "tool_call_update", "toolCallId": "toolu_1", "title": "Explore",
        "rawInput": {"description": "Explore", "prompt": "Look around", "subagent_type": "Explore"}
    })));
    assert_eq!(inputs.tool_status.as_deref(), Some("in_progress"));
    assert_eq!(task(&inputs).prompt, "Look around");
    // Later inputs never overwrite.
    let later = one_tool(&wire.update(
        "s1",
        json!({
            "sessionUpdate": "tool_call_update", "toolCallId": "toolu_1",
            "rawInput": {"description": "changed", "prompt": "changed"}
        }),
    ));
    assert_eq!(task(&later).description, "Explore");
}

#[test]
fn claude_meta_only_update_merges_without_a_status_change() {
    let mut wire = Wire::new();
    wire.update("s1", claude_agent("toolu_1", json!({})));
    let frame = one_tool(&wire.update(
        "s1",
        json!({
            "sessionUpdate": "tool_call_update", "toolCallId": "toolu_1",
            "_meta": {"claudeCode": {"toolResponse": {"totalTokens": 10, "totalToolUseCount": 2}}}
        }),
    ));
    assert_eq!(frame.tool_status, None);
    assert_eq!(frame.last_tool_status.as_deref(), Some("pending"));
    assert_eq!(task(&frame).total_tokens, Some(10));
    let next = one_tool(&wire.update("s1", json!({"sessionUpdate": "tool_call_update", "toolCallId": "toolu_1", "status": "completed"})));
    assert_eq!(
        task(&next).tool_use_count,
        Some(2),
        "earlier data stays in the cumulative payload"
    );
}

#[test]
fn claude_async_launch_completes_subagents_only() {
    let mut wire = Wire::new();
    let async_response = json!({"claudeCode": {"toolResponse": {"status": "async_launched", "isAsync": true, "agentId": "a1"}}});
    wire.update("s1", claude_agent("toolu_1", json!({})));
    let frame = one_tool(&wire.update("s1", json!({"sessionUpdate": "tool_call_update", "toolCallId": "toolu_1", "_meta": async_response})));
    assert_eq!(frame.tool_status.as_deref(), Some("completed"));
    assert_eq!(task(&frame).status.as_deref(), Some("async_launched"));
    assert!(task(&frame).is_async);
    assert_eq!(
        (
            task(&frame).total_tokens,
            task(&frame).duration_ms,
            task(&frame).tool_use_count
        ),
        (None, None, None)
    );
    // Overrides a non-terminal explicit status, keeps a terminal one.
    wire.update("s1", claude_agent("toolu_2", json!({})));
    let frame = one_tool(&wire.update("s1", json!({"sessionUpdate": "tool_call_update", "toolCallId": "toolu_2", "status": "in_progress", "_meta": async_response})));
    assert_eq!(frame.tool_status.as_deref(), Some("completed"));
    wire.update("s1", claude_agent("toolu_3", json!({})));
    let frame = one_tool(&wire.update("s1", json!({"sessionUpdate": "tool_call_update", "toolCallId": "toolu_3", "status": "failed", "_meta": async_response})));
    assert_eq!(frame.tool_status.as_deref(), Some("failed"));
    // A non-subagent tool call is not affected.
    wire.update("s1", json!({"sessionUpdate": "tool_call", "toolCallId": "bash_1", "title": "sleep", "_meta": {"claudeCode": {"toolName": "Bash"}}}));
    let frame = one_tool(&wire.update("s1", json!({"sessionUpdate": "tool_call_update", "toolCallId": "bash_1", "_meta": async_response})));
    assert_eq!(frame.tool_status, None);
    assert!(frame.subagent.is_none());
}

#[test]
fn claude_non_agent_tools_and_update_only_agents_are_not_subagents() {
    let mut wire = Wire::new();
    for (id, tool) in [("m", "Monitor"), ("w", "ScheduleWakeup"), ("b", "Bash")] {
        let frame = one_tool(&wire.update("s1", json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": tool, "_meta": {"claudeCode": {"toolName": tool}}})));
        assert!(frame.subagent.is_none(), "{tool}");
    }
    // Recognition happens on tool_call only.
    let frame = one_tool(&wire.update("s1", json!({"sessionUpdate": "tool_call_update", "toolCallId": "late", "title": "Task", "_meta": {"claudeCode": {"toolName": "Agent"}}})));
    assert!(frame.subagent.is_none());
    assert_eq!(frame.message_metadata()["normalized"]["kind"], "generic");
}

#[test]
fn claude_parent_first_seen_is_kept() {
    let mut wire = Wire::new();
    wire.update("s1", claude_agent("toolu_parent", json!({})));
    let mut nested = claude_agent("toolu_nested", json!({"description": "nested"}));
    nested["_meta"]["claudeCode"]["parentToolUseId"] = json!("toolu_parent");
    let frame = one_tool(&wire.update("s1", nested));
    assert_eq!(frame.parent_tool_call_id.as_deref(), Some("toolu_parent"));
    assert!(frame.subagent.is_some(), "nested subagents are rows too");
    let frame = one_tool(&wire.update("s1", json!({"sessionUpdate": "tool_call_update", "toolCallId": "toolu_nested", "status": "completed",
        "_meta": {"claudeCode": {"parentToolUseId": "other"}}})));
    assert_eq!(frame.parent_tool_call_id.as_deref(), Some("toolu_parent"));
    let frame = one_tool(&wire.update(
        "s1",
        json!({"sessionUpdate": "tool_call", "toolCallId": "b2", "title": "x",
        "_meta": {"claudeCode": {"toolName": "Bash", "parentToolUseId": 12}}}),
    ));
    assert_eq!(frame.parent_tool_call_id, None);
    let frame = one_tool(&wire.update(
        "s1",
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "b2",
        "_meta": {"claudeCode": {"parentToolUseId": "toolu_parent"}}}),
    ));
    assert_eq!(
        frame.parent_tool_call_id.as_deref(),
        Some("toolu_parent"),
        "filled when first seen late"
    );
}

#[test]
fn subagent_payload_survives_prompt_end() {
    let mut wire = Wire::new();
    wire.prompt("s1", 1);
    wire.update(
        "s1",
        claude_agent(
            "toolu_1",
            json!({"description": "d", "prompt": "p", "subagent_type": "t"}),
        ),
    );
    wire.end_prompt(1);
    let frame = one_tool(&wire.update(
        "s1",
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "toolu_1", "status": "completed",
        "_meta": {"claudeCode": {"toolResponse": {"status": "completed", "totalTokens": 500}}}}),
    ));
    assert!(!frame.is_new);
    assert_eq!(task(&frame).description, "d");
    assert_eq!(task(&frame).total_tokens, Some(500));
    assert_eq!(frame.tool_status.as_deref(), Some("completed"));
}

// ---------------------------------------------------------------- OpenCode, Auggie

#[test]
fn opencode_task_title_and_results() {
    let mut wire = Wire::new();
    let launch = one_tool(&wire.update("s1", json!({"sessionUpdate": "tool_call", "toolCallId": "c7", "title": " TASK ", "rawInput": {}})));
    assert_eq!(launch.dialect.map(Dialect::name), Some("opencode"));
    let done = one_tool(&wire.update("s1", json!({"sessionUpdate": "tool_call_update", "toolCallId": "c7", "status": "completed",
        "title": "Investigate", "rawInput": {"description": "Investigate"},
        "rawOutput": {"output": "text", "metadata": {"sessionId": "ses_c", "model": {"providerID": "opencode"}}}})));
    assert_eq!(task(&done).child_session_id.as_deref(), Some("ses_c"));
    assert_eq!(task(&done).model.as_deref(), Some("opencode"));
    assert_eq!(
        task(&done).result_text,
        None,
        "a bare output is Auggie's only"
    );
    assert_eq!(task(&done).status, None);
    assert_eq!(done.title.as_deref(), Some("Investigate"));
}

#[test]
fn auggie_output_only_for_auggie_calls() {
    let mut wire = Wire::new();
    let launch = one_tool(&wire.update("a1", json!({"sessionUpdate": "tool_call", "toolCallId": "t9", "title": "sub-agent-code-review: look at PR 12", "kind": "other", "status": "pending"})));
    assert_eq!(launch.dialect.map(Dialect::name), Some("auggie"));
    assert_eq!(task(&launch).subagent_type, "code-review");
    assert_eq!(task(&launch).description, "look at PR 12");
    let done = one_tool(&wire.update("a1", json!({"sessionUpdate": "tool_call_update", "toolCallId": "t9", "status": "completed", "rawOutput": {"output": "Done."}})));
    assert_eq!(task(&done).result_text.as_deref(), Some("Done."));
    for title in ["sub-agent-explore find", "sub-agent-: x", "SUB-AGENT-x: y"] {
        let frame = one_tool(&wire.update(
            "a1",
            json!({"sessionUpdate": "tool_call", "toolCallId": title, "title": title}),
        ));
        assert!(frame.subagent.is_none(), "{title}");
    }
}

// ---------------------------------------------------------------- Cursor

fn cursor_task(id: u64, tool_call_id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "cursor/task", "params": {
        "toolCallId": tool_call_id, "agentId": "agent-1", "description": "Summarize",
        "model": "composer-2.5-fast", "prompt": "Summarize src", "durationMs": 812,
        "subagentType": {"custom": {"unspecified": {}}}}})
}

fn cursor_call(id: &str) -> Value {
    json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": "Task: Subagent task", "kind": "other",
           "status": "in_progress", "rawInput": {"_toolName": "task", "description": "from raw input"}})
}

#[test]
fn cursor_task_before_the_tool_call_is_parked_and_merged() {
    let mut wire = Wire::new();
    wire.prompt("cur-1", 1);
    assert!(wire.send(A2C, cursor_task(41, json!("tool_a"))).is_empty());
    assert!(
        wire.send(C2A, json!({"jsonrpc": "2.0", "id": 41, "result": {}}))
            .is_empty()
    );
    let frame = one_tool(&wire.update("cur-1", cursor_call("tool_a")));
    assert_eq!(frame.dialect.map(Dialect::name), Some("cursor"));
    let payload = task(&frame);
    assert_eq!(payload.description, "from raw input", "fill-if-empty");
    assert_eq!(payload.prompt, "Summarize src");
    assert_eq!(payload.agent_id.as_deref(), Some("agent-1"));
    assert_eq!(payload.model.as_deref(), Some("composer-2.5-fast"));
    assert_eq!(
        payload.duration_ms, None,
        "the side request's launch duration is ignored"
    );
    let done = one_tool(&wire.update(
        "cur-1",
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "tool_a", "status": "completed",
        "rawOutput": {"isBackground": true}}),
    ));
    assert!(task(&done).is_async);
    assert_eq!(task(&done).duration_ms, None);
}

#[test]
fn cursor_task_after_the_tool_call_emits_an_in_progress_update() {
    let mut wire = Wire::new();
    wire.update("cur-1", cursor_call("tool_b"));
    let frame = one_tool(&wire.send(A2C, cursor_task(42, json!("tool_b"))));
    assert_eq!(frame.origin, FrameOrigin::CursorTask);
    assert_eq!(frame.tool_status.as_deref(), Some("in_progress"));
    assert!(!frame.is_new);
    assert_eq!(task(&frame).agent_id.as_deref(), Some("agent-1"));
    assert_eq!(task(&frame).description, "from raw input");
}

#[test]
fn cursor_task_edge_cases() {
    let mut wire = Wire::new();
    // Parked entries are dropped at prompt end.
    wire.prompt("cur-1", 1);
    wire.send(A2C, cursor_task(43, json!("tool_c")));
    wire.end_prompt(1);
    let frame = one_tool(&wire.update("cur-1", cursor_call("tool_c")));
    assert_eq!(task(&frame).agent_id, None);
    // Missing or non-string toolCallId.
    assert_eq!(
        ignored(&wire.send(A2C, cursor_task(44, json!(null)))),
        [IgnoredReason::CursorTaskWithoutToolCallId]
    );
    assert_eq!(
        ignored(&wire.send(A2C, cursor_task(45, json!(5)))),
        [IgnoredReason::CursorTaskWithoutToolCallId]
    );
    // For a tool call that is not a subagent.
    wire.update(
        "cur-1",
        json!({"sessionUpdate": "tool_call", "toolCallId": "plain", "title": "read"}),
    );
    assert_eq!(
        ignored(&wire.send(A2C, cursor_task(46, json!("plain")))),
        [IgnoredReason::CursorTaskForNonSubagent]
    );
    // Not applied to a non-subagent call that later arrives with the same id.
    wire.send(A2C, cursor_task(47, json!("plain2")));
    let frame = one_tool(&wire.update(
        "cur-1",
        json!({"sessionUpdate": "tool_call", "toolCallId": "plain2", "title": "read"}),
    ));
    assert!(frame.subagent.is_none());
}

// ---------------------------------------------------------------- memory bounds

#[test]
fn settled_plain_calls_are_forgotten_oldest_first_but_open_subagents_never() {
    let mut wire = Wire::new();
    wire.update(
        "s",
        claude_agent("toolu_keep", json!({"description": "kept"})),
    );
    for n in 0..6000 {
        let id = format!("t{n}");
        wire.update(
            "s",
            json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": "ls"}),
        );
        wire.update(
            "s",
            json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "completed"}),
        );
    }
    let old = one_tool(&wire.update(
        "s",
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "t0", "status": "completed"}),
    ));
    assert!(old.is_new, "evicted long ago");
    let recent = one_tool(&wire.update(
        "s",
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "t5999", "status": "completed"}),
    ));
    assert!(!recent.is_new);
    let kept = one_tool(&wire.update("s", json!({"sessionUpdate": "tool_call_update", "toolCallId": "toolu_keep", "status": "completed"})));
    assert!(!kept.is_new);
    assert_eq!(task(&kept).description, "kept");
}

#[test]
fn stats_count_events() {
    let mut wire = Wire::new();
    wire.update("s", claude_agent("toolu_1", json!({})));
    wire.send(A2C, json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    let stats = wire.tracker.stats();
    assert_eq!(stats.lines, 2);
    assert_eq!(stats.notifications, 1);
    assert_eq!(stats.responses, 1);
    assert_eq!(stats.tool_frames, 1);
    assert_eq!(stats.ignored, 1);
}
