//! What an OTLP export reads and remembers (DESIGN 12), on both engines: the sessions in
//! an export's scope (task, since, and what a receiver has not taken), one session's
//! part, the `otlp_exports` marks written once, and the named migration step that gives
//! an existing database the table.

use fanout_store::testing::{TestDb, session_record, turn_record};
use fanout_store::{
    ExportKey, ExportMark, ExportScope, SqlStore, StepStatus, Store, SubagentRecord, Timestamp,
    TokenCounts, UsageRecord, UsageSource, both_engines,
};

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

async fn call(store: &SqlStore, session: &str, turn: Option<&str>, call: &str, observed: &str) {
    store
        .upsert_subagent(&SubagentRecord {
            task_session_id: session.into(),
            task_id: format!("task-{session}"),
            turn_id: turn.map(str::to_owned),
            tool_call_id: call.into(),
            subagent_type: Some("reviewer".into()),
            observed_at: Some(at(observed)),
            ..Default::default()
        })
        .await
        .unwrap();
}

/// s1 (task-s1): turn t1 at 09:00 with calls a and b; s2 (task-s2): turn t2 at 10:00
/// with call c, and call d of no known turn at 10:30; s3: a session with nothing.
async fn fixture(db: &TestDb) -> SqlStore {
    let store = db.open().await.unwrap();
    for (session, started) in [
        ("s1", "2026-08-10T09:00:00Z"),
        ("s2", "2026-08-10T10:00:00Z"),
        ("s3", "2026-08-10T11:00:00Z"),
    ] {
        store
            .upsert_session(&session_record(
                session,
                &format!("task-{session}"),
                at(started),
            ))
            .await
            .unwrap();
    }
    for (turn, session, started) in [
        ("t1", "s1", "2026-08-10T09:00:01Z"),
        ("t2", "s2", "2026-08-10T10:00:01Z"),
    ] {
        store
            .upsert_turn(&turn_record(
                turn,
                session,
                &format!("task-{session}"),
                at(started),
            ))
            .await
            .unwrap();
    }
    call(&store, "s1", Some("t1"), "a", "2026-08-10T09:00:02Z").await;
    call(&store, "s1", Some("t1"), "b", "2026-08-10T09:00:03Z").await;
    call(&store, "s2", Some("t2"), "c", "2026-08-10T10:00:02Z").await;
    call(&store, "s2", None, "d", "2026-08-10T10:30:00Z").await;
    store
        .upsert_usage(&UsageRecord {
            task_session_id: "s1".into(),
            task_id: "task-s1".into(),
            turn_id: Some("t1".into()),
            subagent_tool_call_id: Some("a".into()),
            agent_execution_id: None,
            response_id: "r1".into(),
            model: Some("claude-haiku-4-5".into()),
            tokens: TokenCounts {
                input_tokens: Some(10),
                output_tokens: Some(5),
                ..TokenCounts::default()
            },
            source: UsageSource::ClaudeLog,
            observed_at: at("2026-08-10T09:00:04Z"),
        })
        .await
        .unwrap();
    store
}

fn mark(receiver: &str, session: &str, key: ExportKey) -> ExportMark {
    ExportMark {
        receiver: receiver.into(),
        task_session_id: session.into(),
        key,
        trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
        span_id: "b7ad6b7169203331".into(),
        unsettled: false,
        exported_at: at("2026-08-10T12:00:00Z"),
    }
}

both_engines!(
    the_scope_selects_sessions_by_task_and_since,
    a_session_part_has_its_turns_rows_cells_and_marks,
    pending_sessions_are_those_with_a_span_not_taken,
    marks_are_written_once_per_receiver,
    an_existing_database_gets_the_table_by_the_named_step,
);

