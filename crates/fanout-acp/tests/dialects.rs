//! The dialects of today's agents at the tracker (Qwen Code, Gemini CLI, Copilot CLI,
//! Claude's hand-back without the subagents capability), and the rule that the agent's
//! `agentInfo.name` decides where one shape means different things for two agents.

mod common;

use common::*;
use fanout_acp::{Dialect, FrameOrigin, IgnoredReason, TrackerEvent};
use serde_json::{Value, json};

fn qwen_launch(id: &str, meta: Value) -> Value {
    json!({"sessionUpdate": "tool_call", "toolCallId": id, "status": "pending", "title": "Agent",
           "content": [], "kind": "other", "rawInput": {}, "_meta": meta})
}

#[test]
fn qwen_launch_inputs_result_and_child_traffic() {
    let mut wire = Wire::new();
    wire.initialize("qwen-code");
    wire.open("s");
    wire.prompt("s", 2);
    let launch = one_tool(&wire.update("s", qwen_launch("call_1", json!({"toolName": "agent"}))));
    assert_eq!(launch.dialect.map(Dialect::name), Some("qwen"));
    assert_eq!(launch.tool_status.as_deref(), Some("pending"));
    wire.update("s", json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_1",
        "status": "in_progress", "title": "Agent: Read hello.txt", "rawInput": {"description": "Read hello.txt",
        "prompt": "p", "subagent_type": "general-purpose", "run_in_background": false}}));
    let child = one_tool(&wire.update("s", json!({"sessionUpdate": "tool_call", "toolCallId": "call_a_read_1",
        "title": "ReadFile", "kind": "read", "_meta": {"toolName": "read_file", "parentToolCallId": "call_1"}})));
    assert_eq!(child.parent_tool_call_id.as_deref(), Some("call_1"));
    assert!(child.subagent.is_none());
    let chunk = wire.update(
        "s",
        json!({"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": ""}, "_meta": {"usage": {"inputTokens": 102,
        "outputTokens": 12}, "parentToolCallId": "call_1", "subagentType": "general-purpose"}}),
    );
    assert_eq!(
        chunk,
        vec![TrackerEvent::SessionUpdate {
            acp_session_id: "s".into(),
            wire_session_id: "s".into(),
            update_kind: "agent_message_chunk".into(),
            parent_tool_call_id: Some("call_1".into()),
            usage: Some(json!({"inputTokens": 102, "outputTokens": 12})),
        }],
        "a child's chunk names its caller and usage, never a row"
    );
    let done = one_tool(&wire.update("s", json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_1",
        "status": "completed", "rawOutput": {"type": "task_execution", "subagentName": "general-purpose",
        "executionMode": "foreground", "status": "failed", "tokenCount": 25,
        "executionSummary": {"totalDurationMs": 1813, "totalToolCalls": 1, "totalTokens": 230}}})));
    let payload = task(&done);
    assert_eq!(
        done.tool_status.as_deref(),
        Some("completed"),
        "ACP says completed"
    );
    assert_eq!(
        payload.status.as_deref(),
        Some("failed"),
        "the agent status says failed"
    );
    assert_eq!(payload.description, "Read hello.txt");
    assert_eq!(
        (
            payload.total_tokens,
            payload.duration_ms,
            payload.tool_use_count
        ),
        (Some(230), Some(1813), Some(1))
    );
}

#[test]
fn qwen_nested_launch_and_background_end() {
    let mut wire = Wire::new();
    wire.initialize("qwen-code");
    wire.update("s", qwen_launch("call_1", json!({"toolName": "agent"})));
    let nested = one_tool(&wire.update(
        "s",
        qwen_launch(
            "call_nested",
            json!({"toolName": "agent",
        "provenance": "subagent", "parentToolCallId": "call_1"}),
        ),
    ));
    assert_eq!(nested.parent_tool_call_id.as_deref(), Some("call_1"));
    assert!(nested.subagent.is_some());
    let background = one_tool(&wire.update("s", json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_1",
        "status": "completed", "rawOutput": {"type": "task_execution", "executionMode": "background", "status": "background"}})));
    assert!(task(&background).is_async);
    let end = json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done"},
        "_meta": {"backgroundTask": {"taskId": "general-purpose-call_1", "status": "completed", "toolUseId": "call_1"}}});
    let events = wire.update("s", end.clone());
    let frames = tools(&events);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].tool_call_id, "call_1");
    assert_eq!(frames[0].origin, FrameOrigin::RowSignal);
    assert_eq!(task(&frames[0]).status.as_deref(), Some("completed"));
    assert_eq!(frames[0].tool_status, None);
    assert!(
        tools(&wire.update("s", end)).is_empty(),
        "a repeat changes nothing"
    );
    // A backgroundTask naming no known call: counted, no row.
    let unknown = wire.update(
        "s",
        json!({"sessionUpdate": "agent_message_chunk",
        "_meta": {"backgroundTask": {"status": "completed", "toolUseId": "call_404"}}}),
    );
    assert!(tools(&unknown).is_empty());
    assert_eq!(ignored(&unknown), [IgnoredReason::SignalForUnknownRow]);
    assert_eq!(wire.tracker.stats().anomalies, 1);
}

