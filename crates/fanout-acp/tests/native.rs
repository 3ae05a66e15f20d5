//! ACP subagent sessions (DESIGN 3.6) and fanout's own agent at the tracker: child
//! sessions, work cycles, session links, hand-backs, and the negative cases.

mod common;

use common::*;
use fanout_acp::{Dialect, FrameOrigin, IgnoredReason, TrackerEvent};
use serde_json::{Value, json};

// ---------------------------------------------------------------- ACP native

/// A `subagent_update` announcing (or patching) `child`.
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
    assert_eq!(row.dialect.map(Dialect::name), Some("acp-native"));
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
    assert_eq!(launch.dialect.map(Dialect::name), Some("fanout"));
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

// ---------------------------------------------------------------- work cycles (DESIGN 3.6)

#[test]
fn each_work_cycle_is_a_row_and_idle_settles_it() {
    let mut wire = Wire::new();
    wire.open("p");
    let first = one_tool(&wire.update(
        "p",
        announce(
            "kid",
            json!({"description": "Reviews", "state": {"state": "running"}}),
        ),
    ));
    assert_eq!((first.tool_call_id.as_str(), first.is_new), ("kid", true));
    let blocked = one_tool(&wire.update("p", announce("kid", state("requires_action"))));
    assert_eq!(task(&blocked).status.as_deref(), Some("requires_action"));
    assert_eq!(blocked.tool_status, None, "requires_action is not terminal");
    let running = one_tool(&wire.update("p", announce("kid", state("running"))));
    assert_eq!(
        running.tool_call_id, "kid",
        "running after requires_action: same cycle"
    );
    let idle = one_tool(&wire.update(
        "p",
        announce(
            "kid",
            json!({"state": {"state": "idle", "stopReason": "end_turn"}}),
        ),
    ));
    assert_eq!(idle.tool_status.as_deref(), Some("completed"));
    assert_eq!(idle.last_tool_status.as_deref(), Some("completed"));
    assert_eq!(task(&idle).status.as_deref(), Some("idle"));
    // The parent messages the idle child again: a second cycle, a second row.
    let second = one_tool(&wire.update("p", announce("kid", state("running"))));
    assert_eq!(second.tool_call_id, "kid#2");
    assert!(second.is_new);
    assert_eq!(task(&second).child_session_id.as_deref(), Some("kid"));
    assert_eq!(
        task(&second).description,
        "Reviews",
        "metadata carries over"
    );
    assert_eq!(second.last_tool_status, None);
    let child_call = one_tool(&wire.update(
        "kid",
        json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "read"}),
    ));
    assert_eq!(child_call.parent_tool_call_id.as_deref(), Some("kid#2"));
    let cancelled = one_tool(&wire.update(
        "p",
        announce(
            "kid",
            json!({"state": {"state": "idle", "stopReason": "cancelled"}}),
        ),
    ));
    assert_eq!(cancelled.tool_call_id, "kid#2");
    assert_eq!(cancelled.tool_status.as_deref(), Some("cancelled"));
    let third = one_tool(&wire.update("p", announce("kid", state("running"))));
    assert_eq!(third.tool_call_id, "kid#3");
    // An errored stop still ends the work: completed.
    let errored = one_tool(&wire.update(
        "p",
        announce(
            "kid",
            json!({"state": {"state": "idle", "stopReason": "error",
            "error": {"code": -32603, "message": "API error"}}}),
        ),
    ));
    assert_eq!(errored.tool_status.as_deref(), Some("completed"));
}

#[test]
fn unknown_and_extension_states_are_verbatim_and_never_settle() {
    let mut wire = Wire::new();
    wire.update("p", announce("kid", json!({"title": "T"})));
    for name in ["unknown", "_vendor_paused"] {
        let frame = one_tool(&wire.update("p", announce("kid", state(name))));
        assert_eq!(task(&frame).status.as_deref(), Some(name));
        assert_eq!(frame.last_tool_status, None);
    }
    // `null` clears the activity without asserting anything: the status stays.
    let cleared = wire.update("p", announce("kid", json!({"state": null})));
    assert!(tools(&cleared).is_empty());
}

#[test]
fn patch_semantics_absent_unchanged_null_clears_value_replaces() {
    let mut wire = Wire::new();
    let row = one_tool(&wire.update(
        "p",
        announce(
            "kid",
            json!({"title": "Reviewer", "description": "Reviews the diff"}),
        ),
    ));
    assert_eq!(task(&row).description, "Reviews the diff");
    assert_eq!(
        row.title.as_deref(),
        Some("Reviewer"),
        "the message's title"
    );
    let unchanged = one_tool(&wire.update("p", announce("kid", json!({"title": "Other"}))));
    assert_eq!(
        task(&unchanged).description,
        "Reviews the diff",
        "description wins"
    );
    let cleared = one_tool(&wire.update("p", announce("kid", json!({"description": null}))));
    assert_eq!(
        task(&cleared).description,
        "Other",
        "title, when no description"
    );
    let replaced = one_tool(&wire.update("p", announce("kid", json!({"description": "New"}))));
    assert_eq!(task(&replaced).description, "New");
}

