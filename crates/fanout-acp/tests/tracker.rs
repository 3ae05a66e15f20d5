//! Tracker behaviour per dialect and per JSON-RPC rule, including the negative cases.

use fanout_acp::{
    Dialect, Direction, FrameOrigin, IgnoredReason, NotUnderstoodReason, SessionOpenMethod,
    SubagentTask, ToolFrame, Tracker, TrackerEvent,
};
use serde_json::{Value, json};

const C2A: Direction = Direction::ClientToAgent;
const A2C: Direction = Direction::AgentToClient;

struct Wire {
    tracker: Tracker,
}

impl Wire {
    fn new() -> Self {
        Self {
            tracker: Tracker::new(),
        }
    }

    fn send(&mut self, direction: Direction, message: Value) -> Vec<TrackerEvent> {
        self.tracker.observe(direction, &message.to_string())
    }

    /// An agent-to-client `session/update`.
    fn update(&mut self, session: &str, update: Value) -> Vec<TrackerEvent> {
        self.send(
            A2C,
            json!({"jsonrpc": "2.0", "method": "session/update",
                   "params": {"sessionId": session, "update": update}}),
        )
    }

    fn open(&mut self, session: &str) {
        self.send(
            C2A,
            json!({"jsonrpc": "2.0", "id": 900, "method": "session/new", "params": {"cwd": "/w"}}),
        );
        self.send(
            A2C,
            json!({"jsonrpc": "2.0", "id": 900, "result": {"sessionId": session}}),
        );
    }

    fn prompt(&mut self, session: &str, id: u64) -> Vec<TrackerEvent> {
        self.send(
            C2A,
            json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
                              "params": {"sessionId": session, "prompt": []}}),
        )
    }

    fn end_prompt(&mut self, id: u64) -> Vec<TrackerEvent> {
        self.send(
            A2C,
            json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}),
        )
    }
}

fn tools(events: &[TrackerEvent]) -> Vec<ToolFrame> {
    events
        .iter()
        .filter_map(|event| match event {
            TrackerEvent::Tool(frame) => Some((**frame).clone()),
            _ => None,
        })
        .collect()
}

fn one_tool(events: &[TrackerEvent]) -> ToolFrame {
    let frames = tools(events);
    assert_eq!(frames.len(), 1, "{events:#?}");
    frames.into_iter().next().unwrap()
}

