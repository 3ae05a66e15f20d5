//! A Claude Code native session folder, composed from the documented shapes, imports
//! to the right rows on both engines, and importing it again changes nothing.

mod common;

use std::path::Path;

use common::{as_store, at, count, dump_all, open};
use fanout_capture::import::{NoProgress, SourceKind, import_paths};
use fanout_capture::{message_row_id, session_row_id, turn_row_id};
use fanout_store::both_engines;
use fanout_store::testing::TestDb;
use serde_json::{Value, json};

const SESSION: &str = "5b1c7e2a-0000-4000-8000-00000000c1a0";
const CWD: &str = "/home/dev/proj";

fn entry(kind: &str, uuid: &str, ts: &str, sidechain: bool, message: Value) -> Value {
    json!({
        "parentUuid": null, "isSidechain": sidechain, "userType": "external", "cwd": CWD,
        "sessionId": SESSION, "version": "2.1.39", "gitBranch": "main",
        "type": kind, "uuid": uuid, "timestamp": ts, "message": message,
    })
}

fn prompt(uuid: &str, ts: &str, text: &str, sidechain: bool) -> Value {
    entry(
        "user",
        uuid,
        ts,
        sidechain,
        json!({"role": "user", "content": text}),
    )
}

fn tool_use(uuid: &str, ts: &str, sidechain: bool, id: &str, name: &str, input: Value) -> Value {
    entry(
        "assistant",
        uuid,
        ts,
        sidechain,
        json!({"role": "assistant", "model": "claude-opus-4-8", "type": "message",
               "content": [{"type": "tool_use", "id": id, "name": name, "input": input}],
               "stop_reason": "tool_use"}),
    )
}

fn tool_result(
    uuid: &str,
    ts: &str,
    sidechain: bool,
    id: &str,
    text: &str,
    extra: Option<Value>,
) -> Value {
    let mut value = entry(
        "user",
        uuid,
        ts,
        sidechain,
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": text}]}),
    );
    if let Some(extra) = extra {
        value["toolUseResult"] = extra;
    }
    value
}

fn reply(uuid: &str, ts: &str, sidechain: bool, stop_reason: &str) -> Value {
    entry(
        "assistant",
        uuid,
        ts,
        sidechain,
        json!({"role": "assistant", "content": [{"type": "text", "text": "done"}], "stop_reason": stop_reason}),
    )
}

/// A prompt and one `Agent` launch (`toolu_A`) that has no result yet.
fn prompt_and_open_launch() -> [Value; 2] {
    [
        prompt("u1", "2026-08-03T15:32:20.000Z", "go", false),
        tool_use(
            "u2",
            "2026-08-03T15:32:21.000Z",
            false,
            "toolu_A",
            "Agent",
            json!({"description": "d", "prompt": "p"}),
        ),
    ]
}

fn write_jsonl(path: &Path, entries: &[Value]) {
    let text: String = entries.iter().map(|e| format!("{e}\n")).collect();
    std::fs::write(path, text).expect("write log");
}

