//! Migration and backfill (AC-17…AC-24), on SQLite and PostgreSQL alike.

use std::sync::Arc;

use fanout_store::testing::{LogCapture, TestDb, session_record, turn_record};
use fanout_store::{Engine, SqlStore, StepStatus, Store, SubagentRecord, Timestamp, both_engines};

async fn seed_session(store: &SqlStore) {
    let at = Timestamp::parse("2026-08-10T08:00:00Z").unwrap();
    store
        .upsert_session(&session_record("s1", "task-1", at))
        .await
        .unwrap();
    store
        .upsert_turn(&turn_record("turn-1", "s1", "task-1", at))
        .await
        .unwrap();
}

/// Inserts a message row verbatim; `metadata` is SQL text (so tests can pass NULL).
async fn insert_message(
    store: &SqlStore,
    id: &str,
    task_id: &str,
    metadata_sql: &str,
    created: &str,
    updated: &str,
) {
    let ts = |v: &str| match store.engine() {
        Engine::Sqlite => format!("'{v}'"),
        Engine::Postgres => format!("'{v}'::timestamptz"),
    };
    store
        .execute_raw(&format!(
            "INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, type, content, metadata, created_at, updated_at) \
             VALUES ('{id}', 's1', '{task_id}', 'turn-1', 'agent', 'tool_call', 'Task', {metadata_sql}, {}, {})",
            ts(created),
            ts(updated)
        ))
        .await
        .unwrap();
}

fn subagent_metadata(tool_call_id: &str, status: &str, task: &str) -> String {
    format!(
        r#"'{{"tool_call_id":"{tool_call_id}","title":"Task","status":"{status}","normalized":{{"kind":"subagent_task","subagent_task":{task}}}}}'"#
    )
}

/// A completed, plain subagent message (no metrics) created and updated at `created`.
async fn insert_plain(
    store: &SqlStore,
    id: &str,
    task_id: &str,
    tool_call_id: &str,
    created: &str,
) {
    let task = r#"{"description":"d","prompt":"","subagent_type":"t"}"#;
    let metadata = subagent_metadata(tool_call_id, "completed", task);
    insert_message(store, id, task_id, &metadata, created, created).await;
}

/// A store with a session and turn and NO activation keys, as a pre-fanout database.
async fn unactivated(db: &TestDb) -> SqlStore {
    let store = db.open().await.unwrap();
    seed_session(&store).await;
    store
        .execute_raw("DELETE FROM fanout_meta WHERE key LIKE 'subagent_context_%'")
        .await
        .unwrap();
    store
}

async fn rerun(store: &SqlStore) -> StepStatus {
    let steps = store.run_migrations().await;
    assert_eq!(steps[0].name, "task_session_subagents.backfill");
    steps[0].status.clone()
}

both_engines!(
    schema_is_idempotent_and_migrations_rerun_as_no_ops,
    async_launched_message_backfills_with_null_metrics,
    zero_tool_count_negative_and_empty_values,
    malformed_metadata_does_not_abort,
    non_terminal_message_leaves_settled_at_null,
    live_row_wins_and_siblings_still_backfill,
    messages_without_identity_are_skipped,
    newest_duplicate_message_wins,
    keys_are_written_once_as_rfc3339,
    capture_since_is_sampled_after_the_backfill_insert,
    backfill_through_is_empty_without_messages,
    no_rescan_once_activated,
    a_backfill_that_lost_the_activation_race_inserts_nothing,
    partial_key_pair_is_completed_next_start,
    failing_step_logs_its_name_and_writes_no_key,
    newer_schema_is_refused_and_left_untouched,
    a_read_only_open_changes_nothing,
);