#[test]
fn gemini_lone_denied_update_is_a_launch_attempt() {
    for agent in [Some("gemini-cli"), None] {
        let mut wire = Wire::new();
        if let Some(agent) = agent {
            wire.initialize(agent);
        }
        let denied = one_tool(&wire.update("s", json!({"sessionUpdate": "tool_call_update",
            "toolCallId": "invoke_agent__gemini_invoke_1", "status": "failed", "kind": "think",
            "content": [{"type": "content", "content": {"type": "text", "text": "denied by policy."}}]})));
        assert_eq!(
            denied.dialect.map(Dialect::name),
            Some("gemini"),
            "{agent:?}"
        );
        assert!(denied.is_new);
        assert_eq!(denied.tool_status.as_deref(), Some("failed"));
        assert_eq!(task(&denied).subagent_type, "");
        let launch = one_tool(&wire.update(
            "s",
            json!({"sessionUpdate": "tool_call",
            "toolCallId": "invoke_agent__gemini_invoke_2", "status": "in_progress",
            "title": "Delegating to agent 'codebase_investigator'", "kind": "think"}),
        ));
        assert_eq!(task(&launch).subagent_type, "codebase_investigator");
        // An update of a known plain call is never a launch.
        wire.update(
            "s",
            json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ReadFile"}),
        );
        let plain = one_tool(&wire.update(
            "s",
            json!({"sessionUpdate": "tool_call_update",
            "toolCallId": "t1", "title": "Delegating to agent 'x'"}),
        ));
        assert!(plain.subagent.is_none());
    }
}

fn copilot_task(id: &str, title: &str, mode: Option<&str>) -> Value {
    let mut raw = json!({"description": "Read hello.txt", "prompt": "FANOUT-CHILD-A: read it",
        "agent_type": "general-purpose", "name": "reader-a"});
    if let Some(mode) = mode {
        raw["mode"] = json!(mode);
    }
    json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": title, "kind": "other",
           "status": "pending", "rawInput": raw})
}

/// Copilot's subagent tool is named `task`: a launch titled `task` is Copilot's, with or
/// without the agent's name, and never OpenCode's.
#[test]
fn a_copilot_task_is_not_opencode_s_with_or_without_agent_info() {
    for agent in [Some("Copilot"), None] {
        let mut wire = Wire::new();
        if let Some(agent) = agent {
            wire.initialize(agent);
        }
        let launch = one_tool(&wire.update("s", copilot_task("call_1", "task", None)));
        assert_eq!(
            launch.dialect.map(Dialect::name),
            Some("copilot"),
            "{agent:?}"
        );
        assert_eq!(task(&launch).subagent_type, "general-purpose");
        assert_eq!(task(&launch).description, "Read hello.txt");
        let background =
            one_tool(&wire.update("s", copilot_task("call_2", "Read", Some("background"))));
        assert!(task(&background).is_async);
        let done = one_tool(&wire.update("s", json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_1",
            "status": "completed", "rawOutput": {"content": "hello.txt says: hi", "detailedContent": "…"}})));
        assert_eq!(
            task(&done).result_text.as_deref(),
            Some("hello.txt says: hi")
        );
    }
    // With the agent's name, a bare `task` title from Copilot is nobody's launch; from an
    // agent fanout does not know, it is OpenCode's (the shape rule).
    let mut copilot = Wire::new();
    copilot.initialize("Copilot");
    let bare =
        json!({"sessionUpdate": "tool_call", "toolCallId": "t", "title": "task", "rawInput": {}});
    assert!(
        one_tool(&copilot.update("s", bare.clone()))
            .subagent
            .is_none()
    );
    let mut unknown = Wire::new();
    unknown.initialize("some-agent");
    assert_eq!(
        one_tool(&unknown.update("s", bare))
            .dialect
            .map(Dialect::name),
        Some("opencode")
    );
    // Copilot's own `read_agent` call when a background agent ends is not a launch.
    let read_agent = one_tool(&copilot.update(
        "s",
        json!({"sessionUpdate": "tool_call",
        "toolCallId": "u1", "title": "Read agent", "rawInput": {"agent_id": "a", "since_turn": 1}}),
    ));
    assert!(read_agent.subagent.is_none());
}

