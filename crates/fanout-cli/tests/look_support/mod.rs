//! A database to look at, written through the fanout-store API: what `sessions`,
//! `show`, `report` and `serve` are tested on.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fanout_store::testing::{session_record, turn_record};
use fanout_store::{
    SessionRecord, SqlStore, Store, SubagentRecord, Timestamp, TokenCounts, UsageRecord,
    UsageSource,
};

/// A description with markup for HTML and an escape sequence for terminals.
pub const HOSTILE: &str = "<script>alert(1)</script> \u{1b}[2J\u{1b}[31mred";

/// The session with a tree, usage and hostile text.
pub const TREE: &str = "aaaa1111-0000-5000-8000-000000000001";
/// A second session whose id shares the `aaaa` prefix, with no turns.
pub const EMPTY: &str = "aaaa2222-0000-5000-8000-000000000002";
/// A session with one turn of 200 subagents.
pub const WIDE: &str = "bbbb3333-0000-5000-8000-000000000003";
/// The harness's own id of [`TREE`].
pub const TREE_HARNESS_ID: &str = "claude-session-xyz";

pub fn at(seconds: i64) -> Timestamp {
    Timestamp::parse("2026-08-10T09:00:00Z")
        .unwrap()
        .plus_micros(seconds * 1_000_000)
}

pub fn fanout(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fanout"))
        .args(args)
        .env("COLUMNS", "100")
        .env_remove("FANOUT_DATABASE_URL")
        .env_remove("FANOUT_PRICES")
        .env_remove("FANOUT_LOG")
        .output()
        .expect("run fanout")
}

/// As [`fanout`], 160 columns wide (the widest the tables draw).
pub fn fanout_wide(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fanout"))
        .args(args)
        .env("COLUMNS", "160")
        .env_remove("FANOUT_DATABASE_URL")
        .env_remove("FANOUT_PRICES")
        .env_remove("FANOUT_LOG")
        .output()
        .expect("run fanout")
}

pub fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "fanout failed: {:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("UTF-8 output")
}

pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Fixture {
    pub fn url(&self) -> String {
        format!("sqlite://{}", self.path.display())
    }
}

pub fn invocation(
    session: &str,
    call: &str,
    parent: Option<&str>,
    kind: &str,
    description: &str,
    observed: i64,
    settled: Option<i64>,
) -> SubagentRecord {
    SubagentRecord {
        task_session_id: session.into(),
        task_id: "task-look".into(),
        turn_id: Some(format!("{session}-t1")),
        tool_call_id: call.into(),
        agent_execution_id: Some("exec-1".into()),
        parent_tool_call_id: parent.map(str::to_owned),
        subagent_type: Some(kind.into()),
        description: Some(description.into()),
        model: Some("claude-sonnet-4-5".into()),
        tool_status: Some(
            if settled.is_some() {
                "completed"
            } else {
                "in_progress"
            }
            .into(),
        ),
        total_tokens: Some(1_234),
        observed_at: Some(at(observed)),
        settled_at: settled.map(at),
        ..Default::default()
    }
}

pub async fn response(
    store: &SqlStore,
    session: &str,
    id: &str,
    call: Option<&str>,
    model: &str,
    input: i64,
    output: i64,
) {
    store
        .upsert_usage(&UsageRecord {
            task_session_id: session.into(),
            task_id: "task-look".into(),
            turn_id: Some(format!("{session}-t1")),
            subagent_tool_call_id: call.map(str::to_owned),
            agent_execution_id: None,
            response_id: id.into(),
            model: Some(model.into()),
            tokens: TokenCounts {
                input_tokens: Some(input),
                output_tokens: Some(output),
                cache_creation_tokens: Some(0),
                cache_read_tokens: Some(100),
                reasoning_tokens: None,
            },
            source: UsageSource::ClaudeLog,
            observed_at: at(5),
        })
        .await
        .unwrap();
}

/// TREE: turn 1 with reviewer `a` (settled) -> nested explorer `b` (settled), and a
/// background `c` that never settled, whose description is hostile; usage on each,
/// `c` on an unpriced model. EMPTY: no turns. WIDE: 200 subagents in one turn.
pub fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("look.db");
    let url = format!("sqlite://{}", path.display());
    block_on(async {
        let store = SqlStore::open(&url).await.unwrap();
        let tree = SessionRecord {
            acp_session_id: Some(TREE_HARNESS_ID.into()),
            agent_command: Some("claude-code-acp".into()),
            ..session_record(TREE, "task-look", at(0))
        };
        store.upsert_session(&tree).await.unwrap();
        store
            .upsert_session(&session_record(EMPTY, "task-empty", at(100)))
            .await
            .unwrap();
        store
            .upsert_session(&session_record(WIDE, "task-wide", at(200)))
            .await
            .unwrap();
        let mut turn = turn_record(&format!("{TREE}-t1"), TREE, "task-look", at(1));
        turn.completed_at = Some(at(60));
        turn.stop_reason = Some("end_turn".into());
        store.upsert_turn(&turn).await.unwrap();
        store
            .upsert_subagent(&invocation(
                TREE,
                "call-a",
                None,
                "reviewer",
                "review the parser",
                2,
                Some(40),
            ))
            .await
            .unwrap();
        store
            .upsert_subagent(&invocation(
                TREE,
                "call-b",
                Some("call-a"),
                "explore",
                "find the grammar",
                5,
                Some(20),
            ))
            .await
            .unwrap();
        let mut c = invocation(TREE, "call-c", None, "general-purpose", HOSTILE, 3, None);
        c.is_async = true;
        store.upsert_subagent(&c).await.unwrap();
        response(
            &store,
            TREE,
            "r-own",
            None,
            "claude-sonnet-4-5",
            1_000_000,
            10_000,
        )
        .await;
        response(
            &store,
            TREE,
            "r-a",
            Some("call-a"),
            "claude-sonnet-4-5",
            1_000_000,
            0,
        )
        .await;
        response(
            &store,
            TREE,
            "r-b",
            Some("call-b"),
            "claude-haiku-4-5-20251001",
            1_000_000,
            1_000_000,
        )
        .await;
        response(&store, TREE, "r-c", Some("call-c"), "mock-model", 50, 50).await;
        store
            .upsert_turn(&turn_record(
                &format!("{WIDE}-t1"),
                WIDE,
                "task-wide",
                at(201),
            ))
            .await
            .unwrap();
        for i in 0..200 {
            let call = format!("wide-{i:03}");
            store
                .upsert_subagent(&invocation(
                    WIDE,
                    &call,
                    None,
                    "worker",
                    &format!("part {i}"),
                    202 + i % 7,
                    Some(230 + i % 11),
                ))
                .await
                .unwrap();
        }
        store.close().await;
    });
    Fixture { dir, path }
}

/// Every byte of the database and its WAL, to prove a command changed nothing. Not
/// the `-shm` index: a reader records where it reads in it (seen when the fixture's
/// writer was not the last connection to close, so the index stayed beside the file).
pub fn database_bytes(path: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(path).unwrap();
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    if let Ok(more) = std::fs::read(wal) {
        bytes.extend(more);
    }
    bytes
}