async fn the_scope_selects_sessions_by_task_and_since(db: TestDb) {
    let store = fixture(&db).await;
    let all = store
        .export_session_ids(&ExportScope::default())
        .await
        .unwrap();
    assert_eq!(all, ["s1", "s2"], "s3 has neither turns nor rows");
    let task = ExportScope {
        task_id: Some("task-s2".into()),
        ..ExportScope::default()
    };
    assert_eq!(store.export_session_ids(&task).await.unwrap(), ["s2"]);
    // t2 started at 10:00:01; d (no known turn) was observed at 10:30.
    let since = |t: &str| ExportScope {
        since: Some(at(t)),
        ..ExportScope::default()
    };
    assert_eq!(
        store
            .export_session_ids(&since("2026-08-10T10:00:00Z"))
            .await
            .unwrap(),
        ["s2"]
    );
    assert_eq!(
        store
            .export_session_ids(&since("2026-08-10T10:10:00Z"))
            .await
            .unwrap(),
        ["s2"],
        "d alone keeps s2 in"
    );
    assert!(
        store
            .export_session_ids(&since("2026-08-10T11:00:00Z"))
            .await
            .unwrap()
            .is_empty()
    );
    store.close().await;
}

async fn a_session_part_has_its_turns_rows_cells_and_marks(db: TestDb) {
    let store = fixture(&db).await;
    let part = store
        .export_session("s1", &ExportScope::default())
        .await
        .unwrap()
        .expect("s1 exists");
    assert_eq!(part.session.id, "s1");
    assert_eq!(part.turns.len(), 1);
    assert_eq!(part.turns[0].id, "t1");
    let calls: Vec<&str> = part.rows.iter().map(|r| r.tool_call_id.as_str()).collect();
    assert_eq!(calls, ["a", "b"], "AC-13 order");
    assert_eq!(part.cells.len(), 1);
    assert_eq!(part.cells[0].subagent_tool_call_id.as_deref(), Some("a"));
    assert_eq!(part.cells[0].totals.tokens.input_tokens, Some(10));
    assert!(part.exported.is_empty(), "no receiver, no marks");
    // Every turn and row, whatever the window: the tree needs them all.
    let later = ExportScope {
        since: Some(at("2026-08-10T09:30:00Z")),
        ..ExportScope::default()
    };
    let part = store.export_session("s1", &later).await.unwrap().unwrap();
    assert_eq!((part.turns.len(), part.rows.len()), (1, 2));
    assert!(
        store
            .export_session("gone", &ExportScope::default())
            .await
            .unwrap()
            .is_none()
    );
    store.close().await;
}

async fn pending_sessions_are_those_with_a_span_not_taken(db: TestDb) {
    let store = fixture(&db).await;
    let pending = |receiver: &str| ExportScope {
        pending_for: Some(receiver.into()),
        ..ExportScope::default()
    };
    let r = "http://127.0.0.1:6006/v1/traces";
    assert_eq!(
        store.export_session_ids(&pending(r)).await.unwrap(),
        ["s1", "s2"]
    );
    let s1_all = [
        mark(r, "s1", ExportKey::Turn("t1".into())),
        mark(r, "s1", ExportKey::Invocation("a".into())),
        mark(r, "s1", ExportKey::Invocation("b".into())),
    ];
    assert_eq!(store.record_exports(&s1_all[..2]).await.unwrap(), 2);
    assert_eq!(
        store.export_session_ids(&pending(r)).await.unwrap(),
        ["s1", "s2"],
        "b is not taken yet"
    );
    store.record_exports(&s1_all[2..]).await.unwrap();
    assert_eq!(store.export_session_ids(&pending(r)).await.unwrap(), ["s2"]);
    // s2: its turn and c, but d (of no known turn) is still pending.
    store
        .record_exports(&[
            mark(r, "s2", ExportKey::Turn("t2".into())),
            mark(r, "s2", ExportKey::Invocation("c".into())),
        ])
        .await
        .unwrap();
    assert_eq!(store.export_session_ids(&pending(r)).await.unwrap(), ["s2"]);
    store
        .record_exports(&[
            mark(r, "s2", ExportKey::Invocation("d".into())),
            mark(r, "s2", ExportKey::NoTurn),
        ])
        .await
        .unwrap();
    assert!(
        store
            .export_session_ids(&pending(r))
            .await
            .unwrap()
            .is_empty()
    );
    // Another receiver has taken nothing.
    assert_eq!(
        store
            .export_session_ids(&pending("http://other"))
            .await
            .unwrap(),
        ["s1", "s2"]
    );
    let part = store
        .export_session("s2", &pending(r))
        .await
        .unwrap()
        .unwrap();
    let keys: Vec<ExportKey> = part.exported.into_iter().collect();
    assert_eq!(
        keys,
        [
            ExportKey::Turn("t2".into()),
            ExportKey::Invocation("c".into()),
            ExportKey::Invocation("d".into()),
            ExportKey::NoTurn,
        ]
    );
    store.close().await;
}