async fn schema_is_idempotent_and_migrations_rerun_as_no_ops(db: TestDb) {
    let store = db.open().await.unwrap();
    seed_session(&store).await;
    store
        .upsert_subagent(&SubagentRecord {
            task_session_id: "s1".into(),
            task_id: "task-1".into(),
            tool_call_id: "tc".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let before = store.counts().await.unwrap();
    store.close().await;
    let again = db.open().await.unwrap();
    assert_eq!(
        again.migration_report().steps[0].status,
        StepStatus::AlreadyApplied
    );
    assert_eq!(rerun(&again).await, StepStatus::AlreadyApplied);
    assert_eq!(again.counts().await.unwrap(), before);
    let index_sql = match again.engine() {
        Engine::Sqlite => {
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name IN ('idx_subagents_session_id', 'idx_subagents_task_id', 'idx_subagents_turn_id')"
        }
        Engine::Postgres => {
            "SELECT COUNT(*) FROM pg_indexes WHERE indexname IN ('idx_subagents_session_id', 'idx_subagents_task_id', 'idx_subagents_turn_id')"
        }
    };
    assert_eq!(again.query_i64(index_sql).await.unwrap(), 3);
    // The unique key rejects a duplicate (session, default execution, tool_call_id).
    let dup = again
        .execute_raw("INSERT INTO task_session_subagents (id, task_session_id, task_id, tool_call_id, observed_at, updated_at) VALUES ('other', 's1', 'task-1', 'tc', '2026-08-10T09:00:00Z', '2026-08-10T09:00:00Z')")
        .await;
    let err = dup
        .expect_err("the (session, execution, tool_call_id) key is unique")
        .to_string();
    assert!(err.to_lowercase().contains("unique"), "{err}");
}

async fn async_launched_message_backfills_with_null_metrics(db: TestDb) {
    let store = unactivated(&db).await;
    insert_message(
        &store,
        "m-async",
        "task-1",
        &subagent_metadata(
            "toolu_03",
            "completed",
            r#"{"description":"style pass","prompt":"p","subagent_type":"style-reviewer","status":"async_launched","agent_id":"c7","model":"opus","child_session_id":"child-1","is_async":true,"output_file":"/tmp/x"}"#,
        ),
        "2026-08-10T09:00:00.000001Z",
        "2026-08-10T09:00:05.000002Z",
    )
    .await;
    assert_eq!(rerun(&store).await, StepStatus::Applied { rows: 1 });
    let rows = store.subagents_by_session("s1").await.unwrap();
    let row = &rows[0];
    assert_eq!(row.id, "m-async");
    assert_eq!(row.task_id, "task-1");
    assert_eq!(row.turn_id.as_deref(), Some("turn-1"));
    assert_eq!(row.tool_call_id, "toolu_03");
    assert_eq!(row.agent_execution_id, "unknown");
    assert_eq!(row.subagent_type.as_deref(), Some("style-reviewer"));
    assert_eq!(row.description.as_deref(), Some("style pass"));
    assert_eq!(row.agent_id.as_deref(), Some("c7"));
    assert_eq!(row.model.as_deref(), Some("opus"));
    assert_eq!(row.child_session_id.as_deref(), Some("child-1"));
    assert_eq!(row.agent_status.as_deref(), Some("async_launched"));
    assert_eq!(row.tool_status.as_deref(), Some("completed"));
    assert!(row.is_async);
    assert_eq!(
        (row.total_tokens, row.tool_use_count, row.duration_ms),
        (None, None, None)
    );
    assert_eq!(
        store
            .query_i64("SELECT COUNT(*) FROM task_session_subagents WHERE total_tokens IS NULL AND tool_use_count IS NULL AND duration_ms IS NULL")
            .await
            .unwrap(),
        1
    );
    assert_eq!(row.source, fanout_store::Source::Backfill);
    assert_eq!(row.observed_at.canonical(), "2026-08-10T09:00:00.000001Z");
    assert_eq!(
        row.settled_at.map(|t| t.canonical()).as_deref(),
        Some("2026-08-10T09:00:05.000002Z")
    );
}

async fn zero_tool_count_negative_and_empty_values(db: TestDb) {
    let store = unactivated(&db).await;
    insert_message(
        &store,
        "m-zero",
        "task-1",
        &subagent_metadata("tc-zero", "completed", r#"{"description":"d","prompt":"","subagent_type":"t","tool_use_count":0,"total_tokens":1500}"#),
        "2026-08-10T09:00:00Z",
        "2026-08-10T09:00:00Z",
    )
    .await;
    insert_message(
        &store,
        "m-neg",
        "task-1",
        &subagent_metadata("tc-neg", "completed", r#"{"description":"d","prompt":"","subagent_type":"t","total_tokens":-5,"duration_ms":1200,"tool_use_count":2.9}"#),
        "2026-08-10T09:00:01Z",
        "2026-08-10T09:00:01Z",
    )
    .await;
    insert_message(
        &store,
        "m-empty",
        "task-1",
        &subagent_metadata("tc-empty", "", r#"{"description":"","prompt":"","subagent_type":"","model":"","agent_id":"","total_tokens":"lots"}"#),
        "2026-08-10T09:00:02Z",
        "2026-08-10T09:00:02Z",
    )
    .await;
    assert_eq!(rerun(&store).await, StepStatus::Applied { rows: 3 });
    let rows = store.subagents_by_session("s1").await.unwrap();
    let get = |tc: &str| rows.iter().find(|r| r.tool_call_id == tc).unwrap();
    assert_eq!(get("tc-zero").tool_use_count, Some(0));
    assert_eq!(get("tc-zero").total_tokens, Some(1500));
    assert_eq!(get("tc-neg").total_tokens, None, "negative -> NULL");
    assert_eq!(get("tc-neg").duration_ms, Some(1200), "others intact");
    assert_eq!(
        get("tc-neg").tool_use_count,
        Some(2),
        "numbers truncate to integers"
    );
    let empty = get("tc-empty");
    assert_eq!(
        (
            &empty.description,
            &empty.subagent_type,
            &empty.model,
            &empty.agent_id,
            &empty.tool_status
        ),
        (&None, &None, &None, &None, &None)
    );
    assert_eq!(empty.total_tokens, None, "a non-number is absent");
    assert_eq!(empty.settled_at, None);
}

async fn malformed_metadata_does_not_abort(db: TestDb) {
    let store = unactivated(&db).await;
    // Make room for NULL metadata, as an older or foreign writer might have left it.
    match store.engine() {
        Engine::Postgres => {
            store
                .execute_raw(
                    "ALTER TABLE task_session_messages ALTER COLUMN metadata DROP NOT NULL",
                )
                .await
                .unwrap();
        }
        Engine::Sqlite => {
            for statement in [
                "ALTER TABLE task_session_messages RENAME TO old_messages",
                "CREATE TABLE task_session_messages (id TEXT PRIMARY KEY, task_session_id TEXT NOT NULL, task_id TEXT, turn_id TEXT, author_type TEXT, type TEXT, content TEXT, metadata TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)",
                "DROP TABLE old_messages",
            ] {
                store.execute_raw(statement).await.unwrap();
            }
        }
    }
    for (id, metadata) in [
        ("m-null", "NULL"),
        ("m-empty", "''"),
        ("m-nulltext", "'null'"),
    ] {
        insert_message(
            &store,
            id,
            "task-1",
            metadata,
            "2026-08-10T09:00:00Z",
            "2026-08-10T09:00:00Z",
        )
        .await;
    }
    insert_message(
        &store,
        "m-good",
        "task-1",
        &subagent_metadata(
            "tc-good",
            "completed",
            r#"{"description":"ok","prompt":"","subagent_type":"t","is_async":1}"#,
        ),
        "2026-08-10T09:00:01Z",
        "2026-08-10T09:00:01Z",
    )
    .await;
    assert_eq!(rerun(&store).await, StepStatus::Applied { rows: 1 });
    let rows = store.subagents_by_session("s1").await.unwrap();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].is_async, "1 is async");
    assert!(store.activation().await.unwrap().is_active());
}

async fn non_terminal_message_leaves_settled_at_null(db: TestDb) {
    let store = unactivated(&db).await;
    insert_message(
        &store,
        "m-open",
        "task-1",
        &subagent_metadata(
            "tc-open",
            "started",
            r#"{"description":"d","prompt":"","subagent_type":"t","status":"running"}"#,
        ),
        "2026-08-10T09:00:00Z",
        "2026-08-10T09:00:09Z",
    )
    .await;
    rerun(&store).await;
    let row = &store.subagents_by_session("s1").await.unwrap()[0];
    assert_eq!(row.tool_status.as_deref(), Some("started"));
    assert_eq!(row.agent_status.as_deref(), Some("running"));
    assert_eq!(row.settled_at, None);
}

async fn live_row_wins_and_siblings_still_backfill(db: TestDb) {
    let store = unactivated(&db).await;
    store
        .upsert_subagent(&SubagentRecord {
            task_session_id: "s1".into(),
            task_id: "task-1".into(),
            tool_call_id: "tc-live".into(),
            model: Some("live-model".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    for (id, tc) in [("m-live", "tc-live"), ("m-sibling", "tc-sibling")] {
        insert_message(
            &store,
            id,
            "task-1",
            &subagent_metadata(
                tc,
                "completed",
                r#"{"description":"d","prompt":"","subagent_type":"t","model":"backfill-model"}"#,
            ),
            "2026-08-10T09:00:00Z",
            "2026-08-10T09:00:00Z",
        )
        .await;
    }
    assert_eq!(rerun(&store).await, StepStatus::Applied { rows: 1 });
    let rows = store.subagents_by_session("s1").await.unwrap();
    assert_eq!(rows.len(), 2);
    let live = rows.iter().find(|r| r.tool_call_id == "tc-live").unwrap();
    assert_eq!(live.source, fanout_store::Source::Live);
    assert_eq!(live.model.as_deref(), Some("live-model"));
    let sibling = rows
        .iter()
        .find(|r| r.tool_call_id == "tc-sibling")
        .unwrap();
    assert_eq!(sibling.source, fanout_store::Source::Backfill);
}

async fn messages_without_identity_are_skipped(db: TestDb) {
    let store = unactivated(&db).await;
    insert_plain(&store, "m-notask", "", "tc-1", "2026-08-10T09:00:00Z").await;
    insert_plain(&store, "m-notool", "task-1", "", "2026-08-10T09:00:00Z").await;
    insert_message(
        &store,
        "m-notsubagent",
        "task-1",
        r#"'{"tool_call_id":"tc-2","title":"Bash","status":"completed","normalized":{"kind":"execute"}}'"#,
        "2026-08-10T09:00:00Z",
        "2026-08-10T09:00:00Z",
    )
    .await;
    assert_eq!(rerun(&store).await, StepStatus::Applied { rows: 0 });
    assert!(store.subagents_by_session("s1").await.unwrap().is_empty());
}

async fn newest_duplicate_message_wins(db: TestDb) {
    let store = unactivated(&db).await;
    for (id, created, model) in [
        ("m-a", "2026-08-10T09:00:00.000001Z", "oldest"),
        ("m-c", "2026-08-10T09:00:00.000002Z", "newest-by-id"),
        ("m-b", "2026-08-10T09:00:00.000002Z", "newest-lower-id"),
    ] {
        insert_message(
            &store,
            id,
            "task-1",
            &subagent_metadata(
                "tc-dup",
                "completed",
                &format!(
                    r#"{{"description":"d","prompt":"","subagent_type":"t","model":"{model}"}}"#
                ),
            ),
            created,
            created,
        )
        .await;
    }
    assert_eq!(rerun(&store).await, StepStatus::Applied { rows: 1 });
    let row = &store.subagents_by_session("s1").await.unwrap()[0];
    assert_eq!(row.id, "m-c");
    assert_eq!(row.model.as_deref(), Some("newest-by-id"));
}

async fn keys_are_written_once_as_rfc3339(db: TestDb) {
    let store = unactivated(&db).await;
    for (id, created) in [
        ("m-1", "2026-08-10T09:00:00.000001Z"),
        ("m-2", "2026-08-10T09:30:00.250000Z"),
    ] {
        insert_plain(&store, id, "task-1", id, created).await;
    }
    let before_run = Timestamp::now();
    rerun(&store).await;
    let keys = store.activation().await.unwrap();
    let since = Timestamp::parse(keys.capture_since.as_deref().unwrap())
        .expect("capture_since is RFC 3339");
    assert!(
        since >= before_run,
        "capture_since is sampled at the backfill"
    );
    assert_eq!(
        keys.backfill_through.as_deref(),
        Some("2026-08-10T09:30:00.250000Z")
    );
    Timestamp::parse(keys.backfill_through.as_deref().unwrap())
        .expect("backfill_through is RFC 3339");
    assert_eq!(rerun(&store).await, StepStatus::AlreadyApplied);
    assert_eq!(store.activation().await.unwrap(), keys, "written once");
}

/// AC-24: `capture_since` is sampled after the backfill's INSERT, not before it. A
/// trigger notes the database clock (same host, same wall clock) for every row the
/// INSERT writes, and `capture_since` must be later than every note. PostgreSQL's
/// `clock_timestamp()` has microseconds. SQLite's clock has milliseconds and stands
/// still within one statement (it is read once, at the first row), so there the
/// trigger also spins per row: the INSERT ends milliseconds after its clock was read,
/// and only a `capture_since` sampled after the INSERT falls in a later millisecond.
async fn capture_since_is_sampled_after_the_backfill_insert(db: TestDb) {
    let store = unactivated(&db).await;
    for (id, created) in [
        ("m-1", "2026-08-10T09:00:00Z"),
        ("m-2", "2026-08-10T09:00:01Z"),
        ("m-3", "2026-08-10T09:00:02Z"),
    ] {
        insert_plain(&store, id, "task-1", id, created).await;
    }
    let (setup, clock_unit_micros): (&[&str], i64) = match store.engine() {
        Engine::Sqlite => (
            &[
                "CREATE TABLE insert_clock (at INTEGER NOT NULL)",
                "CREATE TABLE spin AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 400) SELECT x FROM n",
                "CREATE TRIGGER note_insert_clock AFTER INSERT ON task_session_subagents BEGIN \
                 INSERT INTO insert_clock SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) \
                 FROM (SELECT COUNT(*) FROM spin a, spin b); END",
            ],
            1_000,
        ),
        Engine::Postgres => (
            &[
                "CREATE TABLE insert_clock (at BIGINT NOT NULL)",
                "CREATE FUNCTION note_insert_clock() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 INSERT INTO insert_clock VALUES ((EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint); \
                 RETURN NEW; END $$",
                "CREATE TRIGGER note_insert_clock AFTER INSERT ON task_session_subagents \
                 FOR EACH ROW EXECUTE FUNCTION note_insert_clock()",
            ],
            1,
        ),
    };
    for statement in setup {
        store.execute_raw(statement).await.unwrap();
    }
    assert_eq!(rerun(&store).await, StepStatus::Applied { rows: 3 });
    let clock = |sql| store.query_i64(sql);
    assert_eq!(clock("SELECT COUNT(*) FROM insert_clock").await.unwrap(), 3);
    let last_insert = clock("SELECT MAX(at) FROM insert_clock").await.unwrap();
    let keys = store.activation().await.unwrap();
    let since = Timestamp::parse(keys.capture_since.as_deref().unwrap()).unwrap();
    assert!(
        since.unix_micros().div_euclid(clock_unit_micros) > last_insert,
        "capture_since {since} must be later than the INSERT (its clock read {last_insert}, in units of {clock_unit_micros} µs)"
    );
}

async fn backfill_through_is_empty_without_messages(db: TestDb) {
    let store = db.open().await.unwrap();
    let keys = store.activation().await.unwrap();
    assert!(keys.is_active());
    assert_eq!(keys.backfill_through.as_deref(), Some(""));
}

async fn no_rescan_once_activated(db: TestDb) {
    let store = unactivated(&db).await;
    insert_plain(&store, "m-1", "task-1", "tc-1", "2026-08-10T09:00:00Z").await;
    rerun(&store).await;
    store
        .execute_raw("DELETE FROM task_session_subagents")
        .await
        .unwrap();
    insert_plain(&store, "m-2", "task-1", "tc-2", "2026-08-10T09:00:01Z").await;
    assert_eq!(rerun(&store).await, StepStatus::AlreadyApplied);
    store.close().await;
    let reopened = db.open().await.unwrap();
    assert!(
        reopened
            .subagents_by_session("s1")
            .await
            .unwrap()
            .is_empty(),
        "neither restored nor scanned"
    );
}

/// A store that read the activation keys before another store activated the database
/// runs its backfill after that store began capturing: the statement itself must see
/// the keys and leave the live messages alone (two proxies and an import opening one
/// new file together made a second row, of execution `unknown`, for a live call).
async fn a_backfill_that_lost_the_activation_race_inserts_nothing(db: TestDb) {
    let store = db.open().await.unwrap();
    assert!(store.activation().await.unwrap().is_active());
    seed_session(&store).await;
    // Live capture after activation: a subagent launch message.
    insert_plain(&store, "m-1", "task-1", "tc-1", "2026-08-10T09:00:00Z").await;
    // The late store's backfill statement, exactly as its migration step runs it.
    let inserted = store
        .execute_raw(&store.backfill_statement())
        .await
        .unwrap();
    assert_eq!(inserted, 0);
    assert!(store.subagents_by_session("s1").await.unwrap().is_empty());
}

async fn partial_key_pair_is_completed_next_start(db: TestDb) {
    let store = unactivated(&db).await;
    store
        .execute_raw("INSERT INTO fanout_meta (key, value) VALUES ('subagent_context_capture_since', '2020-01-01T00:00:00Z')")
        .await
        .unwrap();
    assert!(matches!(rerun(&store).await, StepStatus::Applied { .. }));
    let keys = store.activation().await.unwrap();
    assert_eq!(
        keys.capture_since.as_deref(),
        Some("2020-01-01T00:00:00Z"),
        "the present key is kept byte for byte"
    );
    assert_eq!(keys.backfill_through.as_deref(), Some(""));
    // The other half missing works the same way.
    store
        .execute_raw("DELETE FROM fanout_meta WHERE key = 'subagent_context_capture_since'")
        .await
        .unwrap();
    assert!(matches!(rerun(&store).await, StepStatus::Applied { .. }));
    let keys = store.activation().await.unwrap();
    assert!(keys.is_active());
    assert_eq!(keys.backfill_through.as_deref(), Some(""));
}

async fn failing_step_logs_its_name_and_writes_no_key(db: TestDb) {
    let store = unactivated(&db).await;
    insert_plain(&store, "m-1", "task-1", "tc-1", "2026-08-10T09:00:00Z").await;
    // Break the INSERT: the column it writes last no longer exists.
    store
        .execute_raw("ALTER TABLE task_session_subagents DROP COLUMN updated_at")
        .await
        .unwrap();
    store.close().await;

    let logs = LogCapture::default();
    let reopened = {
        let _guard = logs.install();
        // Start-up goes on despite the failed step.
        let store = db
            .open()
            .await
            .expect("a failed migration step never aborts start-up");
        let steps = store.migration_report().steps.clone();
        assert!(
            matches!(steps[0].status, StepStatus::Failed { .. }),
            "{steps:?}"
        );
        store
    };
    let text = logs.text();
    assert!(text.contains("WARN"), "{text}");
    assert!(text.contains("migration failed"), "{text}");
    assert!(
        text.contains("task_session_subagents.backfill"),
        "the step is named: {text}"
    );
    let keys = reopened.activation().await.unwrap();
    assert_eq!(keys.capture_since, None);
    assert_eq!(keys.backfill_through, None);
}

async fn newer_schema_is_refused_and_left_untouched(db: TestDb) {
    let store = db.open().await.unwrap();
    seed_session(&store).await;
    store
        .execute_raw("UPDATE fanout_meta SET value = '99' WHERE key = 'schema_version'")
        .await
        .unwrap();
    store.close().await;
    let err = match db.open().await {
        Ok(_) => panic!("a newer schema must be refused"),
        Err(err) => err.to_string(),
    };
    assert!(err.contains("newer fanout"), "{err}");
    assert!(err.contains("99"), "{err}");
    // Nothing was touched: read the raw file/database with a plain connection.
    use sqlx::Connection;
    const CHECK: &str = "SELECT value, (SELECT COUNT(*) FROM task_sessions) \
                         FROM fanout_meta WHERE key = 'schema_version'";
    let check: (String, i64) = if db.url.starts_with("sqlite://") {
        let mut conn = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
        sqlx::query_as(CHECK).fetch_one(&mut conn).await.unwrap()
    } else {
        let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
        sqlx::query_as(CHECK).fetch_one(&mut conn).await.unwrap()
    };
    assert_eq!(check, ("99".to_owned(), 1));
}

fn read_only() -> fanout_store::OpenOptions {
    fanout_store::OpenOptions {
        read_only: true,
        ..fanout_store::OpenOptions::default()
    }
}

/// What `fanout health`/`report` open: an unactivated database with a pending backfill
/// stays exactly so (no backfill, no keys), and reads as "no verdict" (AC-28a).
async fn a_read_only_open_changes_nothing(db: TestDb) {
    let store = unactivated(&db).await;
    insert_plain(&store, "m1", "task-1", "tc-1", "2026-08-10T09:00:00Z").await;
    store.close().await;

    let reader = SqlStore::open_with(&db.url, &read_only()).await.unwrap();
    assert!(
        reader.migration_report().steps.is_empty(),
        "no migration ran"
    );
    let health = reader.health().await.unwrap();
    assert_eq!(health.figures, None, "no capture_since: no verdict");
    assert_eq!(
        reader.counts().await.unwrap().subagents,
        0,
        "nothing backfilled"
    );
    let keys = reader.activation().await.unwrap();
    assert_eq!((keys.capture_since, keys.backfill_through), (None, None));
    if reader.engine() == Engine::Postgres {
        // The server refuses writes on a reader's sessions.
        let err = reader
            .execute_raw("DELETE FROM task_session_messages")
            .await
            .expect_err("a read-only PostgreSQL session refuses writes");
        assert!(err.to_string().contains("read-only"), "{err}");
    }
    reader.close().await;

    // A writer opening it afterwards still finds the backfill to do.
    let writer = db.open().await.unwrap();
    assert_eq!(writer.counts().await.unwrap().subagents_backfill, 1);
}

/// Two stores activating one database at the same moment (two proxies starting
/// together): both steps succeed, every message is backfilled once, and each key is
/// written once. PostgreSQL: the two INSERT … SELECTs race on the rows' ids, the
/// primary key their conflict clause does not arbitrate; without the retry, 16 of 20
/// runs of 40 rounds lost one. SQLite: the two writers meet on the file's write lock;
/// with a deferred `BEGIN` the later step's read-then-write transaction could not wait
/// for it and failed "database is locked" (AC-20 retried it only at the next open);
/// `BEGIN IMMEDIATE` waits for the lock within the busy timeout instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_activations_both_succeed_on_postgres() {
    if let Some(db) = TestDb::postgres().await {
        concurrent_activations_both_succeed(db).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_activations_both_succeed_on_sqlite() {
    concurrent_activations_both_succeed(TestDb::sqlite()).await;
}

async fn concurrent_activations_both_succeed(db: TestDb) {
    const MESSAGES: usize = 40;
    const ROUNDS: usize = 100;
    let first = Arc::new(db.open().await.unwrap());
    let second = Arc::new(db.open().await.unwrap());
    seed_session(&first).await;
    for i in 0..MESSAGES {
        insert_plain(
            &first,
            &format!("m{i}"),
            "task-1",
            &format!("tc{i}"),
            "2026-08-10T09:00:00Z",
        )
        .await;
    }
    for round in 0..ROUNDS {
        first
            .execute_raw("DELETE FROM fanout_meta WHERE key LIKE 'subagent_context_%'")
            .await
            .unwrap();
        first
            .execute_raw("DELETE FROM task_session_subagents")
            .await
            .unwrap();
        let start = Arc::new(tokio::sync::Barrier::new(2));
        let activate = |store: Arc<SqlStore>| {
            let start = Arc::clone(&start);
            tokio::spawn(async move {
                start.wait().await;
                store.run_migrations().await
            })
        };
        let (a, b) = (activate(Arc::clone(&first)), activate(Arc::clone(&second)));
        let mut inserted = 0;
        for steps in [a.await.unwrap(), b.await.unwrap()] {
            match &steps[0].status {
                StepStatus::Applied { rows } => inserted += rows,
                StepStatus::AlreadyApplied => {}
                StepStatus::Failed { error } => panic!("round {round}: a step failed: {error}"),
            }
        }
        assert_eq!(inserted, MESSAGES as u64, "round {round}: each row once");
        assert_eq!(
            first
                .query_i64("SELECT COUNT(*) FROM task_session_subagents")
                .await
                .unwrap(),
            MESSAGES as i64
        );
        let activation = first.activation().await.unwrap();
        assert!(activation.is_active(), "round {round}: {activation:?}");
    }
}
