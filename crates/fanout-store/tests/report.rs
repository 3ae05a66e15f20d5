//! The fan-out report (AC-25, AC-7), on SQLite and PostgreSQL alike: the distribution,
//! NULL-aware statistics, breakdowns, nesting, provenance, the unknown-fan-out window and
//! every scope.

use fanout_store::testing::{TestDb, session_record, subagent_message_record, turn_record};
use fanout_store::{
    CountBy, FanoutReport, ReportScope, SqlStore, Store, SubagentRecord, Timestamp, both_engines,
};

both_engines!(
    distribution_counts_turns_with_zero_one_and_three_subagents,
    rows_outside_any_turn_are_counted_apart,
    unreported_metrics_are_never_zero,
    breakdowns_by_type_and_model_show_unreported,
    nesting_depth_follows_parents_in_the_session,
    provenance_splits_live_and_backfill_and_counts_a_twin_once,
    turns_before_backfill_through_without_live_rows_have_unknown_fanout,
    nothing_backfilled_means_no_unknown_window,
    scopes_select_by_task_session_and_window,
    an_empty_database_reports_nothing_and_no_statistics,
);

/// 2026-08-10T09:00:00Z plus `seconds`.
fn at(seconds: i64) -> Timestamp {
    Timestamp::parse("2026-08-10T09:00:00Z")
        .unwrap()
        .plus_micros(seconds * 1_000_000)
}

async fn session(store: &SqlStore, id: &str, task: &str) {
    store
        .upsert_session(&session_record(id, task, at(0)))
        .await
        .unwrap();
}

async fn turn(store: &SqlStore, id: &str, session: &str, task: &str, started: i64) {
    store
        .upsert_turn(&turn_record(id, session, task, at(started)))
        .await
        .unwrap();
}

/// A live frame of session `s1`, task `task-1`, execution `exec-1`.
fn live(tool_call_id: &str, turn: Option<&str>, observed: i64) -> SubagentRecord {
    SubagentRecord {
        task_session_id: "s1".into(),
        task_id: "task-1".into(),
        turn_id: turn.map(Into::into),
        tool_call_id: tool_call_id.into(),
        agent_execution_id: Some("exec-1".into()),
        observed_at: Some(at(observed)),
        ..Default::default()
    }
}

async fn write(store: &SqlStore, records: impl IntoIterator<Item = SubagentRecord>) {
    for record in records {
        store.upsert_subagent(&record).await.unwrap();
    }
}

/// A subagent tool-call message of `s1` in `turn`, as a pre-fanout writer left it.
async fn subagent_message(store: &SqlStore, tool_call_id: &str, turn: &str, created: i64) {
    store
        .upsert_message(&subagent_message_record(
            "s1",
            "task-1",
            turn,
            tool_call_id,
            at(created),
        ))
        .await
        .unwrap();
}

/// Runs the backfill again over the messages written so far, as the first start of
/// fanout on an older database does; backfill_through becomes their newest created_at.
async fn backfill(store: &SqlStore) {
    store
        .execute_raw("DELETE FROM fanout_meta WHERE key LIKE 'subagent_context_%'")
        .await
        .unwrap();
    store.run_migrations().await;
}

async fn report(store: &SqlStore, scope: ReportScope) -> FanoutReport {
    store.fanout_report(&scope).await.unwrap()
}

fn buckets(report: &FanoutReport) -> Vec<(i64, i64)> {
    report
        .turns
        .distribution
        .iter()
        .map(|b| (b.subagents, b.turns))
        .collect()
}

fn depths(nesting: &fanout_store::Nesting) -> Vec<(u32, i64)> {
    nesting
        .by_depth
        .iter()
        .map(|b| (b.depth, b.subagents))
        .collect()
}

async fn store_with_session(db: &TestDb) -> SqlStore {
    let store = db.open().await.unwrap();
    session(&store, "s1", "task-1").await;
    store
}

