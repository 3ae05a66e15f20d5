//! The usage ledger (`task_session_usage`, DESIGN 4.1) and `import_files` (DESIGN 3.7):
//! the merge rules of the one upsert, the value rules, the reads and their roll-ups,
//! one body per rule, run against SQLite and PostgreSQL alike.

use fanout_store::testing::{TestDb, add_session_with_turn};
use fanout_store::{
    ImportFileRecord, ReportScope, SqlStore, Store, SubagentRecord, Timestamp, TokenCounts,
    TokenTotals, UsageGrouping, UsageRecord, UsageRow, UsageSource, WriteOp, both_engines,
    usage_row_id,
};

const TASK: &str = "task-1";

fn t(micros: i64) -> Timestamp {
    Timestamp::parse("2026-08-10T09:00:00Z")
        .unwrap()
        .plus_micros(micros)
}

async fn store_with_session(db: &TestDb, session: &str) -> SqlStore {
    let store = db.open().await.expect("open store");
    add_session(&store, session).await;
    store
}

async fn add_session(store: &SqlStore, session: &str) {
    add_session_with_turn(store, session, TASK, t(0)).await;
}

fn tokens(input: i64, output: i64, creation: i64, read: i64) -> TokenCounts {
    TokenCounts {
        input_tokens: Some(input),
        output_tokens: Some(output),
        cache_creation_tokens: Some(creation),
        cache_read_tokens: Some(read),
        reasoning_tokens: None,
    }
}

fn response(session: &str, response_id: &str, at: i64) -> UsageRecord {
    UsageRecord {
        task_session_id: session.into(),
        task_id: TASK.into(),
        turn_id: None,
        subagent_tool_call_id: None,
        agent_execution_id: None,
        response_id: response_id.into(),
        model: None,
        tokens: TokenCounts::default(),
        source: UsageSource::ClaudeLog,
        observed_at: t(at),
    }
}

async fn only_row(store: &SqlStore, session: &str) -> UsageRow {
    let rows = store.usage_rows(session).await.expect("read");
    assert_eq!(rows.len(), 1, "one row per response: {rows:#?}");
    rows.into_iter().next().unwrap()
}

/// Per token field the larger of stored and new; a NULL never replaces; a field first
/// reported by a later record is filled.
async fn tokens_merge_as_the_larger_and_null_never_replaces(db: TestDb) {
    let store = store_with_session(&db, "s1").await;
    // A subagent's first record of a response: partial output, no cache figures.
    let first = UsageRecord {
        tokens: TokenCounts {
            input_tokens: Some(10),
            output_tokens: Some(1),
            ..TokenCounts::default()
        },
        ..response("s1", "msg_1", 10)
    };
    let second = UsageRecord {
        tokens: TokenCounts {
            output_tokens: Some(15),
            cache_read_tokens: Some(0),
            ..tokens(10, 15, 300, 0)
        },
        ..response("s1", "msg_1", 20)
    };
    let stale = UsageRecord {
        tokens: TokenCounts {
            input_tokens: Some(4),
            ..TokenCounts::default()
        },
        ..response("s1", "msg_1", 30)
    };
    for record in [&first, &second, &stale] {
        store.upsert_usage(record).await.unwrap();
    }
    let row = only_row(&store, "s1").await;
    assert_eq!(row.tokens, tokens(10, 15, 300, 0));
    assert_eq!(
        row.tokens.reasoning_tokens, None,
        "never reported: NULL, not 0"
    );
    assert_eq!(row.id, usage_row_id("s1", "msg_1"));
    assert_eq!(row.observed_at, t(10), "observed_at is the first writer's");
    assert_eq!(
        row.updated_at,
        t(30),
        "updated_at is the latest observation"
    );
}

/// `model` and `turn_id`: the first non-NULL wins; a NULL is filled later.
async fn model_and_turn_first_non_null_wins(db: TestDb) {
    let store = store_with_session(&db, "s1").await;
    let writes = [
        response("s1", "msg_1", 10),
        UsageRecord {
            model: Some("claude-opus-5-5".into()),
            turn_id: Some("s1-turn".into()),
            ..response("s1", "msg_1", 20)
        },
        UsageRecord {
            model: Some("other-model".into()),
            turn_id: Some("other-turn".into()),
            ..response("s1", "msg_1", 30)
        },
    ];
    for record in &writes {
        store.upsert_usage(record).await.unwrap();
    }
    let row = only_row(&store, "s1").await;
    assert_eq!(row.model.as_deref(), Some("claude-opus-5-5"));
    assert_eq!(row.turn_id.as_deref(), Some("s1-turn"));
}

