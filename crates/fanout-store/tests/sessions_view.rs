//! Looking at runs (DESIGN 8) and cost roll-ups (DESIGN 4.1a), on both engines: the
//! session list and lookup, the invocation tree with own and with-descendants usage,
//! each response counted once, unpriced responses counted and named, never 0.

use fanout_store::testing::{TestDb, session_record, turn_record};
use fanout_store::{
    PriceTable, ReportScope, SessionFilter, SqlStore, Store, SubagentRecord, Timestamp,
    TokenCounts, UsageRecord, UsageSource, both_engines, session_view, usage_report,
};

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

async fn invocation(
    store: &SqlStore,
    call: &str,
    parent: Option<&str>,
    kind: &str,
    observed: &str,
) {
    store
        .upsert_subagent(&SubagentRecord {
            task_session_id: "s1".into(),
            task_id: "task-1".into(),
            turn_id: Some("t1".into()),
            tool_call_id: call.into(),
            parent_tool_call_id: parent.map(str::to_owned),
            subagent_type: Some(kind.into()),
            description: Some(format!("do {call}")),
            total_tokens: Some(7),
            observed_at: Some(at(observed)),
            ..Default::default()
        })
        .await
        .unwrap();
}

async fn response(
    store: &SqlStore,
    id: &str,
    call: Option<&str>,
    model: &str,
    input: i64,
    output: i64,
) {
    store
        .upsert_usage(&UsageRecord {
            task_session_id: "s1".into(),
            task_id: "task-1".into(),
            turn_id: Some("t1".into()),
            subagent_tool_call_id: call.map(str::to_owned),
            agent_execution_id: None,
            response_id: id.into(),
            model: Some(model.into()),
            tokens: TokenCounts {
                input_tokens: Some(input),
                output_tokens: Some(output),
                ..TokenCounts::default()
            },
            source: UsageSource::ClaudeLog,
            observed_at: at("2026-08-10T09:00:05Z"),
        })
        .await
        .unwrap();
}

/// s1 (task-1): turn t1, reviewer a -> explorer b (nested), and c; usage on each, one
/// response on an unpriced model. s2 (task-2): empty, started later.
async fn fixture(db: &TestDb) -> SqlStore {
    let store = db.open().await.unwrap();
    store
        .upsert_session(&session_record("s1", "task-1", at("2026-08-10T09:00:00Z")))
        .await
        .unwrap();
    store
        .upsert_session(&session_record("s2", "task-2", at("2026-08-11T09:00:00Z")))
        .await
        .unwrap();
    store
        .upsert_turn(&turn_record(
            "t1",
            "s1",
            "task-1",
            at("2026-08-10T09:00:01Z"),
        ))
        .await
        .unwrap();
    invocation(&store, "a", None, "reviewer", "2026-08-10T09:00:02Z").await;
    invocation(&store, "b", Some("a"), "reviewer", "2026-08-10T09:00:03Z").await;
    invocation(&store, "c", None, "explore", "2026-08-10T09:00:04Z").await;
    response(
        &store,
        "r0",
        None,
        "claude-sonnet-4-5-20250929",
        1_000_000,
        0,
    )
    .await;
    response(&store, "r1", Some("a"), "claude-sonnet-4-5", 1_000_000, 0).await;
    response(
        &store,
        "r2",
        Some("b"),
        "claude-haiku-4-5",
        1_000_000,
        1_000_000,
    )
    .await;
    response(&store, "r3", Some("c"), "mock-model", 10, 10).await;
    store
}

both_engines!(
    sessions_are_listed_newest_first_with_turns,
    ids_resolve_by_prefix_and_harness_id,
    the_tree_rolls_usage_up_once,
    the_usage_report_counts_each_response_once,
    the_change_marker_moves_on_every_write,
    the_change_marker_sees_another_stores_writes_and_stays_while_quiet,
);

async fn sessions_are_listed_newest_first_with_turns(db: TestDb) {
    let store = fixture(&db).await;
    let all = store.sessions(&SessionFilter::default()).await.unwrap();
    let ids: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["s2", "s1"]);
    assert_eq!((all[0].turns, all[1].turns), (0, 1));
    assert_eq!(all[1].usage_source.as_deref(), Some("claude-log"));
    let task = SessionFilter {
        task_id: Some("task-1".into()),
        ..SessionFilter::default()
    };
    assert_eq!(store.sessions(&task).await.unwrap().len(), 1);
    let window = SessionFilter {
        since: Some(at("2026-08-11T00:00:00Z")),
        ..SessionFilter::default()
    };
    assert_eq!(store.sessions(&window).await.unwrap()[0].id, "s2");
    let one = SessionFilter {
        session_id: Some("s1".into()),
        ..SessionFilter::default()
    };
    let only: Vec<String> = store
        .sessions(&one)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(only, ["s1"]);
    let prefix = SessionFilter {
        session_id: Some("s".into()),
        ..SessionFilter::default()
    };
    assert!(
        store.sessions(&prefix).await.unwrap().is_empty(),
        "the id is matched whole"
    );
}

async fn ids_resolve_by_prefix_and_harness_id(db: TestDb) {
    let store = fixture(&db).await;
    assert_eq!(store.session_ids_matching("s1").await.unwrap(), ["s1"]);
    assert_eq!(store.session_ids_matching("s").await.unwrap(), ["s1", "s2"]);
    assert!(store.session_ids_matching("zz").await.unwrap().is_empty());
    // A LIKE wildcard in the input is a literal character.
    assert!(store.session_ids_matching("%").await.unwrap().is_empty());
    store
        .execute_raw("UPDATE task_sessions SET acp_session_id = 'claude-abc' WHERE id = 's2'")
        .await
        .unwrap();
    assert_eq!(
        store.session_ids_matching("claude-abc").await.unwrap(),
        ["s2"]
    );
    assert_eq!(
        store.session_ids_matching("claude-a").await.unwrap(),
        ["s2"]
    );
}