#[test]
fn the_august_draft_names_mean_the_same() {
    let mut wire = Wire::new();
    let spawned = one_tool(&wire.update(
        "p",
        json!({"sessionUpdate": "subagent_spawned", "subagentSessionId": "kid",
               "name": "Reviewer", "task": "Review the diff"}),
    ));
    assert_eq!(spawned.tool_call_id, "kid");
    assert_eq!(spawned.dialect.map(Dialect::name), Some("acp-native"));
    assert_eq!(task(&spawned).description, "Review the diff");
    let idle = one_tool(&wire.update(
        "p",
        json!({"sessionUpdate": "subagent_state_update", "subagentSessionId": "kid",
               "state": {"state": "idle", "stopReason": "end_turn"}}),
    ));
    assert_eq!(idle.tool_status.as_deref(), Some("completed"));
    let again = one_tool(&wire.update(
        "p",
        json!({"sessionUpdate": "subagent_state_update", "subagentSessionId": "kid", "state": "running"}),
    ));
    assert_eq!(again.tool_call_id, "kid#2");
}

/// claude-agent-acp: `title` is the call's description, `description` the type, the
/// child id Claude's agentId; the child's tool calls still name the hidden Agent call.
#[test]
fn claude_fields_and_child_traffic_under_the_child_row() {
    let mut wire = Wire::new();
    wire.initialize("@agentclientprotocol/claude-agent-acp");
    wire.open("p");
    let row = one_tool(&wire.update(
        "p",
        announce(
            "a1",
            json!({"title": "Read hello.txt", "description": "general-purpose",
            "capabilities": {"cancel": {}}, "state": {"state": "running"}}),
        ),
    ));
    let payload = task(&row);
    assert_eq!(payload.description, "Read hello.txt");
    assert_eq!(payload.subagent_type, "general-purpose");
    assert_eq!(payload.agent_id.as_deref(), Some("a1"));
    let read = one_tool(&wire.update(
        "a1",
        json!({"sessionUpdate": "tool_call", "toolCallId": "toolu_READ", "title": "Read",
               "_meta": {"claudeCode": {"toolName": "Read", "parentToolUseId": "toolu_HIDDEN"}}}),
    ));
    assert_eq!(read.parent_tool_call_id.as_deref(), Some("a1"));
    assert!(read.subagent.is_none());
}

#[test]
fn codex_maps_only_the_description() {
    let mut wire = Wire::new();
    wire.initialize("@agentclientprotocol/codex-acp");
    let row = one_tool(&wire.update("p", announce("t", json!({"title": "Read hello"}))));
    assert_eq!(task(&row).description, "");
    let row = one_tool(&wire.update("p", announce("t", json!({"description": "FANOUT task"}))));
    assert_eq!(task(&row).description, "FANOUT task");
}

#[test]
fn nesting_follows_the_session_the_update_arrived_on_per_cycle() {
    let mut wire = Wire::new();
    wire.open("p");
    wire.update(
        "p",
        announce("a", json!({"title": "A", "state": {"state": "running"}})),
    );
    let nested = one_tool(&wire.update(
        "a",
        announce("n", json!({"title": "N", "state": {"state": "running"}})),
    ));
    assert_eq!(nested.parent_tool_call_id.as_deref(), Some("a"));
    wire.update(
        "a",
        announce(
            "n",
            json!({"state": {"state": "idle", "stopReason": "end_turn"}}),
        ),
    );
    wire.update(
        "p",
        announce(
            "a",
            json!({"state": {"state": "idle", "stopReason": "end_turn"}}),
        ),
    );
    wire.update("p", announce("a", state("running")));
    let again = one_tool(&wire.update("a", announce("n", state("running"))));
    assert_eq!(again.tool_call_id, "n#2");
    assert_eq!(
        again.parent_tool_call_id.as_deref(),
        Some("a#2"),
        "A's current row"
    );
    assert_eq!(again.acp_session_id, "p");
}

fn message(id: &str, from: &str, to: &str, text: &str) -> Value {
    json!({"sessionUpdate": "session_message", "messageId": id, "senderSessionId": from,
           "recipientSessionId": to, "content": [{"type": "text", "text": text}]})
}