/// `projects/-home-dev-proj/<session>.jsonl` with two turns: two parallel `Agent` calls
/// (one foreground with metrics, one `async_launched`), then a plain `Bash` call. Each
/// subagent has its own log whose tool call nests under the spawning call.
fn compose(root: &Path) -> std::path::PathBuf {
    let project = root.join("projects").join("-home-dev-proj");
    let subagents = project.join(SESSION).join("subagents");
    std::fs::create_dir_all(&subagents).expect("folders");
    let parent = vec![
        json!({"type": "summary", "summary": "Security review", "leafUuid": "u9"}),
        prompt(
            "u1",
            "2026-08-03T15:32:20.000Z",
            "Review the auth module twice",
            false,
        ),
        tool_use(
            "u2",
            "2026-08-03T15:32:21.000Z",
            false,
            "toolu_A",
            "Agent",
            json!({"description": "Review auth", "prompt": "Review the auth module", "subagent_type": "security-reviewer"}),
        ),
        tool_use(
            "u3",
            "2026-08-03T15:32:21.100Z",
            false,
            "toolu_B",
            "Task",
            json!({"description": "Style pass", "prompt": "Check the style", "subagent_type": "style-reviewer", "run_in_background": true}),
        ),
        tool_result(
            "u4",
            "2026-08-03T15:32:21.200Z",
            false,
            "toolu_B",
            "Async agent launched",
            Some(
                json!({"isAsync": true, "status": "async_launched", "agentId": "b2", "description": "Style pass",
                        "prompt": "Check the style", "outputFile": "/tmp/b2.output"}),
            ),
        ),
        tool_result(
            "u5",
            "2026-08-03T15:32:25.000Z",
            false,
            "toolu_A",
            "VERDICT: APPROVE",
            Some(
                json!({"status": "completed", "agentId": "a1", "agentType": "security-reviewer",
                        "content": [{"type": "text", "text": "VERDICT: APPROVE"}],
                        "totalDurationMs": 3900, "totalTokens": 5000, "totalToolUseCount": 3,
                        "usage": {"input_tokens": 1, "output_tokens": 40}}),
            ),
        ),
        reply("u6", "2026-08-03T15:32:26.000Z", false, "end_turn"),
        json!({"type": "file-history-snapshot", "messageId": "m1", "snapshot": {}}),
        prompt(
            "u7",
            "2026-08-03T15:33:00.000Z",
            "Now list the files",
            false,
        ),
        tool_use(
            "u8",
            "2026-08-03T15:33:01.000Z",
            false,
            "toolu_C",
            "Bash",
            json!({"command": "ls"}),
        ),
        tool_result(
            "u9",
            "2026-08-03T15:33:02.000Z",
            false,
            "toolu_C",
            "a.rs",
            None,
        ),
        reply("u10", "2026-08-03T15:33:03.000Z", false, "end_turn"),
    ];
    let log = project.join(format!("{SESSION}.jsonl"));
    write_jsonl(&log, &parent);
    // The foreground child runs inside the first turn.
    write_jsonl(
        &subagents.join("agent-a1.jsonl"),
        &[
            prompt(
                "c1",
                "2026-08-03T15:32:21.300Z",
                "Review the auth module",
                true,
            ),
            tool_use(
                "c2",
                "2026-08-03T15:32:22.000Z",
                true,
                "toolu_R1",
                "Read",
                json!({"file_path": "/home/dev/proj/auth.rs"}),
            ),
            tool_result(
                "c3",
                "2026-08-03T15:32:22.500Z",
                true,
                "toolu_R1",
                "fn login() {}",
                None,
            ),
            reply("c4", "2026-08-03T15:32:24.900Z", true, "end_turn"),
        ],
    );
    // The background child is still working in the second turn.
    write_jsonl(
        &subagents.join("agent-b2.jsonl"),
        &[
            prompt("d1", "2026-08-03T15:32:21.400Z", "Check the style", true),
            tool_use(
                "d2",
                "2026-08-03T15:33:01.500Z",
                true,
                "toolu_G1",
                "Grep",
                json!({"pattern": "unwrap"}),
            ),
        ],
    );
    root.join("projects")
}