async fn distribution_counts_turns_with_zero_one_and_three_subagents(db: TestDb) {
    let store = store_with_session(&db).await;
    for (id, started) in [("t-zero", 1), ("t-one", 2), ("t-three", 3), ("t-zero-2", 4)] {
        turn(&store, id, "s1", "task-1", started).await;
    }
    write(
        &store,
        [
            live("a", Some("t-one"), 10),
            live("b", Some("t-three"), 11),
            live("c", Some("t-three"), 12),
            live("d", Some("t-three"), 13),
        ],
    )
    .await;
    let r = report(&store, ReportScope::All).await;
    assert_eq!(buckets(&r), vec![(0, 2), (1, 1), (2, 0), (3, 1)]);
    assert_eq!(r.turns.turns, 4);
    assert_eq!(r.turns.known_turns, 4);
    assert_eq!(r.turns.subagents_in_known_turns, 4);
    assert_eq!(r.turns.mean_per_known_turn, Some(1.0));
    assert_eq!(r.turns.unknown.turns, 0);
    assert_eq!(r.subagents.total, 4);
}

async fn rows_outside_any_turn_are_counted_apart(db: TestDb) {
    let store = store_with_session(&db).await;
    turn(&store, "t1", "s1", "task-1", 1).await;
    turn(&store, "t-gone", "s1", "task-1", 2).await;
    write(
        &store,
        [
            live("in-turn", Some("t1"), 10),
            live("no-turn", None, 11),
            live("orphan", Some("t-gone"), 12),
        ],
    )
    .await;
    // Deleting a turn keeps its subagent rows (AC-16).
    store.delete_turn("t-gone").await.unwrap();
    let r = report(&store, ReportScope::All).await;
    assert_eq!(buckets(&r), vec![(0, 0), (1, 1)]);
    assert_eq!(r.subagents.total, 3);
    assert_eq!(r.subagents.without_turn, 1);
    assert_eq!(r.subagents.turn_not_found, 1);
}

async fn unreported_metrics_are_never_zero(db: TestDb) {
    let store = store_with_session(&db).await;
    let with = |id: &str, tokens: Option<i64>, duration: Option<i64>, tools: Option<i64>| {
        let mut r = live(id, None, 10);
        r.total_tokens = tokens;
        r.duration_ms = duration;
        r.tool_use_count = tools;
        r
    };
    let mut background = with("async-1", None, None, None);
    background.is_async = true;
    write(
        &store,
        [
            with("a", Some(100), Some(1_000), Some(0)),
            with("b", Some(300), Some(3_000), Some(4)),
            with("c", Some(200), None, None),
            background,
            with("async-2", None, None, None),
        ],
    )
    .await;
    let r = report(&store, ReportScope::All).await;
    assert_eq!(r.subagents.total, 5);
    assert_eq!(r.subagents.async_launches, 1);

    let tokens = &r.total_tokens;
    assert_eq!((tokens.reported, tokens.unreported), (3, 2));
    assert_eq!(
        (tokens.min, tokens.max, tokens.sum),
        (Some(100), Some(300), Some(600))
    );
    assert_eq!(tokens.p50, Some(200.0));
    assert_eq!(
        tokens.mean,
        Some(200.0),
        "NULLs are left out, not averaged in as 0"
    );

    let duration = &r.duration_ms;
    assert_eq!((duration.reported, duration.unreported), (2, 3));
    assert_eq!(
        duration.p50,
        Some(2_000.0),
        "even count: mean of the middle pair"
    );
    assert_eq!(duration.mean, Some(2_000.0));

    // A reported 0 is a value (AC-8); the unreported are not.
    let tools = &r.tool_use_count;
    assert_eq!((tools.reported, tools.unreported), (2, 3));
    assert_eq!(
        (tools.min, tools.max, tools.sum),
        (Some(0), Some(4), Some(4))
    );
    assert_eq!(tools.mean, Some(2.0));
}