async fn marks_are_written_once_per_receiver(db: TestDb) {
    let store = fixture(&db).await;
    let first = mark("r1", "s1", ExportKey::Invocation("a".into()));
    assert_eq!(
        store
            .record_exports(std::slice::from_ref(&first))
            .await
            .unwrap(),
        1
    );
    let again = ExportMark {
        span_id: "ffffffffffffffff".into(),
        unsettled: true,
        exported_at: at("2026-08-11T00:00:00Z"),
        ..first.clone()
    };
    assert_eq!(store.record_exports(&[again]).await.unwrap(), 0, "kept");
    let stored = store
        .query_i64(
            "SELECT COUNT(*) FROM otlp_exports WHERE span_id = 'b7ad6b7169203331' AND unsettled = 0",
        )
        .await
        .unwrap();
    assert_eq!(stored, 1, "the first export is the one remembered");
    // More marks than one statement holds, for two receivers.
    let many: Vec<ExportMark> = (0..600)
        .map(|n| {
            mark(
                if n % 2 == 0 { "r1" } else { "r2" },
                "s1",
                ExportKey::Invocation(format!("x{n}")),
            )
        })
        .collect();
    assert_eq!(store.record_exports(&many).await.unwrap(), 600);
    assert_eq!(
        store
            .query_i64("SELECT COUNT(*) FROM otlp_exports")
            .await
            .unwrap(),
        601
    );
    assert_eq!(
        ExportKey::parse("call:a"),
        Some(ExportKey::Invocation("a".into()))
    );
    assert_eq!(
        ExportKey::parse(&ExportKey::NoTurn.text()),
        Some(ExportKey::NoTurn)
    );
    assert_eq!(
        ExportKey::parse("turn:t:1"),
        Some(ExportKey::Turn("t:1".into()))
    );
    assert_eq!(ExportKey::parse("other"), None);
    store.close().await;
}

async fn an_existing_database_gets_the_table_by_the_named_step(db: TestDb) {
    let store = fixture(&db).await;
    let step = |steps: &[fanout_store::StepOutcome]| {
        steps
            .iter()
            .find(|s| s.name == "otlp_exports.create")
            .map(|s| s.status.clone())
    };
    assert_eq!(
        step(&store.migration_report().steps),
        Some(StepStatus::Applied { rows: 0 }),
        "a new database gets it at its first open"
    );
    // A database from before the table: everything but it.
    store.execute_raw("DROP TABLE otlp_exports").await.unwrap();
    store.close().await;
    let reopened = db.open().await.unwrap();
    assert_eq!(
        step(&reopened.migration_report().steps),
        Some(StepStatus::Applied { rows: 0 })
    );
    assert_eq!(
        reopened
            .record_exports(&[mark("r", "s1", ExportKey::NoTurn)])
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        step(&reopened.run_migrations().await),
        Some(StepStatus::AlreadyApplied),
        "idempotent"
    );
    reopened.close().await;
    let again = db.open().await.unwrap();
    assert_eq!(
        step(&again.migration_report().steps),
        Some(StepStatus::AlreadyApplied)
    );
    assert_eq!(
        again
            .query_i64("SELECT COUNT(*) FROM otlp_exports")
            .await
            .unwrap(),
        1,
        "the marks survive a reopen"
    );
    again.close().await;
}