fn ignored(events: &[TrackerEvent]) -> Vec<IgnoredReason> {
    events
        .iter()
        .filter_map(|event| match event {
            TrackerEvent::Ignored { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

fn task(frame: &ToolFrame) -> &SubagentTask {
    frame.subagent.as_ref().expect("subagent payload")
}

fn claude_agent(id: &str, raw_input: Value) -> Value {
    json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": "Task", "kind": "think",
           "status": "pending", "rawInput": raw_input, "_meta": {"claudeCode": {"toolName": "Agent"}}})
}

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
    assert_eq!(launch.dialect, Some(Dialect::Claude));
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
    assert_eq!(launch.dialect, Some(Dialect::OpenCode));
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
    assert_eq!(launch.dialect, Some(Dialect::Auggie));
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
    assert_eq!(frame.dialect, Some(Dialect::Cursor));
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
    assert_eq!(launch.dialect, Some(Dialect::Codex));
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
    assert_eq!(frame.dialect, Some(Dialect::Codex));
    assert_eq!(task(&frame).child_session_id.as_deref(), Some("t7"));
    assert_eq!(task(&frame).model.as_deref(), Some("gpt"));
    assert_eq!(task(&frame).prompt, "Do it");
    let frame = one_tool(&wire.update("cx", json!({"sessionUpdate": "tool_call", "toolCallId": "sp2", "title": "spawnAgent", "rawInput": {"prompt": "x"}})));
    assert!(frame.subagent.is_none(), "a bare title is not enough");
}

// ---------------------------------------------------------------- ACP native

/// A `subagent_update` announcing (or patching) `child`.
fn announce(child: &str, extra: Value) -> Value {
    let mut update = json!({"sessionUpdate": "subagent_update", "sessionId": child});
    if let (Some(update), Some(extra)) = (update.as_object_mut(), extra.as_object()) {
        update.extend(extra.clone());
    }
    update
}

#[test]
fn native_child_traffic_belongs_to_the_parent_under_the_child_row() {
    let mut wire = Wire::new();
    wire.open("p");
    let row = one_tool(&wire.update(
        "p",
        announce(
            "kid",
            json!({"description": "Reviews", "state": {"state": "running"}}),
        ),
    ));
    assert!(row.is_new);
    assert_eq!(row.tool_call_id, "kid");
    assert_eq!(row.dialect, Some(Dialect::AcpNative));
    assert_eq!(row.tool_status, None);
    assert_eq!(task(&row).child_session_id.as_deref(), Some("kid"));
    assert_eq!(task(&row).status.as_deref(), Some("running"));
    // The parent has its own call_1; the child's call_1 must not merge into it.
    wire.update(
        "p",
        json!({"sessionUpdate": "tool_call", "toolCallId": "call_1", "title": "read a"}),
    );
    let child_call = one_tool(&wire.update(
        "kid",
        json!({"sessionUpdate": "tool_call", "toolCallId": "call_1", "title": "read b"}),
    ));
    assert_eq!(child_call.acp_session_id, "p");
    assert_eq!(child_call.wire_session_id, "kid");
    assert_eq!(child_call.parent_tool_call_id.as_deref(), Some("kid"));
    assert_ne!(child_call.tool_call_id, "call_1");
    assert!(child_call.is_new);
    let update = one_tool(&wire.update(
        "kid",
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "status": "completed"}),
    ));
    assert_eq!(update.tool_call_id, child_call.tool_call_id);
    let unique = one_tool(&wire.update(
        "kid",
        json!({"sessionUpdate": "tool_call", "toolCallId": "call_2", "title": "x"}),
    ));
    assert_eq!(unique.tool_call_id, "call_2");
    // State is verbatim, description is a patch.
    let idle = one_tool(&wire.update(
        "p",
        announce(
            "kid",
            json!({"state": {"state": "idle", "stopReason": "end_turn"}}),
        ),
    ));
    assert_eq!(task(&idle).status.as_deref(), Some("idle"));
    assert_eq!(task(&idle).description, "Reviews");
    assert!(!idle.is_new);
    let cleared = one_tool(&wire.update(
        "p",
        announce("kid", json!({"description": null, "state": "bogus"})),
    ));
    assert_eq!(task(&cleared).description, "");
    assert_eq!(task(&cleared).status.as_deref(), Some("idle"));
}

#[test]
fn native_link_before_announcement_supplies_the_tool_status() {
    let mut wire = Wire::new();
    wire.update("p", json!({"sessionUpdate": "tool_call", "toolCallId": "spawn-1", "title": "Delegate", "status": "in_progress",
        "content": [{"type": "session", "sessionId": "kid"}]}));
    let row = one_tool(&wire.update("p", announce("kid", json!({"state": {"state": "running"}}))));
    assert_eq!(row.tool_status.as_deref(), Some("in_progress"));
    let events = wire.update(
        "p",
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "spawn-1", "status": "failed"}),
    );
    let frames = tools(&events);
    assert_eq!(frames.len(), 2);
    assert!(frames[0].subagent.is_none());
    assert_eq!(frames[1].tool_call_id, "kid");
    assert_eq!(frames[1].origin, FrameOrigin::SessionLink);
    assert_eq!(frames[1].tool_status.as_deref(), Some("failed"));
}

#[test]
fn native_grandchild_nests_under_the_child_row() {
    let mut wire = Wire::new();
    wire.update("p", announce("kid", json!({})));
    let grandchild = one_tool(&wire.update(
        "kid",
        announce("grandkid", json!({"description": "deeper"})),
    ));
    assert_eq!(grandchild.acp_session_id, "p");
    assert_eq!(grandchild.tool_call_id, "grandkid");
    assert_eq!(grandchild.parent_tool_call_id.as_deref(), Some("kid"));
    let events = wire.update(
        "grandkid",
        json!({"sessionUpdate": "agent_thought_chunk", "content": {}}),
    );
    assert_eq!(
        events,
        vec![TrackerEvent::SessionUpdate {
            acp_session_id: "p".into(),
            wire_session_id: "grandkid".into(),
            update_kind: "agent_thought_chunk".into(),
            parent_tool_call_id: Some("grandkid".into()),
            usage: None,
        }]
    );
}