async fn breakdowns_by_type_and_model_show_unreported(db: TestDb) {
    let store = store_with_session(&db).await;
    let typed = |id: &str, kind: Option<&str>, model: Option<&str>| {
        let mut r = live(id, None, 10);
        r.subagent_type = kind.map(Into::into);
        r.model = model.map(Into::into);
        r
    };
    write(
        &store,
        [
            typed("a", Some("reviewer"), Some("opus")),
            typed("b", Some("reviewer"), None),
            typed("c", Some("explorer"), Some("opus")),
            typed("d", None, None),
            typed("e", Some("reviewer"), None),
        ],
    )
    .await;
    let r = report(&store, ReportScope::All).await;
    let pairs = |groups: &[CountBy]| {
        groups
            .iter()
            .map(|g| (g.value.clone(), g.subagents))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        pairs(&r.by_type),
        vec![
            (Some("reviewer".to_owned()), 3),
            (Some("explorer".to_owned()), 1),
            (None, 1)
        ]
    );
    assert_eq!(
        pairs(&r.by_model),
        vec![(None, 3), (Some("opus".to_owned()), 2)]
    );
    assert_eq!(r.by_model[0].value, None, "JSON keeps NULL as null");
}

async fn nesting_depth_follows_parents_in_the_session(db: TestDb) {
    let store = store_with_session(&db).await;
    session(&store, "s2", "task-1").await;
    let child = |id: &str, parent: Option<&str>| {
        let mut r = live(id, None, 10);
        r.parent_tool_call_id = parent.map(Into::into);
        r
    };
    let mut other_session = child("grandchild", Some("child"));
    other_session.task_session_id = "s2".into();
    write(
        &store,
        [
            child("top", None),
            child("child", Some("top")),
            child("grandchild", Some("child")),
            child("under-a-plain-tool", Some("bash-7")),
            // Same ids in another session never nest across sessions.
            other_session,
        ],
    )
    .await;
    let r = report(&store, ReportScope::All).await;
    assert_eq!(depths(&r.nesting), vec![(0, 3), (1, 1), (2, 1)]);
    assert_eq!(r.nesting.parent_not_a_subagent, 2);
    assert_eq!(r.nesting.cyclic, 0);

    // Scoped to the grandchild's window, its parents outside the window still count.
    let mut late = child("late", Some("grandchild"));
    late.observed_at = Some(at(100));
    write(&store, [late]).await;
    let r = report(
        &store,
        ReportScope::Window {
            since: Some(at(50)),
            until: None,
        },
    )
    .await;
    assert_eq!(r.subagents.total, 1);
    assert_eq!(depths(&r.nesting).last(), Some(&(3, 1)));
}

async fn provenance_splits_live_and_backfill_and_counts_a_twin_once(db: TestDb) {
    let store = store_with_session(&db).await;
    turn(&store, "t1", "s1", "task-1", 1).await;
    subagent_message(&store, "old-1", "t1", 2).await;
    subagent_message(&store, "twin", "t1", 3).await;
    backfill(&store).await;
    // The live writer saw the twin as well, under its real execution.
    let mut twin = live("twin", Some("t1"), 3);
    twin.subagent_type = Some("reviewer".into());
    let mut anonymous = live("anonymous", Some("t1"), 4);
    anonymous.agent_execution_id = None;
    write(&store, [twin, anonymous, live("new-1", Some("t1"), 5)]).await;

    let r = report(&store, ReportScope::All).await;
    let p = &r.provenance;
    assert_eq!((p.live, p.backfill), (3, 1));
    assert_eq!(p.backfill_duplicates_of_live, 1);
    assert_eq!(
        p.unknown_execution, 2,
        "the backfilled row and the anonymous live row"
    );
    assert_eq!(p.live_unknown_execution, 1);
    assert_eq!(r.subagents.total, 4, "the twin counts once");
    assert_eq!(buckets(&r).last(), Some(&(4, 1)));
}

