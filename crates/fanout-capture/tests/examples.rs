//! Importing every transcript of `acp-examples/` produces exactly the rows its README
//! lists, on SQLite and PostgreSQL, and importing again changes nothing. The examples
//! are read from fanout-acp's copy, the one the tracker tests use.

mod common;

use std::path::PathBuf;

use common::{as_store, at, count, dump_all, open};
use fanout_capture::import::{NoProgress, import_paths};
use fanout_capture::{message_row_id, session_row_id, turn_row_id};
use fanout_store::testing::TestDb;
use fanout_store::{Source, SubagentRow, both_engines};

const TASK: &str = "/home/dev/proj";

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fanout-acp/tests/acp-examples")
}

fn example(name: &str) -> PathBuf {
    examples_dir().join(name)
}

/// Imports one example; returns the session row id and its subagent rows.
async fn import_one(
    store: &std::sync::Arc<fanout_store::SqlStore>,
    name: &str,
    execution: &str,
    acp_session: &str,
) -> (String, Vec<SubagentRow>) {
    let summary = import_paths(as_store(store), &[example(name)], &NoProgress).await;
    assert!(!summary.has_failures(), "{name}: {summary:#?}");
    assert_eq!(summary.files.len(), 1);
    let file = &summary.files[0];
    assert_eq!(file.capture.frames_not_understood, 0, "{name}");
    assert_eq!(file.counters.failed, 0, "{name}");
    assert_eq!(file.counters.skipped_no_identity, 0, "{name}");
    common::assert_invariant(&file.counters);
    let session = session_row_id(execution, acp_session);
    let rows = store.subagents_by_session(&session).await.expect("rows");
    assert_eq!(
        file.capture.subagent_rows as usize,
        rows.len(),
        "{name}: summary counts the rows"
    );
    (session, rows)
}

/// What every row of an example shares: its execution, task, provenance and the one turn.
fn common_columns(row: &SubagentRow, session: &str, execution: &str) {
    assert_eq!(row.task_session_id, session);
    assert_eq!(row.task_id, TASK);
    assert_eq!(row.agent_execution_id, execution);
    assert_eq!(row.source, Source::Live);
    assert_eq!(
        row.turn_id.as_deref(),
        Some(turn_row_id(session, "2").as_str()),
        "{}: the prompt's turn",
        row.tool_call_id
    );
}

fn ids(rows: &[SubagentRow]) -> Vec<&str> {
    rows.iter().map(|r| r.tool_call_id.as_str()).collect()
}

async fn reimport_changes_nothing(
    db: &TestDb,
    store: &std::sync::Arc<fanout_store::SqlStore>,
    name: &str,
) {
    let before = dump_all(&db.url).await;
    let summary = import_paths(as_store(store), &[example(name)], &NoProgress).await;
    assert!(!summary.has_failures());
    assert_eq!(
        dump_all(&db.url).await,
        before,
        "{name}: re-import changed rows"
    );
}