#[test]
fn the_last_hand_back_of_a_cycle_is_its_result_text() {
    let mut wire = Wire::new();
    wire.open("p");
    wire.update(
        "p",
        announce("kid", json!({"title": "T", "state": {"state": "running"}})),
    );
    // The prompt to the child, once under each session: not a hand-back.
    assert!(tools(&wire.update("p", message("m0", "p", "kid", "do it"))).is_empty());
    assert!(tools(&wire.update("kid", message("m0", "p", "kid", "do it"))).is_empty());
    let handed = one_tool(&wire.update("kid", message("m1", "kid", "p", "first report")));
    assert_eq!(handed.origin, FrameOrigin::SessionMessage);
    assert_eq!(task(&handed).result_text.as_deref(), Some("first report"));
    assert_eq!(handed.tool_status, None);
    // Its copy under the parent's id is the same message: nothing new.
    assert!(tools(&wire.update("p", message("m1", "kid", "p", "first report"))).is_empty());
    let chunk = one_tool(&wire.update(
        "p",
        json!({"sessionUpdate": "session_message_chunk", "messageId": "m1",
               "content": {"type": "text", "text": ", continued"}}),
    ));
    assert_eq!(
        task(&chunk).result_text.as_deref(),
        Some("first report, continued")
    );
    let last = one_tool(&wire.update("kid", message("m2", "kid", "p", "final report")));
    assert_eq!(task(&last).result_text.as_deref(), Some("final report"));
    // Its metadata carries it; the row never does (structure, not content).
    assert_eq!(
        last.message_metadata()["normalized"]["subagent_task"]["result_text"],
        "final report"
    );
}

// ---------------------------------------------------------------- bad input

#[test]
fn a_lone_state_for_a_child_never_announced_is_an_anomaly_not_a_row() {
    let mut wire = Wire::new();
    wire.open("p");
    let events = wire.update("p", announce("ghost", state("idle")));
    assert!(tools(&events).is_empty());
    assert_eq!(
        ignored(&events),
        [IgnoredReason::SubagentStateForUnknownChild]
    );
    assert!(IgnoredReason::SubagentStateForUnknownChild.is_anomaly());
    let draft = wire.update(
        "p",
        json!({"sessionUpdate": "subagent_state_update", "subagentSessionId": "ghost", "state": "running"}),
    );
    assert!(tools(&draft).is_empty());
    assert_eq!(wire.tracker.stats().anomalies, 2);
}

#[test]
fn idle_twice_is_an_anomaly_and_invents_nothing() {
    let mut wire = Wire::new();
    wire.update(
        "p",
        announce("kid", json!({"title": "T", "state": {"state": "running"}})),
    );
    wire.update(
        "p",
        announce(
            "kid",
            json!({"state": {"state": "idle", "stopReason": "end_turn"}}),
        ),
    );
    let events = wire.update(
        "p",
        announce(
            "kid",
            json!({"state": {"state": "idle", "stopReason": "cancelled"}}),
        ),
    );
    assert!(
        tools(&events).is_empty(),
        "no second settlement, no new row"
    );
    assert_eq!(ignored(&events), [IgnoredReason::IdleOutsideCycle]);
    assert_eq!(wire.tracker.stats().anomalies, 1);
    // Idle at the announcement ends cycle 1 at once; the next running is cycle 2.
    let at_once = one_tool(&wire.update(
        "p",
        announce(
            "quick",
            json!({"title": "Q", "state": {"state": "idle", "stopReason": "end_turn"}}),
        ),
    ));
    assert_eq!(at_once.tool_status.as_deref(), Some("completed"));
    assert_eq!(
        one_tool(&wire.update("p", announce("quick", state("running")))).tool_call_id,
        "quick#2"
    );
}

#[test]
fn a_hand_back_from_a_session_never_announced_is_counted_once() {
    let mut wire = Wire::new();
    wire.open("p");
    wire.update("p", announce("kid", json!({"title": "T"})));
    let events = wire.update("p", message("m9", "stranger", "p", "report"));
    assert!(tools(&events).is_empty());
    assert_eq!(
        ignored(&events),
        [IgnoredReason::HandbackFromUnknownSession]
    );
    let again = wire.update("p", message("m9", "stranger", "p", "report"));
    assert!(ignored(&again).is_empty(), "the same message counts once");
    assert_eq!(wire.tracker.stats().anomalies, 1);
    // A message without an id passes over.
    let malformed = wire.update(
        "p",
        json!({"sessionUpdate": "session_message", "content": []}),
    );
    assert!(tools(&malformed).is_empty() && ignored(&malformed).is_empty());
}