#[test]
fn native_updates_that_would_nest_a_session_in_itself_are_ignored() {
    let mut wire = Wire::new();
    wire.open("p");
    wire.open("q");
    assert_eq!(
        ignored(&wire.update("p", announce("p", json!({})))),
        [IgnoredReason::InvalidSubagentUpdate]
    );
    assert_eq!(
        ignored(&wire.update("p", announce("q", json!({})))),
        [IgnoredReason::InvalidSubagentUpdate]
    );
    assert_eq!(
        ignored(&wire.update(
            "p",
            json!({"sessionUpdate": "subagent_update", "sessionId": 4})
        )),
        [IgnoredReason::InvalidSubagentUpdate]
    );
    wire.update("p", announce("kid", json!({})));
    assert_eq!(
        ignored(&wire.update("kid", announce("p", json!({})))),
        [IgnoredReason::InvalidSubagentUpdate]
    );
}

// ---------------------------------------------------------------- fanout's own agent

fn fanout_call(id: &str, child: &str) -> Value {
    json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": "subagent", "kind": "other", "status": "in_progress",
           "rawInput": {"description": "Explore the repo", "prompt": "List the crates", "subagent_type": "explorer", "mode": "spawn"},
           "content": [{"type": "session", "sessionId": child}],
           "_meta": {"fanout": {"subagent": {"childSessionId": child, "mode": "spawn", "subagentType": "explorer",
               "status": "running", "model": "replay"}}}})
}

#[test]
fn fanout_tool_call_is_the_row_and_owns_its_child() {
    let mut wire = Wire::new();
    let launch = one_tool(&wire.update("p", fanout_call("tc-1", "child-1")));
    assert_eq!(launch.dialect, Some(Dialect::Fanout));
    assert_eq!(task(&launch).child_session_id.as_deref(), Some("child-1"));
    assert_eq!(task(&launch).model.as_deref(), Some("replay"));
    assert_eq!(task(&launch).subagent_type, "explorer");
    // The native announcement of the same child updates that row: no second row.
    let announced = one_tool(&wire.update(
        "p",
        announce("child-1", json!({"state": {"state": "running"}})),
    ));
    assert_eq!(announced.tool_call_id, "tc-1");
    assert!(!announced.is_new);
    let child_traffic = one_tool(&wire.update(
        "child-1",
        json!({"sessionUpdate": "tool_call", "toolCallId": "tc-9", "title": "read_file"}),
    ));
    assert_eq!(child_traffic.acp_session_id, "p");
    assert_eq!(child_traffic.parent_tool_call_id.as_deref(), Some("tc-1"));
    let done = one_tool(&wire.update("p", json!({"sessionUpdate": "tool_call_update", "toolCallId": "tc-1", "status": "completed",
        "_meta": {"fanout": {"subagent": {"status": "idle", "totalTokens": 1234, "durationMs": 0, "toolUseCount": 0}}}})));
    let payload = task(&done);
    assert_eq!(payload.total_tokens, Some(1234));
    assert_eq!(payload.duration_ms, None);
    assert_eq!(payload.tool_use_count, Some(0));
    assert_eq!(payload.status.as_deref(), Some("idle"));
    let metadata = done.message_metadata();
    assert_eq!(metadata["normalized"]["subagent_task"]["tool_use_count"], 0);
    assert!(
        metadata["normalized"]["subagent_task"]
            .get("duration_ms")
            .is_none()
    );
}

#[test]
fn fanout_call_for_an_already_announced_child_enriches_that_row() {
    let mut wire = Wire::new();
    wire.update(
        "p",
        announce(
            "child-1",
            json!({"description": "Explore", "state": {"state": "running"}}),
        ),
    );
    let events = wire.update("p", fanout_call("tc-1", "child-1"));
    let frames = tools(&events);
    assert_eq!(frames.len(), 2, "{frames:#?}");
    assert_eq!(frames[0].tool_call_id, "tc-1");
    assert!(frames[0].subagent.is_none(), "not a second row");
    assert_eq!(frames[1].tool_call_id, "child-1");
    assert_eq!(task(&frames[1]).prompt, "List the crates");
    assert_eq!(task(&frames[1]).model.as_deref(), Some("replay"));
    assert_eq!(frames[1].tool_status.as_deref(), Some("in_progress"));
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