async fn claude(db: TestDb) {
    let store = open(&db).await;
    let exec = "0198a1b2-0000-7000-8000-0000000000c1";
    let (session, rows) = import_one(
        &store,
        "claude.transcript.jsonl",
        exec,
        "c1a2b3c4-0000-4000-8000-000000000001",
    )
    .await;
    assert_eq!(
        ids(&rows),
        ["toolu_01REVIEW01", "toolu_01REVIEW02", "toolu_01REVIEW03"]
    );
    for row in &rows {
        common_columns(row, &session, exec);
        assert_eq!(row.parent_tool_call_id, None);
        assert_eq!(row.tool_status.as_deref(), Some("completed"));
    }
    let [r1, r2, r3] = &rows[..] else {
        unreachable!()
    };
    assert_eq!(
        r1.observed_at,
        at("2026-08-03T15:32:21.25Z"),
        "first observation"
    );
    assert_eq!(r1.subagent_type.as_deref(), Some("security-reviewer"));
    assert_eq!(r1.description.as_deref(), Some("security-reviewer pass"));
    assert_eq!(r1.agent_id.as_deref(), Some("a9f3c2d1e0b4a5c6"));
    assert_eq!(r1.model.as_deref(), Some("claude-opus-4-8[1m]"));
    assert_eq!(r1.agent_status.as_deref(), Some("completed"));
    assert_eq!(
        (r1.total_tokens, r1.tool_use_count, r1.duration_ms),
        (Some(275_717), Some(11), Some(48_213))
    );
    assert!(!r1.is_async);
    assert_eq!(r1.settled_at, Some(at("2026-08-03T15:32:23.5Z")));

    assert_eq!(r2.subagent_type.as_deref(), Some("perf-reviewer"));
    assert_eq!(r2.agent_id.as_deref(), Some("b1b2b3b4b5b6b7b8"));
    assert_eq!(
        (r2.total_tokens, r2.tool_use_count, r2.duration_ms),
        (Some(1_200), Some(0), Some(900))
    );
    assert_eq!(r2.settled_at, Some(at("2026-08-03T15:32:23.75Z")));

    assert_eq!(r3.subagent_type.as_deref(), Some("style-reviewer"));
    assert!(r3.is_async);
    assert_eq!(r3.agent_status.as_deref(), Some("async_launched"));
    assert_eq!(r3.agent_id.as_deref(), Some("c7c7c7c7c7c7c7c7"));
    assert_eq!(
        (r3.total_tokens, r3.tool_use_count, r3.duration_ms),
        (None, None, None)
    );
    assert_eq!(r3.settled_at, Some(at("2026-08-03T15:32:24Z")));

    // The nested Bash call: a message with its parent, never a subagent row.
    let (turn, content, metadata) =
        common::message(&db.url, &message_row_id(&session, "toolu_01CHILDBASH"))
            .await
            .expect("child message");
    assert_eq!(turn.as_deref(), Some(turn_row_id(&session, "2").as_str()));
    assert_eq!(content.as_deref(), Some("grep -rn unsafe src"));
    assert_eq!(metadata["parent_tool_call_id"], "toolu_01REVIEW01");
    assert_eq!(metadata["status"], "completed");
    assert_eq!(metadata["normalized"]["kind"], "shell_exec");
    let (_, _, review) = common::message(&db.url, &message_row_id(&session, "toolu_01REVIEW01"))
        .await
        .expect("review message");
    assert_eq!(review["normalized"]["kind"], "subagent_task");
    assert_eq!(
        review["normalized"]["subagent_task"]["total_tokens"],
        275_717
    );

    assert_eq!(count(&db.url, "task_sessions").await, 1);
    assert_eq!(count(&db.url, "task_session_turns").await, 1);
    assert_eq!(count(&db.url, "task_session_messages").await, 4);
    let turn = common::text_rows(
        &db.url,
        "SELECT CAST(stop_reason AS TEXT), CAST(task_id AS TEXT) FROM task_session_turns",
    )
    .await;
    assert_eq!(
        turn,
        vec![vec![Some("end_turn".to_owned()), Some(TASK.to_owned())]]
    );
    let sessions = common::text_rows(
        &db.url,
        "SELECT CAST(acp_session_id AS TEXT), CAST(agent_execution_id AS TEXT), CAST(cwd AS TEXT), CAST(agent_command AS TEXT), CAST(completed_at AS TEXT) FROM task_sessions",
    )
    .await;
    assert_eq!(
        sessions,
        vec![vec![
            Some("c1a2b3c4-0000-4000-8000-000000000001".to_owned()),
            Some(exec.to_owned()),
            Some(TASK.to_owned()),
            Some("npx @zed-industries/claude-agent-acp".to_owned()),
            None,
        ]]
    );
    reimport_changes_nothing(&db, &store, "claude.transcript.jsonl").await;
}

async fn opencode(db: TestDb) {
    let store = open(&db).await;
    let exec = "0198a1b2-0000-7000-8000-0000000000c2";
    let (session, rows) = import_one(
        &store,
        "opencode.transcript.jsonl",
        exec,
        "ses_parent_opencode",
    )
    .await;
    assert_eq!(ids(&rows), ["call_7"]);
    let row = &rows[0];
    common_columns(row, &session, exec);
    assert_eq!(row.child_session_id.as_deref(), Some("ses_child_1"));
    assert_eq!(row.model.as_deref(), Some("opencode/big-pickle"));
    assert_eq!(row.agent_status, None);
    assert_eq!(
        (row.total_tokens, row.tool_use_count, row.duration_ms),
        (None, None, None)
    );
    assert_eq!(row.subagent_type.as_deref(), Some("general"));
    assert_eq!(row.description.as_deref(), Some("Investigate"));
    assert_eq!(row.tool_status.as_deref(), Some("completed"));
    assert!(row.settled_at.is_some());
    reimport_changes_nothing(&db, &store, "opencode.transcript.jsonl").await;
}