async fn the_tree_rolls_usage_up_once(db: TestDb) {
    let store = fixture(&db).await;
    let prices = PriceTable::shipped().unwrap();
    let scope = ReportScope::Session {
        session_id: "s1".into(),
    };
    let session = store
        .sessions(&SessionFilter::default())
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.id == "s1")
        .unwrap();
    let view = session_view(
        session,
        store.turns_of("s1").await.unwrap(),
        store.subagents_in(&scope).await.unwrap(),
        &store.usage_cells(&scope).await.unwrap(),
        &prices,
    );
    assert_eq!(view.turns.len(), 1);
    let turn = &view.turns[0];
    let roots: Vec<&str> = turn
        .invocations
        .iter()
        .map(|i| i.row.tool_call_id.as_str())
        .collect();
    assert_eq!(roots, ["a", "c"], "launch order, nested b under a");
    let a = &turn.invocations[0];
    assert_eq!(a.children[0].row.tool_call_id, "b");
    // a: sonnet input 1M = $3; b: haiku 1M in + 1M out = $6; with descendants $9.
    assert_eq!(a.own.cost.usd, Some(3.0));
    assert_eq!(a.children[0].own.cost.usd, Some(6.0));
    assert_eq!(a.with_descendants.cost.usd, Some(9.0));
    assert_eq!(a.with_descendants.tokens.responses, 2);
    let c = &turn.invocations[1];
    assert_eq!(c.own.cost.usd, None, "unpriced is NULL, never 0");
    assert_eq!(c.own.cost.unpriced_responses, 1);
    assert_eq!(c.own.tokens.tokens.input_tokens, Some(10));
    // Session: own agent $3 (dated id priced by its family) + subagents $9 + unpriced.
    assert_eq!(view.usage.own_agent.cost.usd, Some(3.0));
    assert_eq!(view.usage.subagents.cost.usd, Some(9.0));
    assert_eq!(view.usage.total.cost.usd, Some(12.0));
    assert_eq!(view.usage.total.tokens.responses, 4);
    assert!(
        view.usage
            .total
            .cost
            .unpriced_models
            .contains(&Some("mock-model".to_owned()))
    );
    assert_eq!(view.usage.subagent_cost_share, Some(0.75));
    assert_eq!(turn.usage.tokens.responses, 4);
    assert_eq!((view.invocations, view.unsettled_invocations), (3, 3));
}

async fn the_usage_report_counts_each_response_once(db: TestDb) {
    let store = fixture(&db).await;
    let prices = PriceTable::shipped().unwrap();
    let report = usage_report(
        store.subagents_in(&ReportScope::All).await.unwrap(),
        &store.usage_cells(&ReportScope::All).await.unwrap(),
        &prices,
    );
    assert_eq!(report.total.total.tokens.responses, 4);
    assert_eq!(report.by_session.len(), 1);
    let reviewer = report
        .by_type
        .iter()
        .find(|l| l.key.as_deref() == Some("reviewer"))
        .unwrap();
    assert_eq!(reviewer.invocations, 2);
    assert_eq!(reviewer.own.cost.usd, Some(9.0));
    assert_eq!(
        reviewer.with_descendants.cost.usd,
        Some(9.0),
        "b is inside a's subtree and not added again"
    );
    let models: Vec<Option<&str>> = report.by_model.iter().map(|l| l.key.as_deref()).collect();
    assert_eq!(
        models,
        [
            Some("claude-haiku-4-5"),
            Some("claude-sonnet-4-5"),
            Some("claude-sonnet-4-5-20250929"),
            Some("mock-model")
        ]
    );
    let a = report
        .by_invocation
        .iter()
        .find(|l| l.tool_call_id == "a")
        .unwrap();
    assert_eq!(a.reported_total_tokens, Some(7));
    assert_eq!(a.own.tokens.tokens.input_tokens, Some(1_000_000));
    assert_eq!(report.by_invocation.len(), 3);
}

async fn the_change_marker_moves_on_every_write(db: TestDb) {
    let store = fixture(&db).await;
    let before = store.change_marker().await.unwrap();
    assert_eq!(store.change_marker().await.unwrap(), before);
    invocation(&store, "d", None, "explore", "2026-08-10T09:00:09Z").await;
    assert_ne!(store.change_marker().await.unwrap(), before);
}

/// The marker is kept while nothing commits (SQLite asks `data_version` instead of
/// scanning), so what matters is that it never goes stale: a write through another
/// store (other connections, as another process has) moves it, every time.
async fn the_change_marker_sees_another_stores_writes_and_stays_while_quiet(db: TestDb) {
    let store = fixture(&db).await;
    let other = db.open().await.unwrap();
    let mut marker = store.change_marker().await.unwrap();
    for (round, call) in ["e", "f", "g"].into_iter().enumerate() {
        for _ in 0..3 {
            assert_eq!(
                store.change_marker().await.unwrap(),
                marker,
                "round {round}"
            );
        }
        let observed = format!("2026-08-10T09:00:1{round}Z");
        invocation(&other, call, None, "explore", &observed).await;
        let moved = store.change_marker().await.unwrap();
        assert_ne!(
            moved, marker,
            "round {round}: another store's write was missed"
        );
        marker = moved;
    }
    other.close().await;
    store.close().await;
}