/// The attribution is written once by the row's first writer, NULL included: a
/// side-question log replaying a parent response can neither move it nor count it twice.
async fn attribution_is_written_once_by_the_first_writer(db: TestDb) {
    let store = store_with_session(&db, "s1").await;
    let parent = UsageRecord {
        tokens: tokens(100, 10, 1000, 10000),
        ..response("s1", "msg_parent", 10)
    };
    let replay = UsageRecord {
        subagent_tool_call_id: Some("toolu_side".into()),
        ..parent.clone()
    };
    store.upsert_usage(&parent).await.unwrap();
    store.upsert_usage(&replay).await.unwrap();
    let row = only_row(&store, "s1").await;
    assert_eq!(
        row.subagent_tool_call_id, None,
        "NULL was the first writer's"
    );
    assert_eq!(row.tokens, parent.tokens, "not counted twice");

    let child = UsageRecord {
        subagent_tool_call_id: Some("toolu_A".into()),
        ..response("s1", "msg_child", 20)
    };
    store.upsert_usage(&child).await.unwrap();
    store
        .upsert_usage(&response("s1", "msg_child", 30))
        .await
        .unwrap();
    let rows = store.usage_rows("s1").await.unwrap();
    assert_eq!(rows[1].subagent_tool_call_id.as_deref(), Some("toolu_A"));
}

/// Negative figures are NULL, '' texts are NULL, a missing execution is 'unknown', a 0
/// is a report; other write-once columns keep the first writer's values.
async fn value_rules_and_write_once_columns(db: TestDb) {
    let store = store_with_session(&db, "s1").await;
    let first = UsageRecord {
        model: Some(String::new()),
        turn_id: Some(String::new()),
        subagent_tool_call_id: Some(String::new()),
        agent_execution_id: Some(String::new()),
        tokens: TokenCounts {
            input_tokens: Some(-3),
            output_tokens: Some(0),
            ..TokenCounts::default()
        },
        ..response("s1", "msg_1", 10)
    };
    store.upsert_usage(&first).await.unwrap();
    let later = UsageRecord {
        task_id: "another-task".into(),
        agent_execution_id: Some("exec-9".into()),
        source: UsageSource::Acp,
        ..response("s1", "msg_1", 5)
    };
    store.upsert_usage(&later).await.unwrap();
    let row = only_row(&store, "s1").await;
    assert_eq!(row.tokens.input_tokens, None, "negative -> NULL");
    assert_eq!(row.tokens.output_tokens, Some(0), "0 is a report");
    assert_eq!((row.model, row.turn_id), (None, None), "'' -> NULL");
    assert_eq!(row.subagent_tool_call_id, None);
    assert_eq!(row.agent_execution_id, "unknown");
    assert_eq!(row.task_id, TASK);
    assert_eq!(row.source, UsageSource::ClaudeLog);
    assert_eq!(
        row.observed_at,
        t(10),
        "an earlier observation never moves it"
    );
    assert_eq!(row.updated_at, t(10), "nor updated_at backwards");
}

/// One row per (session, response id): the same response id in another session is
/// another row; deleting a session cascades to its ledger rows.
async fn rows_are_per_session_and_cascade(db: TestDb) {
    let store = store_with_session(&db, "s1").await;
    add_session(&store, "s2").await;
    for session in ["s1", "s2"] {
        store
            .upsert_usage(&response(session, "msg_1", 10))
            .await
            .unwrap();
    }
    assert_ne!(usage_row_id("s1", "msg_1"), usage_row_id("s2", "msg_1"));
    assert_eq!(store.counts().await.unwrap().usage, 2);
    store.delete_session("s2").await.unwrap();
    assert!(store.usage_rows("s2").await.unwrap().is_empty());
    assert_eq!(store.usage_rows("s1").await.unwrap().len(), 1);
    store.delete_turn("s1-turn").await.unwrap();
    assert_eq!(
        store.usage_rows("s1").await.unwrap().len(),
        1,
        "no FK to turns"
    );
}

