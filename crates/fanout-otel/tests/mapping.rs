//! The span mapping of every row kind (DESIGN 12), from rows written out by hand: a
//! settled invocation, an unsettled one, a failed one, a cancelled one, a background
//! (async) one, a nested one, an unpriced one; the root's own usage; names, parents,
//! times, status and attributes; and the attribute names against the GenAI semantic
//! conventions' text (v1.42.0).

use std::collections::BTreeSet;

use fanout_otel::{PlannedSpan, TracePlan, ids, plan_session};
use fanout_store::{
    ExportKey, ExportSession, PriceTable, SessionRow, Source, SubagentRow, Timestamp, TokenCounts,
    TokenTotals, TurnRow, UsageCell,
};
use opentelemetry::Value;
use opentelemetry::trace::{SpanId, Status};

fn at(seconds: i64) -> Timestamp {
    Timestamp::parse("2026-08-10T09:00:00Z")
        .unwrap()
        .plus_micros(seconds * 1_000_000)
}

fn row(call: &str, parent: Option<&str>, kind: &str, observed: i64) -> SubagentRow {
    SubagentRow {
        id: format!("row-{call}"),
        task_session_id: "s1".into(),
        task_id: "task-1".into(),
        turn_id: Some("t1".into()),
        tool_call_id: call.into(),
        agent_execution_id: "unknown".into(),
        parent_tool_call_id: parent.map(str::to_owned),
        subagent_type: Some(kind.into()),
        description: Some(format!("do {call}")),
        agent_id: Some(format!("agent-{call}")),
        child_session_id: None,
        model: None,
        agent_status: None,
        tool_status: Some("completed".into()),
        is_async: false,
        total_tokens: None,
        tool_use_count: None,
        duration_ms: None,
        source: Source::Import,
        observed_at: at(observed),
        settled_at: Some(at(observed + 10)),
        updated_at: at(observed + 10),
    }
}

fn cell(call: Option<&str>, model: &str, input: i64, output: i64, read: i64) -> UsageCell {
    UsageCell {
        task_session_id: "s1".into(),
        task_id: "task-1".into(),
        turn_id: Some("t1".into()),
        subagent_tool_call_id: call.map(str::to_owned),
        model: Some(model.into()),
        totals: TokenTotals {
            responses: 1,
            tokens: TokenCounts {
                input_tokens: Some(input),
                output_tokens: Some(output),
                cache_creation_tokens: Some(0),
                cache_read_tokens: Some(read),
                reasoning_tokens: None,
            },
        },
    }
}

/// Turn t1 (0 s .. 100 s) of a Claude session: a settled reviewer `a` with a nested
/// explorer `b`; `f` failed, `c` cancelled, `bg` in the background (settled at its
/// launch, reported a 60 s run), `u` never settled, `m` on an unpriced model.
fn session(turn_completed: bool) -> ExportSession {
    let mut f = row("f", None, "tester", 30);
    f.tool_status = Some("failed".into());
    let mut c = row("c", None, "tester", 31);
    c.tool_status = Some("cancelled".into());
    let mut bg = row("bg", None, "watcher", 32);
    bg.is_async = true;
    bg.settled_at = Some(at(33));
    bg.duration_ms = Some(60_000);
    let mut u = row("u", None, "slow", 40);
    u.settled_at = None;
    u.tool_status = Some("in_progress".into());
    u.updated_at = at(45);
    let mut m = row("m", None, "mocker", 50);
    m.child_session_id = Some("child-m".into());
    ExportSession {
        session: SessionRow {
            id: "s1".into(),
            task_id: "task-1".into(),
            acp_session_id: Some("claude-session-1".into()),
            agent_execution_id: Some("unknown".into()),
            agent_command: None,
            cwd: None,
            started_at: at(0),
            completed_at: None,
            updated_at: at(100),
            turns: 1,
            usage_source: Some("claude-log".into()),
        },
        turns: vec![TurnRow {
            id: "t1".into(),
            task_session_id: "s1".into(),
            started_at: at(0),
            completed_at: turn_completed.then(|| at(100)),
            stop_reason: turn_completed.then(|| "end_turn".into()),
        }],
        rows: vec![
            row("a", None, "reviewer", 10),
            row("b", Some("a"), "explorer", 12),
            f,
            c,
            bg,
            u,
            m,
        ],
        cells: vec![
            cell(None, "claude-haiku-4-5", 100, 10, 1000),
            cell(Some("a"), "claude-haiku-4-5", 200, 20, 0),
            cell(Some("b"), "claude-haiku-4-5", 300, 30, 3000),
            cell(Some("m"), "mock-model", 7, 3, 0),
            // An attribution no row has: the root's.
            cell(Some("ghost"), "claude-haiku-4-5", 1, 1, 0),
        ],
        exported: BTreeSet::new(),
    }
}

fn plan(turn_completed: bool) -> TracePlan {
    let prices = PriceTable::shipped().unwrap();
    let mut plans = plan_session(&session(turn_completed), &prices, None);
    assert_eq!(plans.len(), 1, "one trace per turn");
    plans.remove(0)
}