#[test]
fn agent_info_keeps_each_shape_with_its_own_agent() {
    // Qwen's `_meta.toolName: "agent"` from Claude is no launch of either.
    let mut claude = Wire::new();
    claude.initialize("@zed-industries/claude-agent-acp");
    let qwen_shape = qwen_launch("c", json!({"toolName": "agent"}));
    assert!(
        one_tool(&claude.update("s", qwen_shape.clone()))
            .subagent
            .is_none()
    );
    let mut unknown = Wire::new();
    assert_eq!(
        one_tool(&unknown.update("s", qwen_shape))
            .dialect
            .map(Dialect::name),
        Some("qwen")
    );
    // An Auggie-shaped title from Gemini is nothing; OpenCode's `task` from Qwen neither.
    let mut gemini = Wire::new();
    gemini.initialize("gemini-cli");
    let auggie = json!({"sessionUpdate": "tool_call", "toolCallId": "g", "title": "sub-agent-explore: find it"});
    assert!(one_tool(&gemini.update("s", auggie)).subagent.is_none());
    let mut qwen = Wire::new();
    qwen.initialize("qwen-code");
    let title_task = json!({"sessionUpdate": "tool_call", "toolCallId": "q", "title": "task"});
    assert!(one_tool(&qwen.update("s", title_task)).subagent.is_none());
    assert_eq!(
        qwen.tracker.agent_dialect().map(Dialect::name),
        Some("qwen")
    );
    assert_eq!(unknown.tracker.agent_dialect(), None);
}

fn claude_background(id: &str, agent_id: &str) -> [Value; 2] {
    [
        claude_agent(
            id,
            json!({"description": "Read hello.txt", "prompt": "p",
            "subagent_type": "general-purpose", "run_in_background": true}),
        ),
        json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "_meta": {"claudeCode": {
            "toolName": "Agent", "toolResponse": {"status": "async_launched", "agentId": agent_id, "isAsync": true}}}}),
    ]
}

fn peer_handback(from: &str) -> Value {
    json!({"sessionUpdate": "usage_update", "used": 14453, "size": 1000000,
           "_meta": {"_claude/origin": {"kind": "peer", "from": from, "senderTaskId": from,
                     "name": "general-purpose", "handback": true}}})
}

#[test]
fn claude_peer_hand_back_completes_the_background_row_only() {
    let mut wire = Wire::new();
    wire.initialize("@agentclientprotocol/claude-agent-acp");
    wire.open("s");
    for update in claude_background("toolu_A", "agent-a") {
        wire.update("s", update);
    }
    let events = wire.update("s", peer_handback("agent-a"));
    let frame = one_tool(&events);
    assert_eq!(frame.tool_call_id, "toolu_A");
    assert_eq!(frame.origin, FrameOrigin::RowSignal);
    assert_eq!(task(&frame).status.as_deref(), Some("completed"));
    assert!(!frame.is_new);
    // A hand-back naming no known agent: counted, no row.
    let unknown = wire.update("s", peer_handback("agent-404"));
    assert!(tools(&unknown).is_empty());
    assert_eq!(ignored(&unknown), [IgnoredReason::SignalForUnknownRow]);
    // Other origins say nothing about rows.
    let human = wire.update(
        "s",
        json!({"sessionUpdate": "usage_update", "used": 1,
        "_meta": {"_claude/origin": {"kind": "human"}}}),
    );
    assert!(tools(&human).is_empty() && ignored(&human).is_empty());
}

/// With the subagents capability the same hand-back names a child session, whose work
/// cycle reports its end itself: the row stays as the cycle left it, nothing is counted.
#[test]
fn claude_peer_hand_back_for_a_child_session_changes_nothing() {
    let mut wire = Wire::new();
    wire.initialize("@agentclientprotocol/claude-agent-acp");
    wire.open("s");
    wire.update(
        "s",
        announce(
            "a1",
            json!({"title": "T", "description": "general-purpose",
        "state": {"state": "running"}}),
        ),
    );
    wire.update(
        "s",
        announce(
            "a1",
            json!({"state": {"state": "idle", "stopReason": "end_turn"}}),
        ),
    );
    let events = wire.update("s", peer_handback("a1"));
    assert!(tools(&events).is_empty());
    assert!(ignored(&events).is_empty());
}
