//! No input, however malformed, panics the tracker: arbitrary bytes, arbitrary JSON, and
//! real ACP frames with parts replaced by values of every type, in both directions and
//! in sequences (so the stateful paths are exercised with colliding ids).

use std::path::Path;

use std::collections::HashSet;
use std::sync::OnceLock;

use fanout_acp::testing::{json_value, mutate, rename, transcript_templates, word};
use fanout_acp::{Dialect, Direction, LineFramer, Tracker, TrackerEvent, classify};
use proptest::prelude::*;
use serde_json::Value;

/// Every JSON-RPC line of the example transcripts and of the transcripts recorded from
/// real agents (every dialect's shapes), read once.
fn templates() -> &'static [Value] {
    static TEMPLATES: OnceLock<Vec<Value>> = OnceLock::new();
    TEMPLATES.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let examples = root.join("tests/acp-examples");
        let real = root.join("../fanout-capture/tests/fixtures/real");
        transcript_templates(&[&examples, &real], 8192)
    })
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
        2 => (any::<usize>(), prop::sample::select(&["s1", "c1", "child-native-1", "cx-1", "a7f3c2d1e0b4a5c6", "qw-1", ""][..]),
              prop::sample::select(&["t1", "call-spawn", "toolu_01REVIEW01", "spawn-1", "call_bg", "invoke_agent__call_2", ""][..]))
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

/// The templates hold every registered dialect's frames (and ACP's subagent sessions'):
/// replayed file by file (so each agent's `initialize` names it), they recognise a row of
/// each.
#[test]
fn the_templates_reach_every_dialect() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seen = HashSet::new();
    for dir in [
        root.join("tests/acp-examples"),
        root.join("../fanout-capture/tests/fixtures/real"),
    ] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|ext| ext != "jsonl") {
                continue;
            }
            let mut tracker = Tracker::new();
            let text = std::fs::read_to_string(&path).unwrap();
            for record in text.lines().skip(1) {
                let record: Value = serde_json::from_str(record).unwrap();
                let direction = Direction::from_tag(record["dir"].as_str().unwrap()).unwrap();
                for event in tracker.observe(direction, record["line"].as_str().unwrap()) {
                    if let TrackerEvent::Tool(frame) = event {
                        seen.extend(frame.dialect);
                    }
                }
            }
        }
    }
    for dialect in Dialect::registered().chain([Dialect::ACP_NATIVE]) {
        assert!(seen.contains(&dialect), "{dialect:?}");
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
        // Half the runs speak as a named agent, so each dialect's own rules run alone too.
        if let Some(Line::Renamed { template, .. }) = lines.first().map(|(_, line)| line)
            && template % 2 == 0
        {
            let agents: Vec<&str> = Dialect::registered().flat_map(Dialect::agent_names).copied().collect();
            let name = agents[(template / 2) % agents.len()];
            tracker.observe(Direction::ClientToAgent, r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{}}"#);
            tracker.observe(Direction::AgentToClient, &format!(r#"{{"jsonrpc":"2.0","id":"init","result":{{"agentInfo":{{"name":"{name}"}}}}}}"#));
        }
        for (to_agent, line) in &lines {
            let direction = if *to_agent { Direction::ClientToAgent } else { Direction::AgentToClient };
            check(&tracker.observe_bytes(direction, &render(line, templates)));
        }
        // The templates this run used, replayed unmutated afterwards, still work.
        for line in lines.iter().map(|(_, line)| line) {
            if let Line::Mutated { template, .. } | Line::Renamed { template, .. } = line {
                let template = &templates[template % templates.len()];
                check(&tracker.observe(Direction::AgentToClient, &template.to_string()));
            }
        }
    }
}