fn span<'a>(plan: &'a TracePlan, call: &str) -> &'a PlannedSpan {
    plan.spans
        .iter()
        .find(|s| s.key == ExportKey::Invocation(call.into()))
        .unwrap_or_else(|| panic!("no span for {call}"))
}

fn attr(span: &PlannedSpan, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

fn int(span: &PlannedSpan, key: &str) -> Option<i64> {
    match attr(span, key)? {
        Value::I64(n) => Some(n),
        other => panic!("{key} is {other:?}"),
    }
}

#[test]
fn the_turn_is_the_root_and_invocations_nest_under_their_parents() {
    let plan = plan(true);
    let root = &plan.spans[0];
    assert_eq!(root.key, ExportKey::Turn("t1".into()));
    assert_eq!(root.name, "invoke_agent claude");
    assert_eq!(root.parent_span_id, SpanId::INVALID);
    assert_eq!((root.start, root.end), (at(0), at(100)));
    assert_eq!(root.trace_id, ids::trace_id("s1", Some("t1")));
    assert_eq!(plan.spans.len(), 8, "the root and seven invocations");
    for s in &plan.spans {
        assert_eq!(s.trace_id, root.trace_id, "one trace");
    }
    let a = span(&plan, "a");
    let b = span(&plan, "b");
    assert_eq!(a.parent_span_id, root.span_id);
    assert_eq!(
        b.parent_span_id, a.span_id,
        "nested under its parent's span"
    );
    assert_eq!(b.name, "invoke_agent explorer");
    assert_eq!(
        a.span_id,
        ids::span_id("s1", &ExportKey::Invocation("a".into()))
    );
    assert_eq!((a.start, a.end), (at(10), at(20)), "observed .. settled");
    assert_eq!(a.status, Status::Unset);
    assert!(!a.unsettled && a.ready);
    assert_eq!(
        attr(a, "gen_ai.operation.name"),
        Some("invoke_agent".into())
    );
    assert_eq!(attr(a, "gen_ai.agent.name"), Some("reviewer".into()));
    assert_eq!(attr(a, "gen_ai.agent.id"), Some("agent-a".into()));
    assert_eq!(attr(a, "gen_ai.agent.description"), Some("do a".into()));
    assert_eq!(attr(a, "openinference.span.kind"), Some("AGENT".into()));
    assert_eq!(attr(a, "session.id"), Some("claude-session-1".into()));
    assert_eq!(attr(a, "fanout.tool_call_id"), Some("a".into()));
    assert_eq!(attr(a, "fanout.is_async"), Some(false.into()));
    assert_eq!(attr(a, "fanout.unsettled"), None);
    assert_eq!(
        attr(a, "gen_ai.request.model"),
        Some("claude-haiku-4-5".into())
    );
    assert_eq!(
        attr(root, "gen_ai.conversation.id"),
        Some("claude-session-1".into())
    );
}

#[test]
fn tokens_are_each_span_own_with_cached_input_counted_in() {
    let plan = plan(true);
    let root = &plan.spans[0];
    // The session's own agent (100 + 1000 read) and the attribution with no row (1).
    assert_eq!(int(root, "gen_ai.usage.input_tokens"), Some(1101));
    assert_eq!(int(root, "gen_ai.usage.output_tokens"), Some(11));
    assert_eq!(
        int(root, "gen_ai.usage.cache_read.input_tokens"),
        Some(1000)
    );
    assert_eq!(
        int(root, "gen_ai.usage.cache_creation.input_tokens"),
        Some(0)
    );
    assert_eq!(int(root, "fanout.responses"), Some(2));
    let b = span(&plan, "b");
    assert_eq!(
        int(b, "gen_ai.usage.input_tokens"),
        Some(3300),
        "300 + 3000 read"
    );
    assert_eq!(int(b, "llm.token_count.prompt"), Some(3300));
    assert_eq!(int(b, "llm.token_count.completion"), Some(30));
    assert_eq!(int(b, "llm.token_count.total"), Some(3330));
    assert_eq!(
        int(b, "gen_ai.usage.reasoning.output_tokens"),
        None,
        "never reported"
    );
    // haiku 4.5: $1 input, $5 output, $0.10 cache read per million.
    let usd = |s: &PlannedSpan| match attr(s, "fanout.cost_usd") {
        Some(Value::F64(v)) => Some(v),
        None => None,
        other => panic!("{other:?}"),
    };
    let expected = (300.0 * 1.0 + 30.0 * 5.0 + 3000.0 * 0.1) / 1e6;
    assert!((usd(b).unwrap() - expected).abs() < 1e-12, "{:?}", usd(b));
    // a has no own tokens beyond its cell; f has none at all: no token attributes.
    assert_eq!(
        int(span(&plan, "a"), "gen_ai.usage.input_tokens"),
        Some(200)
    );
    assert_eq!(int(span(&plan, "f"), "gen_ai.usage.input_tokens"), None);
    assert_eq!(usd(span(&plan, "f")), None);
}

#[test]
fn an_unpriced_invocation_has_tokens_and_no_cost() {
    let plan = plan(true);
    let m = span(&plan, "m");
    assert_eq!(int(m, "gen_ai.usage.input_tokens"), Some(7));
    assert_eq!(attr(m, "fanout.cost_usd"), None, "unpriced is never 0");
    assert_eq!(int(m, "fanout.unpriced_responses"), Some(1));
    assert_eq!(attr(m, "gen_ai.conversation.id"), Some("child-m".into()));
}

#[test]
fn failed_and_cancelled_are_errors() {
    let plan = plan(true);
    assert_eq!(span(&plan, "f").status, Status::error("failed"));
    assert_eq!(span(&plan, "c").status, Status::error("cancelled"));
    assert_eq!(
        attr(span(&plan, "f"), "fanout.tool_status"),
        Some("failed".into())
    );
}

#[test]
fn a_background_invocation_runs_as_long_as_it_reported_and_waits_for_its_turn() {
    let open = plan(false);
    let bg = span(&open, "bg");
    assert_eq!(
        (bg.start, bg.end),
        (at(32), at(92)),
        "launch + 60 s reported"
    );
    assert_eq!(attr(bg, "fanout.is_async"), Some(true.into()));
    assert!(!bg.unsettled);
    assert!(
        !bg.ready,
        "its work goes on past its launch: sent when the turn ends"
    );
    assert!(span(&plan(true), "bg").ready);
}

#[test]
fn an_unsettled_invocation_ends_with_its_turn() {
    let ended = plan(true);
    let u = span(&ended, "u");
    assert!(u.unsettled && u.ready, "sent once its turn ended");
    assert_eq!(u.end, at(100), "the turn's end");
    assert_eq!(attr(u, "fanout.unsettled"), Some(true.into()));
    assert_eq!(u.status, Status::Unset);
    // The turn still open: the root and u wait; settled ones go.
    let open = plan(false);
    let root = &open.spans[0];
    assert!(root.unsettled && !root.ready);
    assert_eq!(attr(root, "fanout.unsettled"), Some(true.into()));
    assert_eq!(
        root.end,
        at(92),
        "the latest activity seen: bg's reported end"
    );
    assert!(!span(&open, "u").ready);
    assert_eq!(span(&open, "u").end, at(92));
    assert!(span(&open, "a").ready && span(&open, "f").ready);
}

#[test]
fn invocations_of_no_known_turn_have_a_root_of_their_own() {
    let mut part = session(true);
    part.rows[0].turn_id = None;
    part.rows[1].turn_id = None;
    let prices = PriceTable::shipped().unwrap();
    let plans = plan_session(&part, &prices, None);
    assert_eq!(plans.len(), 2);
    let orphans = plans.iter().find(|p| p.turn_id.is_none()).unwrap();
    assert_eq!(orphans.spans[0].key, ExportKey::NoTurn);
    assert_eq!(
        attr(&orphans.spans[0], "fanout.turn_known"),
        Some(false.into())
    );
    assert_eq!(orphans.spans.len(), 3, "root, a, and b under a");
    assert_eq!(orphans.spans[2].parent_span_id, orphans.spans[1].span_id);
    // `since` after the turn and the orphans: nothing.
    assert!(plan_session(&part, &prices, Some(at(1000))).is_empty());
}

#[test]
fn the_attribute_names_are_the_conventions() {
    #[allow(deprecated)]
    use opentelemetry_semantic_conventions::attribute as semconv;
    #[allow(deprecated)]
    let names = [
        (fanout_otel::OPERATION_NAME, semconv::GEN_AI_OPERATION_NAME),
        (fanout_otel::AGENT_NAME, semconv::GEN_AI_AGENT_NAME),
        (fanout_otel::AGENT_ID, semconv::GEN_AI_AGENT_ID),
        (
            fanout_otel::AGENT_DESCRIPTION,
            semconv::GEN_AI_AGENT_DESCRIPTION,
        ),
        (
            fanout_otel::CONVERSATION_ID,
            semconv::GEN_AI_CONVERSATION_ID,
        ),
        (fanout_otel::REQUEST_MODEL, semconv::GEN_AI_REQUEST_MODEL),
        (
            fanout_otel::INPUT_TOKENS,
            semconv::GEN_AI_USAGE_INPUT_TOKENS,
        ),
        (
            fanout_otel::OUTPUT_TOKENS,
            semconv::GEN_AI_USAGE_OUTPUT_TOKENS,
        ),
        (
            fanout_otel::CACHE_READ_TOKENS,
            semconv::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        ),
        (
            fanout_otel::CACHE_CREATION_TOKENS,
            semconv::GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        ),
        (
            fanout_otel::REASONING_TOKENS,
            semconv::GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
        ),
    ];
    for (ours, theirs) in names {
        assert_eq!(ours, theirs);
    }
    assert_eq!(
        opentelemetry_semantic_conventions::SCHEMA_URL,
        "https://opentelemetry.io/schemas/1.42.0",
        "docs/otel.md cites this version's text"
    );
}
