//! Loading a scenario's logs into scripts: ordering, fork seed boundaries, and
//! bad input reported as one clear `file:line` error.

use std::path::Path;

use fanout_replay::{ReplayBinding, ReplayError, ScenarioScripts};
use fanout_sessionlog::{
    Backend, Chunk, Event, Header, ModelStopReason, SessionLogWriter, Timestamp, Usage,
};

fn header(id: &str, backend: Backend, parent: Option<&str>, seed: Option<usize>) -> Header {
    match parent {
        Some(parent) => Header::child(id, "/w", parent, "call", backend, seed),
        None => Header::root(id, "/w"),
    }
}

fn response(text: &str) -> Vec<Event> {
    vec![
        Event::ModelRequest {
            ts: Timestamp::now(),
            ordinal: 0,
            model: "recorded".into(),
        },
        Event::AssistantChunk {
            ts: Timestamp::now(),
            chunk: Chunk::TextDelta { text: text.into() },
        },
        Event::AssistantChunk {
            ts: Timestamp::now(),
            chunk: Chunk::Stop {
                stop_reason: ModelStopReason::EndTurn,
                usage: Usage::default(),
            },
        },
    ]
}

fn texts(binding: &ReplayBinding, session: &str) -> String {
    let response = binding.next_response(Some(session)).unwrap();
    response
        .chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Writes logs into a sessions root, then copies them into scenario file names
/// in the given (scrambled) order, so ordering must come from `createdAt`.
fn scenario_from_root(root: &Path, dir: &Path, order: &[usize]) {
    let entries = fanout_sessionlog::list_logs(root).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    for (slot, index) in order.iter().enumerate() {
        let name = fanout_replay::session_file_name(slot);
        std::fs::copy(&entries[*index].path, dir.join(name)).unwrap();
    }
}

#[test]
fn fork_child_script_starts_at_its_seed_boundary_and_scripts_follow_created_at() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let mut parent =
        SessionLogWriter::create(&root, &header("parent", Backend::Root, None, None)).unwrap();
    let mut parent_events = vec![Event::UserMessage {
        ts: Timestamp::now(),
        text: "go".into(),
    }];
    parent_events.extend(response("parent answer"));
    for event in &parent_events {
        parent.append(event).unwrap();
    }
    let mut spawn = SessionLogWriter::create(
        &root,
        &header("spawned", Backend::Spawn, Some("parent"), None),
    )
    .unwrap();
    for event in response("spawn answer") {
        spawn.append(&event).unwrap();
    }
    // The fork child's log starts with the parent's history, parent's
    // response included: replaying it as the child's would be wrong.
    let prefix = parent_events.clone();
    let mut fork = SessionLogWriter::create_fork(
        &root,
        &header("forked", Backend::Fork, Some("parent"), Some(prefix.len())),
        &prefix,
    )
    .unwrap();
    for event in response("fork answer") {
        fork.append(&event).unwrap();
    }

    let dir = tmp.path().join("scenario");
    // Listed primary-first is [parent, spawned, forked]; scramble the files.
    scenario_from_root(&root, &dir, &[2, 0, 1]);
    let scripts = ScenarioScripts::load(&dir).unwrap();
    let ids: Vec<&str> = scripts
        .scripts()
        .iter()
        .map(|s| s.recorded_id.as_str())
        .collect();
    assert_eq!(ids, ["parent", "spawned", "forked"]);
    assert_eq!(scripts.scripts()[2].responses.len(), 1);
    assert_eq!(scripts.recorded_model(), Some("recorded"));

    let binding = ReplayBinding::new(scripts);
    assert_eq!(texts(&binding, "live-parent"), "parent answer");
    assert_eq!(texts(&binding, "live-spawn"), "spawn answer");
    assert_eq!(texts(&binding, "live-fork"), "fork answer");

    // A sessions root replays the same way.
    let from_root = ScenarioScripts::load(&root).unwrap();
    assert_eq!(from_root.len(), 3);
}

fn load_error(files: &[(&str, &str)]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(tmp.path().join(name), text).unwrap();
    }
    let err = ScenarioScripts::load(tmp.path()).unwrap_err();
    // Reported relative to the directory, so the message is stable.
    err.to_string()
        .replace(&tmp.path().display().to_string(), "DIR")
}

const HEADER: &str = r#"{"type":"header","version":1,"id":"p","createdAt":"2025-08-03T15:32:20.000000Z","backend":"root","cwd":"/w"}"#;

#[test]
fn bad_logs_are_one_clear_error_naming_file_and_line() {
    let request =
        r#"{"type":"model/request","ts":"2025-08-03T15:32:20.000001Z","ordinal":0,"model":"m"}"#;
    let cases = [
        (
            vec![(
                "session.jsonl",
                format!("{HEADER}\n{request}\n{{\"type\":\"assistant/chunk\"\n"),
            )],
            "DIR/session.jsonl:3: not valid JSON",
        ),
        (
            vec![(
                "session.jsonl",
                r#"{"type":"header","version":1,"id":"p","backend":"root","cwd":"/w"}"#.to_string(),
            )],
            "DIR/session.jsonl:1: invalid header: missing field `createdAt`",
        ),
        (
            vec![
                ("session.jsonl", format!("{HEADER}\n")),
                ("session.1.jsonl", format!("{HEADER}\n")),
            ],
            "DIR/session.1.jsonl: session p is also recorded in DIR/session.jsonl",
        ),
        (
            vec![("notes.txt", String::new())],
            "DIR: no session logs to replay",
        ),
        (
            vec![("session.jsonl", String::new())],
            "DIR/session.jsonl:1: empty file",
        ),
    ];
    for (files, want) in cases {
        let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
        let got = load_error(&files);
        assert!(got.starts_with(want), "{got}\n  should start with\n{want}");
    }
    let missing = ScenarioScripts::load(Path::new("/nonexistent/scenario")).unwrap_err();
    assert!(matches!(missing, ReplayError::Io { .. }));
    assert!(
        missing.to_string().starts_with("/nonexistent/scenario: "),
        "{missing}"
    );
}
