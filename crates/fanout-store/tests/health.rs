//! Writer health from the database alone (AC-28, AC-28a, AC-29, AC-24e).

use fanout_store::testing::{TestDb, session_record};
use fanout_store::{
    Engine, HealthVerdict, SqlStore, Store, SubagentRecord, Timestamp, both_engines,
};

async fn store(db: &TestDb) -> SqlStore {
    let store = db.open().await.unwrap();
    let at = Timestamp::parse("2026-08-10T08:00:00Z").unwrap();
    store
        .upsert_session(&session_record("s1", "task-1", at))
        .await
        .unwrap();
    store
}

/// Sets capture_since to a known instant, as if activation happened then.
async fn activate_at(store: &SqlStore, since: &str) {
    store
        .execute_raw(&format!(
            "UPDATE fanout_meta SET value = '{since}' WHERE key = 'subagent_context_capture_since'"
        ))
        .await
        .unwrap();
}

async fn message(store: &SqlStore, id: &str, tool_call_id: &str, created: &str) {
    let ts = match store.engine() {
        Engine::Sqlite => format!("'{created}'"),
        Engine::Postgres => format!("'{created}'::timestamptz"),
    };
    store
        .execute_raw(&format!(
            "INSERT INTO task_session_messages (id, task_session_id, task_id, author_type, type, content, metadata, created_at, updated_at) VALUES \
             ('{id}', 's1', 'task-1', 'agent', 'tool_call', 'Task', \
             '{{\"tool_call_id\":\"{tool_call_id}\",\"status\":\"completed\",\"normalized\":{{\"kind\":\"subagent_task\",\"subagent_task\":{{\"description\":\"d\",\"prompt\":\"\",\"subagent_type\":\"t\"}}}}}}', {ts}, {ts})"
        ))
        .await
        .unwrap();
}

async fn row(store: &SqlStore, tool_call_id: &str, observed: &str) {
    store
        .upsert_subagent(&SubagentRecord {
            task_session_id: "s1".into(),
            task_id: "task-1".into(),
            tool_call_id: tool_call_id.into(),
            agent_execution_id: Some("exec".into()),
            observed_at: Some(Timestamp::parse(observed).unwrap()),
            ..Default::default()
        })
        .await
        .unwrap();
}

both_engines!(
    counts_agree_after_live_writes,
    a_message_without_a_row_is_a_shortfall_of_one,
    excess_is_attributed_and_never_alarms,
    no_capture_since_means_no_verdict,
    nothing_written_since_activation_is_never_healthy,
    since_boundary_is_exact_to_the_microsecond,
);

const SINCE: &str = "2026-08-10T09:00:00.000000Z";

async fn counts_agree_after_live_writes(db: TestDb) {
    let store = store(&db).await;
    activate_at(&store, SINCE).await;
    for i in 1..=3 {
        let at = format!("2026-08-10T09:00:0{i}.000000Z");
        message(&store, &format!("m{i}"), &format!("tc{i}"), &at).await;
        row(&store, &format!("tc{i}"), &at).await;
    }
    let health = store.health().await.unwrap();
    let f = health.figures.clone().unwrap();
    assert_eq!((f.shortfall, f.excess), (0, 0));
    assert_eq!(
        f.last_observed_at.unwrap().canonical(),
        "2026-08-10T09:00:03.000000Z"
    );
    assert_eq!(health.verdict(), HealthVerdict::Healthy);
}

async fn a_message_without_a_row_is_a_shortfall_of_one(db: TestDb) {
    let store = store(&db).await;
    activate_at(&store, SINCE).await;
    message(&store, "m1", "tc1", "2026-08-10T09:00:01Z").await;
    row(&store, "tc1", "2026-08-10T09:00:01Z").await;
    message(&store, "m2", "tc2", "2026-08-10T09:00:02Z").await;
    // A duplicate message for the same key counts once.
    message(&store, "m2b", "tc2", "2026-08-10T09:00:03Z").await;
    let health = store.health().await.unwrap();
    let f = health.figures.clone().unwrap();
    assert_eq!(f.shortfall, 1);
    assert_eq!(f.excess, 0);
    assert_eq!(
        f.last_observed_at.unwrap().canonical(),
        "2026-08-10T09:00:01.000000Z"
    );
    assert_eq!(health.verdict(), HealthVerdict::Shortfall);
}

