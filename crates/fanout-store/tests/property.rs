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

/// A current-thread runtime that drives the store from inside proptest's closure.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// What both properties run: 48 cases, nothing persisted.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The orders each case is applied in: forward, backward and rotated by `shuffle`.
fn orders(n: usize, shuffle: prop::sample::Index) -> [Vec<usize>; 3] {
    [
        (0..n).collect(),
        (0..n).rev().collect(),
        (0..n).map(|i| (i + shuffle.index(n)) % n).collect(),
    ]
}

/// Runs `property` on a fresh PostgreSQL database, when one is configured.
fn on_postgres(property: fn(TestDb)) {
    let runtime = runtime();
    if let Some(db) = runtime.block_on(TestDb::postgres()) {
        drop(runtime);
        property(db);
    }
}

fn run_property(db: TestDb) {
    let runtime = runtime();
    let store = runtime.block_on(db.open()).unwrap();
    let case = std::cell::Cell::new(0u32);
    proptest!(config(), |(frames in prop::collection::vec(frame_strategy(), 1..7), shuffle in any::<prop::sample::Index>())| {
        case.set(case.get() + 1);
        let case = case.get();
        let rows: Vec<SubagentRow> = orders(frames.len(), shuffle)
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
    on_postgres(run_property);
}

/// The usage ledger's one upsert (DESIGN 4.1): the records of one response, applied in
/// different orders, end in the same token figures (the largest per field, a NULL never
/// replacing), and in every order `model` and `turn_id` are the first non-NULL of that
/// order and the attribution and `observed_at` are the first record's, NULL included.
mod usage_ledger {
    use fanout_store::testing::{TestDb, session_record};
    use fanout_store::{
        SqlStore, Store, Timestamp, TokenCounts, UsageRecord, UsageRow, UsageSource,
    };
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    struct Record {
        tokens: [Option<i64>; 5],
        model: Option<&'static str>,
        turn: Option<&'static str>,
        attribution: Option<&'static str>,
    }

    fn record_strategy() -> impl Strategy<Value = Record> {
        let figure = prop::option::of(-2i64..2000);
        (
            [
                figure.clone(),
                figure.clone(),
                figure.clone(),
                figure.clone(),
                figure,
            ],
            prop::option::of(prop::sample::select(vec!["model-a", "model-b"])),
            prop::option::of(prop::sample::select(vec!["turn-a", "turn-b"])),
            prop::option::of(prop::sample::select(vec!["toolu_a", "toolu_b"])),
        )
            .prop_map(|(tokens, model, turn, attribution)| Record {
                tokens,
                model,
                turn,
                attribution,
            })
    }

    fn usage(session: &str, r: &Record, at: Timestamp) -> UsageRecord {
        let [input, output, creation, read, reasoning] = r.tokens;
        UsageRecord {
            task_session_id: session.to_owned(),
            task_id: "task".into(),
            turn_id: r.turn.map(str::to_owned),
            subagent_tool_call_id: r.attribution.map(str::to_owned),
            agent_execution_id: Some("exec".into()),
            response_id: "msg_prop".into(),
            model: r.model.map(str::to_owned),
            tokens: TokenCounts {
                input_tokens: input,
                output_tokens: output,
                cache_creation_tokens: creation,
                cache_read_tokens: read,
                reasoning_tokens: reasoning,
            },
            source: UsageSource::ClaudeLog,
            observed_at: at,
        }
    }

    async fn apply(
        store: &SqlStore,
        session: &str,
        records: &[Record],
        order: &[usize],
    ) -> UsageRow {
        store
            .upsert_session(&session_record(session, "task", Timestamp::now()))
            .await
            .unwrap();
        let base = Timestamp::parse("2026-08-10T09:00:00Z").unwrap();
        for (step, &i) in order.iter().enumerate() {
            let record = usage(session, &records[i], base.plus_micros(step as i64));
            store.upsert_usage(&record).await.unwrap();
        }
        let rows = store.usage_rows(session).await.unwrap();
        assert_eq!(rows.len(), 1);
        rows.into_iter().next().unwrap()
    }

    /// The expected figure: the largest non-negative value reported for the field.
    fn largest(records: &[Record], field: usize) -> Option<i64> {
        records
            .iter()
            .filter_map(|r| r.tokens[field])
            .filter(|v| *v >= 0)
            .max()
    }

    fn run_property(db: TestDb) {
        let runtime = super::runtime();
        let store = runtime.block_on(db.open()).unwrap();
        let case = std::cell::Cell::new(0u32);
        proptest!(super::config(), |(records in prop::collection::vec(record_strategy(), 1..7), shuffle in any::<prop::sample::Index>())| {
            case.set(case.get() + 1);
            let case = case.get();
            let n = records.len();
            let expected = TokenCounts {
                input_tokens: largest(&records, 0),
                output_tokens: largest(&records, 1),
                cache_creation_tokens: largest(&records, 2),
                cache_read_tokens: largest(&records, 3),
                reasoning_tokens: largest(&records, 4),
            };
            for (k, order) in super::orders(n, shuffle).iter().enumerate() {
                let row = runtime.block_on(apply(&store, &format!("case{case}-order{k}"), &records, order));
                let in_order: Vec<&Record> = order.iter().map(|&i| &records[i]).collect();
                prop_assert_eq!(row.tokens, expected);
                prop_assert_eq!(row.model.as_deref(), in_order.iter().find_map(|r| r.model));
                prop_assert_eq!(row.turn_id.as_deref(), in_order.iter().find_map(|r| r.turn));
                prop_assert_eq!(row.subagent_tool_call_id.as_deref(), in_order[0].attribution,
                    "the first writer's attribution, NULL included");
                let base = Timestamp::parse("2026-08-10T09:00:00Z").unwrap();
                prop_assert_eq!(row.observed_at, base);
                prop_assert_eq!(row.updated_at, base.plus_micros(n as i64 - 1));
            }
        });
    }

    #[test]
    fn record_order_does_not_change_the_tokens_sqlite() {
        run_property(TestDb::sqlite());
    }

    #[test]
    fn record_order_does_not_change_the_tokens_postgres() {
        super::on_postgres(run_property);
    }
}
