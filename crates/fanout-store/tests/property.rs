//! Order independence (AC-3, AC-4, AC-14): a random set of frames for one key, applied
//! in different orders, must end in the same row on every column the merge rules make
//! order-independent.

use fanout_store::testing::{TestDb, session_record};
use fanout_store::{
    SqlStore, Store, SubagentRecord, SubagentRow, Timestamp, is_terminal_tool_status,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Frame {
    tool_status: Option<&'static str>,
    agent_status: bool,
    description: bool,
    model: bool,
    turn: bool,
    parent: bool,
    total_tokens: bool,
    tool_use_count: bool,
    is_async: bool,
    negative_duration: bool,
}

fn frame_strategy() -> impl Strategy<Value = Frame> {
    (
        prop::option::of(prop::sample::select(vec![
            "pending",
            "in_progress",
            "completed",
            "failed",
            "cancelled",
        ])),
        any::<[bool; 9]>(),
    )
        .prop_map(|(tool_status, b)| Frame {
            tool_status,
            agent_status: b[0],
            description: b[1],
            model: b[2],
            turn: b[3],
            parent: b[4],
            total_tokens: b[5],
            tool_use_count: b[6],
            is_async: b[7],
            negative_duration: b[8],
        })
}

fn record(session: &str, f: &Frame, at: Timestamp) -> SubagentRecord {
    let s = |on: bool, v: &str| on.then(|| v.to_owned());
    let terminal = f.tool_status.is_some_and(is_terminal_tool_status);
    SubagentRecord {
        task_session_id: session.to_owned(),
        task_id: "task".into(),
        tool_call_id: "toolu_prop".into(),
        agent_execution_id: Some("exec".into()),
        turn_id: s(f.turn, "turn-x"),
        parent_tool_call_id: s(f.parent, "toolu_parent"),
        description: s(f.description, "desc"),
        model: s(f.model, "model-x"),
        agent_status: s(f.agent_status, "running"),
        tool_status: f.tool_status.map(str::to_owned),
        is_async: f.is_async,
        total_tokens: f.total_tokens.then_some(42),
        tool_use_count: f.tool_use_count.then_some(0),
        duration_ms: f.negative_duration.then_some(-7),
        observed_at: Some(at),
        settled_at: terminal.then_some(at),
        ..Default::default()
    }
}

/// The columns whose final value cannot depend on frame order.
/// The columns whose final value cannot depend on frame order.
#[derive(Debug, PartialEq)]
struct OrderIndependent {
    text: [Option<String>; 5],
    is_async: bool,
    metrics: [Option<i64>; 3],
    settled: bool,
    has_tool_status: bool,
    identity: (String, String),
}

fn order_independent(row: &SubagentRow) -> OrderIndependent {
    OrderIndependent {
        text: [
            row.turn_id.clone(),
            row.parent_tool_call_id.clone(),
            row.description.clone(),
            row.model.clone(),
            row.agent_status.clone(),
        ],
        is_async: row.is_async,
        metrics: [row.total_tokens, row.tool_use_count, row.duration_ms],
        settled: row.settled_at.is_some(),
        has_tool_status: row.tool_status.is_some(),
        identity: (row.task_id.clone(), row.agent_execution_id.clone()),
    }
}

async fn apply(store: &SqlStore, session: &str, frames: &[Frame], order: &[usize]) -> SubagentRow {
    store
        .upsert_session(&session_record(session, "task", Timestamp::now()))
        .await
        .unwrap();
    let base = Timestamp::parse("2026-08-10T09:00:00Z").unwrap();
    for (step, &i) in order.iter().enumerate() {
        let rec = record(session, &frames[i], base.plus_micros(step as i64));
        store.upsert_subagent(&rec).await.unwrap();
    }
    let rows = store.subagents_by_session(session).await.unwrap();
    assert_eq!(rows.len(), 1);
    rows.into_iter().next().unwrap()
}

fn run_property(db: TestDb) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = runtime.block_on(db.open()).unwrap();
    let case = std::cell::Cell::new(0u32);
    let config = ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(frames in prop::collection::vec(frame_strategy(), 1..7), shuffle in any::<prop::sample::Index>())| {
        case.set(case.get() + 1);
        let case = case.get();
        let n = frames.len();
        let forward: Vec<usize> = (0..n).collect();
        let backward: Vec<usize> = (0..n).rev().collect();
        let rotated: Vec<usize> = (0..n).map(|i| (i + shuffle.index(n)) % n).collect();
        let rows: Vec<SubagentRow> = [forward, backward, rotated]
            .iter()
            .enumerate()
            .map(|(k, order)| runtime.block_on(apply(&store, &format!("case{case}-order{k}"), &frames, order)))
            .collect();
        let any_terminal = frames.iter().any(|f| f.tool_status.is_some_and(is_terminal_tool_status));
        for row in &rows {
            prop_assert_eq!(order_independent(row), order_independent(&rows[0]));
            // Invariants every order must keep.
            prop_assert_eq!(row.settled_at.is_some(), any_terminal);
            if any_terminal {
                prop_assert!(row.tool_status.as_deref().is_some_and(is_terminal_tool_status),
                    "a settled row keeps its terminal status: {:?}", row.tool_status);
            }
            prop_assert_eq!(row.duration_ms, None, "negative metrics never land");
            prop_assert_eq!(row.is_async, frames.iter().any(|f| f.is_async));
        }
    });
}

#[test]
fn frame_order_does_not_change_the_row_sqlite() {
    run_property(TestDb::sqlite());
}

#[test]
fn frame_order_does_not_change_the_row_postgres() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if let Some(db) = runtime.block_on(TestDb::postgres()) {
        drop(runtime);
        run_property(db);
    }
}