async fn excess_is_attributed_and_never_alarms(db: TestDb) {
    let store = store(&db).await;
    activate_at(&store, SINCE).await;
    row(&store, "orphan", "2026-08-10T09:00:01Z").await;
    let health = store.health().await.unwrap();
    let f = health.figures.clone().unwrap();
    assert_eq!((f.shortfall, f.excess), (0, 1));
    assert_eq!(
        health.verdict(),
        HealthVerdict::Healthy,
        "excess never alarms"
    );
    // No netting: an unmatched message on top is a shortfall of one, excess still one.
    message(&store, "m1", "other", "2026-08-10T09:00:02Z").await;
    let f = store.health().await.unwrap().figures.unwrap();
    assert_eq!((f.shortfall, f.excess), (1, 1));
}

async fn no_capture_since_means_no_verdict(db: TestDb) {
    let store = store(&db).await;
    store
        .execute_raw("DELETE FROM fanout_meta WHERE key = 'subagent_context_capture_since'")
        .await
        .unwrap();
    message(&store, "m1", "tc1", "2026-08-10T09:00:01Z").await;
    let health = store.health().await.unwrap();
    assert_eq!(health.figures, None);
    assert_eq!(health.verdict(), HealthVerdict::NoVerdict);
    assert_eq!(health.activation.capture_since, None);
}

async fn nothing_written_since_activation_is_never_healthy(db: TestDb) {
    let store = store(&db).await;
    activate_at(&store, SINCE).await;
    // Only history before activation exists.
    row(&store, "old", "2020-01-01T00:00:00Z").await;
    let health = store.health().await.unwrap();
    let f = health.figures.clone().unwrap();
    assert_eq!(
        f.last_observed_at, None,
        "scoped to since, an old row does not count"
    );
    assert_eq!(
        health.verdict(),
        HealthVerdict::NoVerdict,
        "nothing written since activation"
    );
}

/// Activation at [`SINCE`]; a message and a row one microsecond before it (outside the
/// window on both sides) and a message and a row exactly at it (inside).
async fn seed_boundary(store: &SqlStore) {
    activate_at(store, SINCE).await;
    let before = "2026-08-10T08:59:59.999999Z";
    message(store, "m-before", "tc-before", before).await;
    row(store, "tc-before-row", before).await;
    message(store, "m-at", "tc-at", SINCE).await;
    row(store, "tc-at-row", SINCE).await;
}

async fn since_boundary_is_exact_to_the_microsecond(db: TestDb) {
    let store = store(&db).await;
    seed_boundary(&store).await;
    let f = store.health().await.unwrap().figures.unwrap();
    assert_eq!(f.shortfall, 1, "only the message at since is in scope");
    assert_eq!(f.excess, 1, "only the row at since is in scope");
    assert_eq!(f.last_observed_at.unwrap().canonical(), SINCE);
}

/// PostgreSQL only: the same boundary under session time zones far from UTC
/// (UTC-10 and UTC+14), which must not move the window (AC-24e).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_health_ignores_session_time_zone() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    // Seed in UTC.
    {
        let store = store(&db).await;
        seed_boundary(&store).await;
        message(&store, "m-late", "tc-late", "2026-08-10T19:00:00Z").await;
        row(&store, "tc-late", "2026-08-10T19:00:00Z").await;
        store.close().await;
    }
    for zone in ["Pacific/Honolulu", "Pacific/Kiritimati"] {
        // Read as `fanout health`/`report` read: a read-only store.
        let options = fanout_store::OpenOptions {
            postgres_session_time_zone: Some(zone.to_owned()),
            read_only: true,
            ..fanout_store::OpenOptions::default()
        };
        let store = SqlStore::open_with(&db.url, &options).await.unwrap();
        let zone_now: i64 = store
            .query_i64(&format!(
                "SELECT CASE WHEN current_setting('TimeZone') = '{zone}' THEN 1 ELSE 0 END::bigint"
            ))
            .await
            .unwrap();
        assert_eq!(zone_now, 1, "the session really runs in {zone}");
        let f = store.health().await.unwrap().figures.unwrap();
        assert_eq!(f.shortfall, 1, "{zone}: one in-scope message without a row");
        assert_eq!(f.excess, 1, "{zone}: one in-scope row without a message");
        assert_eq!(
            f.last_observed_at.unwrap().canonical(),
            "2026-08-10T19:00:00.000000Z",
            "{zone}"
        );
        let rows = store.subagents_by_session("s1").await.unwrap();
        assert_eq!(
            rows.iter()
                .map(|r| r.observed_at.canonical())
                .collect::<Vec<_>>(),
            vec![
                "2026-08-10T08:59:59.999999Z",
                "2026-08-10T09:00:00.000000Z",
                "2026-08-10T19:00:00.000000Z"
            ],
            "{zone}: reads render UTC"
        );
        store.close().await;
    }
}