/// The rows go through a group commit exactly as through single upserts, import state
/// included.
async fn a_batch_writes_usage_and_import_state(db: TestDb) {
    let store = store_with_session(&db, "s1").await;
    let a = UsageRecord {
        tokens: tokens(1, 2, 3, 4),
        ..response("s1", "msg_1", 10)
    };
    let b = UsageRecord {
        tokens: tokens(5, 6, 7, 8),
        ..response("s1", "msg_1", 11)
    };
    let file = ImportFileRecord {
        path: "/h/a.jsonl".into(),
        size: 120,
        mtime: 1_700_000_000_123_456_789,
        head_sha256: "ab".repeat(32),
        offset: 100,
        imported_at: t(50),
    };
    store
        .write_batch(&[
            WriteOp::Usage(&a),
            WriteOp::Usage(&b),
            WriteOp::ImportFile(&file),
        ])
        .await
        .unwrap();
    assert_eq!(only_row(&store, "s1").await.tokens, tokens(5, 6, 7, 8));
    assert_eq!(store.import_files().await.unwrap(), vec![file.clone()]);
    let moved = ImportFileRecord {
        size: 90,
        offset: 90,
        head_sha256: "cd".repeat(32),
        imported_at: t(60),
        ..file
    };
    store.upsert_import_file(&moved).await.unwrap();
    assert_eq!(
        store.import_files().await.unwrap(),
        vec![moved],
        "the latest state replaces"
    );
    assert_eq!(store.counts().await.unwrap().import_files, 1);
}

fn subagent(session: &str, tool_call_id: &str, parent: Option<&str>) -> SubagentRecord {
    SubagentRecord {
        task_session_id: session.into(),
        task_id: TASK.into(),
        tool_call_id: tool_call_id.into(),
        parent_tool_call_id: parent.map(str::to_owned),
        observed_at: Some(t(5)),
        ..Default::default()
    }
}

fn totals(responses: i64, tokens: TokenCounts) -> TokenTotals {
    TokenTotals { responses, tokens }
}

/// Session s1: the own agent (2 responses), invocation A (1) with nested B (1) and its
/// nested C (no response), and an attribution D with no subagent row (1). Model and turn
/// groups; a NULL field sums to NULL, not 0.
async fn reads_roll_up_own_and_with_descendants(db: TestDb) {
    let store = store_with_session(&db, "s1").await;
    add_session(&store, "s2").await;
    for row in [
        subagent("s1", "A", None),
        subagent("s1", "B", Some("A")),
        subagent("s1", "C", Some("B")),
        subagent("s2", "A", None),
    ] {
        store.upsert_subagent(&row).await.unwrap();
    }
    let usage = [
        ("s1", "m1", None, "model-x", tokens(1, 10, 100, 1000)),
        ("s1", "m2", None, "model-x", tokens(2, 20, 200, 2000)),
        ("s1", "m3", Some("A"), "model-y", tokens(3, 30, 300, 3000)),
        ("s1", "m4", Some("B"), "model-y", tokens(4, 40, 400, 4000)),
        ("s1", "m5", Some("D"), "model-x", tokens(5, 50, 500, 5000)),
        ("s2", "m1", Some("A"), "model-x", tokens(7, 70, 700, 7000)),
    ];
    for (i, (session, id, attribution, model, tokens)) in usage.into_iter().enumerate() {
        store
            .upsert_usage(&UsageRecord {
                subagent_tool_call_id: attribution.map(str::to_owned),
                model: Some(model.into()),
                turn_id: (id != "m5").then(|| format!("{session}-turn")),
                tokens,
                ..response(session, id, 10 + i as i64)
            })
            .await
            .unwrap();
    }
    let s1 = ReportScope::Session {
        session_id: "s1".into(),
    };

    let sessions = store.usage_by_session(&ReportScope::All).await.unwrap();
    assert_eq!(sessions.len(), 2);
    let s = &sessions[0];
    assert_eq!(s.task_session_id, "s1");
    assert_eq!(s.own, totals(2, tokens(3, 30, 300, 3000)));
    assert_eq!(s.subagents, totals(3, tokens(12, 120, 1200, 12000)));
    assert_eq!(s.total, totals(5, tokens(15, 150, 1500, 15000)));
    assert_eq!(
        s.total.tokens.reasoning_tokens, None,
        "no response reported it"
    );

    let invocations = store.usage_by_invocation(&s1).await.unwrap();
    let by_id: Vec<(&str, TokenTotals, TokenTotals)> = invocations
        .iter()
        .map(|i| (i.tool_call_id.as_str(), i.own, i.with_descendants))
        .collect();
    assert_eq!(
        by_id,
        vec![
            (
                "A",
                totals(1, tokens(3, 30, 300, 3000)),
                totals(2, tokens(7, 70, 700, 7000))
            ),
            (
                "B",
                totals(1, tokens(4, 40, 400, 4000)),
                totals(1, tokens(4, 40, 400, 4000))
            ),
            ("C", TokenTotals::default(), TokenTotals::default()),
            (
                "D",
                totals(1, tokens(5, 50, 500, 5000)),
                totals(1, tokens(5, 50, 500, 5000))
            ),
        ]
    );
    assert!(invocations.iter().all(|i| i.task_session_id == "s1"));
    let everywhere = store.usage_by_invocation(&ReportScope::All).await.unwrap();
    assert_eq!(everywhere.len(), 5, "s2's A is its own invocation");

    let models = store.usage_by(&s1, UsageGrouping::Model).await.unwrap();
    let models: Vec<(Option<&str>, TokenTotals)> = models
        .iter()
        .map(|g| (g.key.as_deref(), g.totals))
        .collect();
    assert_eq!(
        models,
        vec![
            (Some("model-x"), totals(3, tokens(8, 80, 800, 8000))),
            (Some("model-y"), totals(2, tokens(7, 70, 700, 7000))),
        ]
    );
    let turns = store.usage_by(&s1, UsageGrouping::Turn).await.unwrap();
    let turns: Vec<(Option<&str>, i64)> = turns
        .iter()
        .map(|g| (g.key.as_deref(), g.totals.responses))
        .collect();
    assert_eq!(
        turns,
        vec![(None, 1), (Some("s1-turn"), 4)],
        "NULL group first"
    );
    let window = ReportScope::Window {
        since: Some(t(12)),
        until: Some(t(14)),
    };
    let tasks = store.usage_by(&window, UsageGrouping::Task).await.unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(
        tasks[0].totals.responses, 2,
        "m3 and m4 were made in the window"
    );
}