async fn native_folder_imports_to_the_right_rows(db: TestDb) {
    let dir = tempfile::tempdir().expect("tempdir");
    let projects = compose(dir.path());
    let store = open(&db).await;
    let summary = import_paths(
        as_store(&store),
        std::slice::from_ref(&projects),
        &NoProgress,
    )
    .await;
    assert!(!summary.has_failures(), "{summary:#?}");
    assert_eq!(
        summary.files.len(),
        1,
        "subagent logs are read with their session"
    );
    let file = &summary.files[0];
    assert_eq!(file.kind, SourceKind::ClaudeNative);
    assert_eq!(file.subagent_logs.len(), 2);
    assert_eq!(file.frames, 12 + 4 + 2);
    common::assert_invariant(&file.counters);
    assert_eq!(
        file.counters.unknown_execution, file.counters.persisted,
        "execution 'unknown'"
    );

    let session = session_row_id("unknown", SESSION);
    let turn1 = turn_row_id(&session, "u1");
    let turn2 = turn_row_id(&session, "u7");
    let rows = store.subagents_by_session(&session).await.expect("rows");
    let ids: Vec<&str> = rows.iter().map(|r| r.tool_call_id.as_str()).collect();
    assert_eq!(ids, ["toolu_A", "toolu_B"]);
    let (a, b) = (&rows[0], &rows[1]);
    for row in [a, b] {
        assert_eq!(row.task_id, CWD);
        assert_eq!(row.agent_execution_id, "unknown");
        assert_eq!(row.turn_id.as_deref(), Some(turn1.as_str()));
        assert_eq!(row.parent_tool_call_id, None);
        assert_eq!(row.tool_status.as_deref(), Some("completed"));
    }
    assert_eq!(a.observed_at, at("2026-08-03T15:32:21Z"));
    assert_eq!(a.subagent_type.as_deref(), Some("security-reviewer"));
    assert_eq!(a.description.as_deref(), Some("Review auth"));
    assert_eq!(a.agent_id.as_deref(), Some("a1"));
    assert_eq!(a.agent_status.as_deref(), Some("completed"));
    assert_eq!(
        (a.total_tokens, a.tool_use_count, a.duration_ms),
        (Some(5_000), Some(3), Some(3_900))
    );
    assert!(!a.is_async);
    assert_eq!(a.settled_at, Some(at("2026-08-03T15:32:25Z")));
    assert_eq!(b.subagent_type.as_deref(), Some("style-reviewer"));
    assert!(b.is_async);
    assert_eq!(b.agent_status.as_deref(), Some("async_launched"));
    assert_eq!(b.agent_id.as_deref(), Some("b2"));
    assert_eq!(
        (b.total_tokens, b.tool_use_count, b.duration_ms),
        (None, None, None)
    );
    assert_eq!(b.settled_at, Some(at("2026-08-03T15:32:21.2Z")));

    // Child tool calls: messages nested under the spawning call, in the turn open then.
    for (call, parent, turn) in [
        ("toolu_R1", "toolu_A", &turn1),
        ("toolu_G1", "toolu_B", &turn2),
    ] {
        let (message_turn, _, metadata) = common::message(&db.url, &message_row_id(&session, call))
            .await
            .unwrap_or_else(|| panic!("message {call}"));
        assert_eq!(metadata["parent_tool_call_id"], parent, "{call}");
        assert_eq!(message_turn.as_deref(), Some(turn.as_str()), "{call}");
    }
    let (_, content, metadata) = common::message(&db.url, &message_row_id(&session, "toolu_A"))
        .await
        .expect("A");
    assert_eq!(content.as_deref(), Some("Review auth"));
    assert_eq!(metadata["normalized"]["kind"], "subagent_task");
    assert_eq!(
        metadata["normalized"]["subagent_task"]["result_text"],
        "VERDICT: APPROVE"
    );
    let (_, _, bash) = common::message(&db.url, &message_row_id(&session, "toolu_C"))
        .await
        .expect("C");
    assert_eq!(bash["normalized"]["kind"], "shell_exec");
    assert_eq!(bash["status"], "completed");
    assert!(bash.get("parent_tool_call_id").is_none());

    assert_eq!(count(&db.url, "task_sessions").await, 1);
    assert_eq!(count(&db.url, "task_session_messages").await, 5);
    let turns = common::text_rows(
        &db.url,
        "SELECT CAST(id AS TEXT), CAST(stop_reason AS TEXT) FROM task_session_turns WHERE completed_at IS NOT NULL ORDER BY started_at",
    )
    .await;
    assert_eq!(
        turns,
        vec![
            vec![Some(turn1.clone()), Some("end_turn".to_owned())],
            vec![Some(turn2.clone()), Some("end_turn".to_owned())],
        ]
    );
    // Completed at its last activity (a literal both engines read as that instant).
    let ended_then = common::text_rows(
        &db.url,
        &format!(
            "SELECT CAST(id AS TEXT) FROM task_session_turns WHERE id = '{turn1}' AND completed_at = '{}'",
            at("2026-08-03T15:32:26Z").canonical()
        ),
    )
    .await;
    assert_eq!(ended_then.len(), 1);

    let before = dump_all(&db.url).await;
    let again = import_paths(
        as_store(&store),
        std::slice::from_ref(&projects),
        &NoProgress,
    )
    .await;
    assert!(!again.has_failures());
    assert_eq!(dump_all(&db.url).await, before, "re-import changes nothing");
}