async fn turns_before_backfill_through_without_live_rows_have_unknown_fanout(db: TestDb) {
    let store = store_with_session(&db).await;
    // Before backfill_through (= at(30), the newest subagent message):
    turn(&store, "old-silent", "s1", "task-1", 1).await; // no rows at all
    turn(&store, "old-backfilled", "s1", "task-1", 2).await; // two backfilled rows
    turn(&store, "old-imported", "s1", "task-1", 3).await; // a live row (import)
    turn(&store, "old-native", "s1", "task-1", 3).await; // a row read from a history
    subagent_message(&store, "b1", "old-backfilled", 20).await;
    subagent_message(&store, "b2", "old-backfilled", 30).await;
    backfill(&store).await;
    let activation = store.activation().await.unwrap();
    assert_eq!(
        activation.backfill_through.as_deref(),
        Some(at(30).canonical().as_str())
    );
    write(
        &store,
        [
            live("imported", Some("old-imported"), 4),
            SubagentRecord {
                source: fanout_store::Source::Import,
                ..live("native", Some("old-native"), 4)
            },
        ],
    )
    .await;
    // After it: silent turns are real zeros (live capture, import, or the quiet gap
    // between the last backfilled message and activation).
    turn(&store, "after-silent", "s1", "task-1", 40).await;
    turn(&store, "at-the-instant", "s1", "task-1", 30).await;
    turn(&store, "after-busy", "s1", "task-1", 41).await;
    write(
        &store,
        [
            live("n1", Some("after-busy"), 42),
            live("n2", Some("after-busy"), 43),
        ],
    )
    .await;

    let r = report(&store, ReportScope::All).await;
    let unknown = &r.turns.unknown;
    assert_eq!(unknown.before, Some(at(30)));
    assert_eq!(unknown.turns, 2, "old-silent and old-backfilled");
    assert_eq!(unknown.turns_with_backfill_rows, 1);
    assert_eq!(unknown.backfill_rows, 2, "a lower bound, not a count");
    // Known: old-imported (1), old-native (1), after-silent (0), at-the-instant (0),
    // after-busy (2).
    assert_eq!(buckets(&r), vec![(0, 2), (1, 2), (2, 1)]);
    assert_eq!(r.turns.turns, 7);
    assert_eq!(r.turns.known_turns, 5);
    assert_eq!(r.turns.subagents_in_known_turns, 4);
    assert_eq!(r.turns.mean_per_known_turn, Some(0.8));
    assert_eq!(
        (
            r.provenance.live,
            r.provenance.imported,
            r.provenance.backfill
        ),
        (3, 1, 2),
        "a row read from a history is imported, neither live nor backfill"
    );

    // The same turn one microsecond earlier is inside the window (AC-24e precision).
    turn(&store, "just-before", "s1", "task-1", 0).await;
    store
        .execute_raw(&format!(
            "UPDATE task_session_turns SET started_at = {} WHERE id = 'just-before'",
            literal_timestamp(&store, at(30).plus_micros(-1))
        ))
        .await
        .unwrap();
    let r = report(&store, ReportScope::All).await;
    assert_eq!(r.turns.unknown.turns, 3);
}

fn literal_timestamp(store: &SqlStore, t: Timestamp) -> String {
    match store.engine() {
        fanout_store::Engine::Sqlite => format!("'{}'", t.canonical()),
        fanout_store::Engine::Postgres => format!("'{}'::timestamptz", t.canonical()),
    }
}

async fn nothing_backfilled_means_no_unknown_window(db: TestDb) {
    let store = store_with_session(&db).await;
    // A fresh database activates with backfill_through = '' (nothing to backfill): an
    // imported history of silent turns is all real zeros.
    assert_eq!(
        store
            .activation()
            .await
            .unwrap()
            .backfill_through
            .as_deref(),
        Some("")
    );
    turn(&store, "t1", "s1", "task-1", -86_400).await;
    turn(&store, "t2", "s1", "task-1", 1).await;
    let r = report(&store, ReportScope::All).await;
    assert_eq!(r.turns.unknown.before, None);
    assert_eq!(r.turns.unknown.turns, 0);
    assert_eq!(buckets(&r), vec![(0, 2)]);
}

