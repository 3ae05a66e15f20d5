//! No input, however malformed, panics the tracker: arbitrary bytes, arbitrary JSON, and
//! real ACP frames with parts replaced by values of every type, in both directions and
//! in sequences (so the stateful paths are exercised with colliding ids).

use std::path::Path;

use fanout_acp::testing::{json_value, word};
use fanout_acp::{Direction, LineFramer, Tracker, TrackerEvent, classify};
use proptest::prelude::*;
use serde_json::Value;

/// Every JSON-RPC line of the example transcripts.
fn templates() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp-examples");
    let mut lines = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    for path in paths
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
    {
        let text = std::fs::read_to_string(path).unwrap();
        for record in text.lines().skip(1) {
            let record: Value = serde_json::from_str(record).unwrap();
            lines.push(serde_json::from_str(record["line"].as_str().unwrap()).unwrap());
        }
    }
    lines
}

/// Replaces the node reached by following `selectors` (child index modulo its size).
fn mutate(value: &mut Value, selectors: &[usize], replacement: Value) {
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

#[derive(Debug, Clone)]
enum Line {
    Bytes(Vec<u8>),
    Json(Value),
    Mutated {
        template: usize,
        edits: Vec<(Vec<usize>, Value)>,
    },
    /// A template with its ids and session ids swapped for colliding ones.
    Renamed {
        template: usize,
        session: String,
        tool_call_id: String,
    },
}

fn line() -> impl Strategy<Value = Line> {
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Line::Bytes),
        1 => json_value().prop_map(Line::Json),
        4 => (any::<usize>(), prop::collection::vec((prop::collection::vec(any::<usize>(), 0..6), json_value()), 1..4))
            .prop_map(|(template, edits)| Line::Mutated { template, edits }),
        2 => (any::<usize>(), prop::sample::select(&["s1", "c1", "child-native-1", "cx-1", ""][..]),
              prop::sample::select(&["t1", "call-spawn", "toolu_01REVIEW01", "spawn-1", ""][..]))
            .prop_map(|(template, session, id)| Line::Renamed { template, session: session.into(), tool_call_id: id.into() }),
    ]
}

fn render(line: &Line, templates: &[Value]) -> Vec<u8> {
    match line {
        Line::Bytes(bytes) => bytes.clone(),
        Line::Json(value) => value.to_string().into_bytes(),
        Line::Mutated { template, edits } => {
            let mut value = templates[template % templates.len()].clone();
            for (path, replacement) in edits {
                mutate(&mut value, path, replacement.clone());
            }
            value.to_string().into_bytes()
        }
        Line::Renamed {
            template,
            session,
            tool_call_id,
        } => {
            let mut value = templates[template % templates.len()].clone();
            rename(&mut value, session, tool_call_id);
            value.to_string().into_bytes()
        }
    }
}

fn rename(value: &mut Value, session: &str, tool_call_id: &str) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                match (key.as_str(), child.is_string()) {
                    ("sessionId" | "threadId" | "agentThreadId", true) => {
                        *child = Value::from(session)
                    }
                    ("toolCallId", true) => *child = Value::from(tool_call_id),
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

fn check(events: &[TrackerEvent]) {
    for event in events {
        if let TrackerEvent::Tool(frame) = event {
            // The metadata contract must always be buildable and shaped.
            let metadata = frame.message_metadata();
            assert!(metadata["normalized"]["kind"].is_string());
            if frame.subagent.is_some() {
                let task = &metadata["normalized"]["subagent_task"];
                assert_eq!(metadata["normalized"]["kind"], "subagent_task");
                for field in ["description", "prompt", "subagent_type"] {
                    assert!(task[field].is_string(), "{field}");
                }
                for metric in ["total_tokens", "duration_ms"] {
                    assert_ne!(task.get(metric), Some(&Value::from(0)), "{metric}");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES raises it for a longer local hunt.
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256), to_agent in any::<bool>()) {
        let direction = if to_agent { Direction::ClientToAgent } else { Direction::AgentToClient };
        let mut tracker = Tracker::new();
        check(&tracker.observe_bytes(direction, &bytes));
        let mut framer = LineFramer::new(64);
        for line in framer.push(&bytes) {
            if let fanout_acp::FramedLine::Line(line) = line {
                check(&tracker.observe_bytes(direction, &line));
            }
        }
        let _ = framer.finish();
    }

    #[test]
    fn arbitrary_json_never_panics(value in json_value()) {
        let text = value.to_string();
        let _ = classify(&text);
        let mut tracker = Tracker::new();
        check(&tracker.observe(Direction::AgentToClient, &text));
        check(&tracker.observe(Direction::ClientToAgent, &text));
    }

    #[test]
    fn json_rpc_shaped_values_with_wrong_types_never_panic(
        method in word(),
        id in json_value(),
        params in json_value(),
        result in json_value(),
        update in json_value(),
        session in json_value(),
    ) {
        let mut tracker = Tracker::new();
        let shapes = [
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            serde_json::json!({"jsonrpc": "2.0", "method": method, "params": params}),
            serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}),
            serde_json::json!({"jsonrpc": "2.0", "id": id, "error": result}),
            serde_json::json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}}),
            serde_json::json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "rawInput": update, "_meta": params, "rawOutput": result, "content": id}}}),
            serde_json::json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {"sessionUpdate": "subagent_update", "sessionId": session, "state": update, "description": result}}}),
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "cursor/task", "params": params}),
        ];
        for shape in shapes {
            let text = shape.to_string();
            check(&tracker.observe(Direction::AgentToClient, &text));
            check(&tracker.observe(Direction::ClientToAgent, &text));
        }
    }

    #[test]
    fn sequences_of_mutated_real_frames_never_panic(lines in prop::collection::vec((any::<bool>(), line()), 1..48)) {
        let templates = templates();
        let mut tracker = Tracker::new();
        for (to_agent, line) in &lines {
            let direction = if *to_agent { Direction::ClientToAgent } else { Direction::AgentToClient };
            check(&tracker.observe_bytes(direction, &render(line, &templates)));
        }
        // Each template replayed in its own direction afterwards still works.
        for template in &templates {
            check(&tracker.observe(Direction::AgentToClient, &template.to_string()));
        }
    }
}