/// A log whose last turn is still running keeps that turn open.
async fn a_log_still_being_written_keeps_its_last_turn_open(db: TestDb) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join(format!("{SESSION}.jsonl"));
    write_jsonl(&log, &prompt_and_open_launch());
    let store = open(&db).await;
    let summary = import_paths(as_store(&store), &[log], &NoProgress).await;
    assert!(!summary.has_failures(), "{summary:#?}");
    let open_turns = common::text_rows(
        &db.url,
        "SELECT CAST(id AS TEXT) FROM task_session_turns WHERE completed_at IS NULL",
    )
    .await;
    assert_eq!(open_turns.len(), 1);
    let rows = store
        .subagents_by_session(&session_row_id("unknown", SESSION))
        .await
        .expect("rows");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].tool_status.as_deref(), Some("pending"));
    assert_eq!(rows[0].settled_at, None);
}

/// A subagent log whose agent id no result names (`agent-zz.jsonl`) is linked to its
/// spawning call by its first sidechain prompt: its tool call nests under the launch
/// whose `input.prompt` is that text, not under another launch of the same turn.
async fn a_child_log_without_a_known_agent_id_links_by_prompt(db: TestDb) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join(format!("{SESSION}.jsonl"));
    let subagents = dir.path().join(SESSION).join("subagents");
    std::fs::create_dir_all(&subagents).expect("folders");
    let [first_prompt, first_launch] = prompt_and_open_launch();
    write_jsonl(
        &log,
        &[
            first_prompt,
            first_launch,
            tool_use(
                "u3",
                "2026-08-03T15:32:21.100Z",
                false,
                "toolu_B",
                "Agent",
                json!({"description": "e", "prompt": "Check the style"}),
            ),
            // Names agent `b2`, not `zz`: the id cannot link the child log.
            tool_result(
                "u4",
                "2026-08-03T15:32:25.000Z",
                false,
                "toolu_B",
                "done",
                Some(json!({"status": "completed", "agentId": "b2"})),
            ),
        ],
    );
    write_jsonl(
        &subagents.join("agent-zz.jsonl"),
        &[
            prompt("z1", "2026-08-03T15:32:21.300Z", "Check the style", true),
            tool_use(
                "z2",
                "2026-08-03T15:32:22.000Z",
                true,
                "toolu_Z1",
                "Grep",
                json!({"pattern": "unwrap"}),
            ),
        ],
    );
    let store = open(&db).await;
    let summary = import_paths(as_store(&store), std::slice::from_ref(&log), &NoProgress).await;
    assert!(!summary.has_failures(), "{summary:#?}");
    assert_eq!(summary.files[0].subagent_logs.len(), 1);

    let session = session_row_id("unknown", SESSION);
    let (turn, _, metadata) = common::message(&db.url, &message_row_id(&session, "toolu_Z1"))
        .await
        .expect("child message");
    assert_eq!(
        metadata["parent_tool_call_id"], "toolu_B",
        "linked by prompt"
    );
    assert_eq!(
        turn.as_deref(),
        Some(turn_row_id(&session, "u1").as_str()),
        "in the turn open then"
    );
    let rows = store.subagents_by_session(&session).await.expect("rows");
    let ids: Vec<&str> = rows.iter().map(|r| r.tool_call_id.as_str()).collect();
    assert_eq!(
        ids,
        ["toolu_A", "toolu_B"],
        "the child call is no subagent row"
    );
}

/// A bad line is reported with its file and line; the rest of the log still imports.
async fn a_bad_line_is_reported_and_the_rest_imports(db: TestDb) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join(format!("{SESSION}.jsonl"));
    let good = prompt_and_open_launch();
    let text = format!(
        "{}\n{{\"type\":\"assistant\",\"timestamp\":\"soon\",\"message\":{{}}}}\n{{truncated\n{}\n",
        good[0], good[1]
    );
    std::fs::write(&log, text).expect("write");
    let store = open(&db).await;
    let summary = import_paths(as_store(&store), std::slice::from_ref(&log), &NoProgress).await;
    assert!(summary.has_failures());
    let file = &summary.files[0];
    assert_eq!(file.skipped, 2);
    let lines: Vec<u64> = file.errors.iter().map(|e| e.line).collect();
    assert_eq!(lines, [2, 3]);
    assert!(
        file.errors[0]
            .to_string()
            .starts_with(&format!("{}:2: ", log.display()))
    );
    assert_eq!(count(&db.url, "task_session_subagents").await, 1);
}

both_engines!(
    native_folder_imports_to_the_right_rows,
    a_log_still_being_written_keeps_its_last_turn_open,
    a_bad_line_is_reported_and_the_rest_imports,
    a_child_log_without_a_known_agent_id_links_by_prompt,
);