async fn scopes_select_by_task_session_and_window(db: TestDb) {
    let store = store_with_session(&db).await;
    session(&store, "s2", "task-2").await;
    turn(&store, "s1-t1", "s1", "task-1", 10).await;
    turn(&store, "s1-t2", "s1", "task-1", 20).await;
    turn(&store, "s2-t1", "s2", "task-2", 30).await;
    let mut other = live("x", Some("s2-t1"), 31);
    other.task_session_id = "s2".into();
    other.task_id = "task-2".into();
    write(
        &store,
        [
            live("a", Some("s1-t1"), 11),
            // Observed after the window below closes, in a turn that started inside it.
            live("b", Some("s1-t1"), 25),
            live("c", Some("s1-t2"), 21),
            other,
        ],
    )
    .await;

    let all = report(&store, ReportScope::All).await;
    assert_eq!((all.turns.turns, all.subagents.total), (3, 4));

    let task = report(
        &store,
        ReportScope::Task {
            task_id: "task-2".into(),
        },
    )
    .await;
    assert_eq!((task.turns.turns, task.subagents.total), (1, 1));
    assert_eq!(buckets(&task), vec![(0, 0), (1, 1)]);

    let session = report(
        &store,
        ReportScope::Session {
            session_id: "s1".into(),
        },
    )
    .await;
    assert_eq!((session.turns.turns, session.subagents.total), (2, 3));
    assert_eq!(buckets(&session), vec![(0, 0), (1, 1), (2, 1)]);

    // [at(10), at(20)): s1-t1 started at the lower bound (in), s1-t2 at the upper (out).
    let window = report(
        &store,
        ReportScope::Window {
            since: Some(at(10)),
            until: Some(at(20)),
        },
    )
    .await;
    assert_eq!(window.turns.turns, 1);
    assert_eq!(
        buckets(&window),
        vec![(0, 0), (1, 0), (2, 1)],
        "the turn keeps its row observed after the window"
    );
    assert_eq!(
        window.subagents.total, 1,
        "only row a was observed in the window"
    );

    let unknown_task = report(
        &store,
        ReportScope::Task {
            task_id: "no-such-task".into(),
        },
    )
    .await;
    assert_eq!(
        (unknown_task.turns.turns, unknown_task.subagents.total),
        (0, 0)
    );
}

async fn an_empty_database_reports_nothing_and_no_statistics(db: TestDb) {
    let store = db.open().await.unwrap();
    let r = report(&store, ReportScope::All).await;
    assert!(r.turns.distribution.is_empty());
    assert_eq!(r.turns.mean_per_known_turn, None);
    assert_eq!(r.subagents.total, 0);
    for stats in [&r.total_tokens, &r.duration_ms, &r.tool_use_count] {
        assert_eq!((stats.reported, stats.unreported), (0, 0));
        assert_eq!((stats.min, stats.max, stats.sum), (None, None, None));
        assert_eq!((stats.p50, stats.mean), (None, None));
    }
    assert!(r.nesting.by_depth.is_empty());
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["scope"]["kind"], "all");
    assert!(json["total_tokens"]["sum"].is_null());
}

/// PostgreSQL only: session time zones far from UTC never move a window bound or the
/// unknown-fan-out instant (AC-24e).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_report_ignores_session_time_zone() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    {
        let store = store_with_session(&db).await;
        turn(&store, "old", "s1", "task-1", 1).await;
        subagent_message(&store, "b1", "old", 30).await;
        backfill(&store).await;
        turn(&store, "edge", "s1", "task-1", 30).await;
        turn(&store, "late", "s1", "task-1", 40).await;
        write(&store, [live("n1", Some("late"), 40)]).await;
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
        let r = report(&store, ReportScope::All).await;
        assert_eq!(r.turns.unknown.turns, 1, "{zone}: only the old turn");
        assert_eq!(buckets(&r), vec![(0, 1), (1, 1)], "{zone}");
        let window = report(
            &store,
            ReportScope::Window {
                since: Some(at(30)),
                until: Some(at(40)),
            },
        )
        .await;
        assert_eq!(window.turns.turns, 1, "{zone}: edge in, late out");
        store.close().await;
    }
}