async fn cursor(db: TestDb) {
    let store = open(&db).await;
    let exec = "0198a1b2-0000-7000-8000-0000000000c3";
    let (session, rows) = import_one(&store, "cursor.transcript.jsonl", exec, "cur-1").await;
    assert_eq!(ids(&rows), ["tool_2494c23d"]);
    let row = &rows[0];
    common_columns(row, &session, exec);
    assert_eq!(row.agent_id.as_deref(), Some("eaa12f70-60506ebd5c78"));
    assert_eq!(row.description.as_deref(), Some("Summarize src JS files"));
    assert_eq!(row.model.as_deref(), Some("composer-2.5-fast"));
    assert_eq!(row.duration_ms, Some(4_200));
    assert!(!row.is_async);
    assert_eq!(row.tool_status.as_deref(), Some("completed"));
    reimport_changes_nothing(&db, &store, "cursor.transcript.jsonl").await;
}

async fn auggie(db: TestDb) {
    let store = open(&db).await;
    let exec = "0198a1b2-0000-7000-8000-0000000000c4";
    let (session, rows) = import_one(&store, "auggie.transcript.jsonl", exec, "aug-1").await;
    assert_eq!(ids(&rows), ["t-9"]);
    let row = &rows[0];
    common_columns(row, &session, exec);
    assert_eq!(row.subagent_type.as_deref(), Some("explore"));
    assert_eq!(
        row.description.as_deref(),
        Some("find the bug in the parser")
    );
    assert_eq!(row.tool_status.as_deref(), Some("completed"));
    reimport_changes_nothing(&db, &store, "auggie.transcript.jsonl").await;
}

async fn codex(db: TestDb) {
    let store = open(&db).await;
    let exec = "0198a1b2-0000-7000-8000-0000000000c5";
    let (session, rows) = import_one(&store, "codex.transcript.jsonl", exec, "cx-1").await;
    assert_eq!(
        ids(&rows),
        ["call-spawn"],
        "no row for the lifecycle frame call-term"
    );
    let row = &rows[0];
    common_columns(row, &session, exec);
    assert_eq!(row.child_session_id.as_deref(), Some("thread-child"));
    assert_eq!(row.model.as_deref(), Some("gpt-5.2-codex"));
    assert_eq!(row.description.as_deref(), Some("Audit the ACP adapter"));
    assert_eq!(row.agent_status.as_deref(), Some("completed"));
    reimport_changes_nothing(&db, &store, "codex.transcript.jsonl").await;
}

async fn acp_native(db: TestDb) {
    let store = open(&db).await;
    let exec = "0198a1b2-0000-7000-8000-0000000000c6";
    let (session, rows) =
        import_one(&store, "acp-native.transcript.jsonl", exec, "parent-native").await;
    assert_eq!(
        ids(&rows),
        ["child-native-1"],
        "spawn-1 is not a second row"
    );
    let row = &rows[0];
    common_columns(row, &session, exec);
    assert_eq!(row.child_session_id.as_deref(), Some("child-native-1"));
    assert_eq!(row.description.as_deref(), Some("Reviews the diff"));
    assert_eq!(row.agent_status.as_deref(), Some("idle"));
    assert_eq!(row.tool_status.as_deref(), Some("completed"));
    // DESIGN 3.6: `idle` (end_turn) ends the work cycle and settles it, before spawn-1's
    // own `completed` (first terminal wins).
    assert_eq!(row.settled_at, Some(at("2026-08-03T15:32:22.25Z")));
    // The child's traffic belongs to the parent session: no session row of its own.
    assert_eq!(count(&db.url, "task_sessions").await, 1);
    reimport_changes_nothing(&db, &store, "acp-native.transcript.jsonl").await;
}

/// All eleven at once, through a directory walk: exactly the README's 19 rows.
async fn whole_directory(db: TestDb) {
    let store = open(&db).await;
    let dir = examples_dir();
    let summary = import_paths(as_store(&store), std::slice::from_ref(&dir), &NoProgress).await;
    assert!(!summary.has_failures(), "{summary:#?}");
    let totals = summary.totals();
    assert_eq!(totals.files, 11);
    assert_eq!(totals.subagent_rows, 19);
    assert_eq!(totals.sessions, 11);
    assert_eq!(totals.turns, 11);
    assert_eq!(count(&db.url, "task_session_subagents").await, 19);
    let before = dump_all(&db.url).await;
    let again = import_paths(as_store(&store), &[dir], &NoProgress).await;
    assert!(!again.has_failures());
    assert_eq!(dump_all(&db.url).await, before);
}

both_engines!(
    claude,
    opencode,
    cursor,
    auggie,
    codex,
    acp_native,
    whole_directory
);
