//! No line panics capture: arbitrary bytes, arbitrary JSON values, ACP-shaped frames with
//! arbitrary parts and every dialect's real frames (the example and real-agent
//! transcripts) with parts replaced, in both directions and in sequences, into a real
//! SQLite file. Whatever happens, the writer's counters keep the AC-26 invariant.

mod common;

use std::path::Path;
use std::sync::{Arc, OnceLock};

use fanout_acp::Direction;
use fanout_acp::testing::{WORDS, json_value, mutate, rename, transcript_templates};
use fanout_capture::{Capture, CaptureConfig};
use fanout_store::testing::TestDb;
use fanout_store::{Store, Timestamp};
use proptest::prelude::*;
use serde_json::{Value, json};

/// A `session/update` or response around an arbitrary body, so the deep paths run.
fn acp_shaped() -> impl Strategy<Value = Value> {
    (prop::sample::select(WORDS), json_value(), prop::sample::select(WORDS), any::<u8>()).prop_map(
        |(session, body, kind, id)| match id % 4 {
            0 => json!({"jsonrpc": "2.0", "method": "session/update",
                        "params": {"sessionId": session, "update": body}}),
            1 => json!({"jsonrpc": "2.0", "method": "session/update",
                        "params": {"sessionId": session, "update": {"sessionUpdate": kind, "toolCallId": "t1",
                                   "_meta": {"claudeCode": {"toolName": "Agent", "toolResponse": body}}}}}),
            2 => json!({"jsonrpc": "2.0", "id": id % 3, "method": kind, "params": body}),
            _ => json!({"jsonrpc": "2.0", "id": id % 3, "result": body}),
        },
    )
}

/// Every dialect's frames: the lines of the example and real-agent transcripts.
fn templates() -> &'static [Value] {
    static TEMPLATES: OnceLock<Vec<Value>> = OnceLock::new();
    TEMPLATES.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let examples = root.join("../fanout-acp/tests/acp-examples");
        let real = root.join("tests/fixtures/real");
        transcript_templates(&[&examples, &real], 8192)
    })
}

/// A template with one part replaced, or with its session and tool call ids swapped for
/// the opening's (`s1`, `t1`), so it lands on the fuzzed session's rows.
fn template_line() -> impl Strategy<Value = Value> {
    (
        any::<usize>(),
        prop::collection::vec(any::<usize>(), 0..5),
        json_value(),
        any::<bool>(),
    )
        .prop_map(|(index, path, replacement, renamed)| {
            let templates = templates();
            let mut value = templates[index % templates.len()].clone();
            if renamed {
                rename(&mut value, "s1", "t1");
            } else {
                mutate(&mut value, &path, replacement);
            }
            value
        })
}

fn line() -> impl Strategy<Value = (bool, Vec<u8>)> {
    let bytes = prop::collection::vec(any::<u8>(), 0..64);
    let json = prop_oneof![json_value(), acp_shaped(), template_line(), template_line()]
        .prop_map(|v| v.to_string().into_bytes());
    (any::<bool>(), prop_oneof![bytes, json.clone(), json])
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_line_panics_capture(lines in prop::collection::vec(line(), 1..24), with_task in any::<bool>()) {
        let rt = runtime();
        rt.block_on(async {
            let db = TestDb::sqlite();
            let store: Arc<dyn Store> = Arc::new(db.open().await.expect("open"));
            let mut capture = Capture::new(store, CaptureConfig {
                agent_execution_id: None,
                task_id: with_task.then(|| "fuzz".to_owned()),
                agent_command: None,
            });
            let start = Timestamp::parse("2026-08-10T09:00:00Z").expect("time");
            // A real opening first, so later random frames find a session and a turn.
            let opening: [(bool, &[u8]); 4] = [
                (true, br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/p"}}"#),
                (false, br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}"#),
                (true, br#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1"}}"#),
                (false, br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Task","status":"pending","_meta":{"claudeCode":{"toolName":"Agent"}}}}}"#),
            ];
            let all = opening.iter().map(|(c2a, l)| (*c2a, l.to_vec())).chain(lines);
            for (i, (client_to_agent, line)) in all.enumerate() {
                let direction = if client_to_agent { Direction::ClientToAgent } else { Direction::AgentToClient };
                capture.observe(direction, &line, start.plus_micros(i as i64)).await;
            }
            common::assert_invariant(&capture.counters().snapshot());
            let stats = capture.stats();
            assert!(stats.frames_seen >= 4);
        });
    }
}