/// Idempotent DDL: opening again keeps every ledger row and import state.
async fn reopening_keeps_the_ledger(db: TestDb) {
    let store = store_with_session(&db, "s1").await;
    store
        .upsert_usage(&response("s1", "msg_1", 10))
        .await
        .unwrap();
    store.close().await;
    let again = db.open().await.unwrap();
    assert_eq!(again.usage_rows("s1").await.unwrap().len(), 1);
    assert_eq!(again.migration_report().schema_version, 2);
}

both_engines!(
    tokens_merge_as_the_larger_and_null_never_replaces,
    model_and_turn_first_non_null_wins,
    attribution_is_written_once_by_the_first_writer,
    value_rules_and_write_once_columns,
    rows_are_per_session_and_cascade,
    a_batch_writes_usage_and_import_state,
    reads_roll_up_own_and_with_descendants,
    reopening_keeps_the_ledger,
);

/// Eight writers of the same new response at once, released together, single upserts
/// and group commits alike: one row, no writer fails (PostgreSQL's insert race on the
/// `id` primary key is retried), the largest figure per field.
async fn concurrent_writers_of_one_response_make_one_row(db: TestDb) {
    let store = std::sync::Arc::new(store_with_session(&db, "s1").await);
    for round in 0..8 {
        let response_id = format!("msg_race_{round}");
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(8));
        let mut tasks = Vec::new();
        for i in 0..8i64 {
            let (store, start) = (store.clone(), start.clone());
            let record = UsageRecord {
                tokens: tokens(i, 10 - i, 100 + i, 1000),
                ..response("s1", &response_id, 10 + i)
            };
            tasks.push(tokio::spawn(async move {
                start.wait().await;
                if i % 2 == 0 {
                    store.upsert_usage(&record).await
                } else {
                    store.write_batch(&[WriteOp::Usage(&record)]).await
                }
            }));
        }
        for task in tasks {
            task.await
                .unwrap()
                .expect("no writer fails under contention");
        }
    }
    let rows = store.usage_rows("s1").await.unwrap();
    assert_eq!(rows.len(), 8);
    for row in rows {
        assert_eq!(row.tokens, tokens(7, 10, 107, 1000));
    }
}

both_engines!(concurrent_writers_of_one_response_make_one_row);
