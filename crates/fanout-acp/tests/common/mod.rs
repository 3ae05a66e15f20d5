//! Shared test support: a wire that drives one tracker, and event filters.

#![allow(dead_code)]

use fanout_acp::{Direction, IgnoredReason, SubagentTask, ToolFrame, Tracker, TrackerEvent};
use serde_json::{Value, json};

pub const C2A: Direction = Direction::ClientToAgent;
pub const A2C: Direction = Direction::AgentToClient;

pub struct Wire {
    pub tracker: Tracker,
}

impl Wire {
    pub fn new() -> Self {
        Self {
            tracker: Tracker::new(),
        }
    }

    pub fn send(&mut self, direction: Direction, message: Value) -> Vec<TrackerEvent> {
        self.tracker.observe(direction, &message.to_string())
    }

    /// An agent-to-client `session/update`.
    pub fn update(&mut self, session: &str, update: Value) -> Vec<TrackerEvent> {
        self.send(
            A2C,
            json!({"jsonrpc": "2.0", "method": "session/update",
                   "params": {"sessionId": session, "update": update}}),
        )
    }

    /// `initialize`, answered by an agent naming itself `agent` in `agentInfo.name`.
    pub fn initialize(&mut self, agent: &str) {
        self.send(
            C2A,
            json!({"jsonrpc": "2.0", "id": 800, "method": "initialize",
                   "params": {"protocolVersion": 1, "clientCapabilities": {"subagents": {}}}}),
        );
        self.send(
            A2C,
            json!({"jsonrpc": "2.0", "id": 800, "result": {"protocolVersion": 1,
                   "agentInfo": {"name": agent, "version": "1"}}}),
        );
    }

    pub fn open(&mut self, session: &str) {
        self.send(
            C2A,
            json!({"jsonrpc": "2.0", "id": 900, "method": "session/new", "params": {"cwd": "/w"}}),
        );
        self.send(
            A2C,
            json!({"jsonrpc": "2.0", "id": 900, "result": {"sessionId": session}}),
        );
    }

    pub fn prompt(&mut self, session: &str, id: u64) -> Vec<TrackerEvent> {
        self.send(
            C2A,
            json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
                              "params": {"sessionId": session, "prompt": []}}),
        )
    }

    pub fn end_prompt(&mut self, id: u64) -> Vec<TrackerEvent> {
        self.send(
            A2C,
            json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}),
        )
    }
}

pub fn tools(events: &[TrackerEvent]) -> Vec<ToolFrame> {
    events
        .iter()
        .filter_map(|event| match event {
            TrackerEvent::Tool(frame) => Some((**frame).clone()),
            _ => None,
        })
        .collect()
}

pub fn one_tool(events: &[TrackerEvent]) -> ToolFrame {
    let frames = tools(events);
    assert_eq!(frames.len(), 1, "{events:#?}");
    frames.into_iter().next().unwrap()
}

pub fn ignored(events: &[TrackerEvent]) -> Vec<IgnoredReason> {
    events
        .iter()
        .filter_map(|event| match event {
            TrackerEvent::Ignored { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

pub fn task(frame: &ToolFrame) -> &SubagentTask {
    frame.subagent.as_ref().expect("subagent payload")
}

pub fn claude_agent(id: &str, raw_input: Value) -> Value {
    json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": "Task", "kind": "think",
           "status": "pending", "rawInput": raw_input, "_meta": {"claudeCode": {"toolName": "Agent"}}})
}

/// A `subagent_update` for `child` with `extra` fields.
pub fn announce(child: &str, extra: Value) -> Value {
    let mut update = json!({"sessionUpdate": "subagent_update", "sessionId": child});
    if let (Some(update), Some(extra)) = (update.as_object_mut(), extra.as_object()) {
        update.extend(extra.clone());
    }
    update
}

/// A `state` patch.
pub fn state(name: &str) -> Value {
    json!({"state": {"state": name}})
}

/// The subagent rows' frames only.
pub fn subagent_frames(events: &[TrackerEvent]) -> Vec<ToolFrame> {
    tools(events)
        .into_iter()
        .filter(|frame| frame.subagent.is_some())
        .collect()
}
