//! Rows to spans (DESIGN 12): a trace per turn whose root span is the turn
//! (`invoke_agent <harness>`), a child span per invocation (`invoke_agent <subagent
//! type>`), nested invocations under their parent's span. Start and end come from the
//! rows; an unsettled invocation ends with its turn and carries `fanout.unsettled=true`;
//! a failed or cancelled one has status error. The session's invocations of no known
//! turn hang under one root of their own (`fanout.turn_known=false`).
//!
//! Pure: typed rows in, [`PlannedSpan`]s out. Whether a span is ready for the
//! continuous export is decided here too ([`PlannedSpan::ready`]).

use std::borrow::Cow;
use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use fanout_store::{
    ExportKey, ExportMark, ExportSession, InvocationNode, PriceTable, SessionRow, Timestamp,
    TurnRow, Usage, UsageCell, session_view,
};
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};

use crate::attributes::{self, CONVERSATION_ID, REQUEST_MODEL};
use crate::ids;

/// One span, planned from the rows.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedSpan {
    /// The row it stands for.
    pub key: ExportKey,
    /// Its trace (its turn's).
    pub trace_id: TraceId,
    /// Its id.
    pub span_id: SpanId,
    /// Its parent's id; [`SpanId::INVALID`] for a root.
    pub parent_span_id: SpanId,
    /// `invoke_agent <agent name>`.
    pub name: String,
    /// When it started.
    pub start: Timestamp,
    /// When it ended (never before `start`).
    pub end: Timestamp,
    /// Its attributes.
    pub attributes: Vec<KeyValue>,
    /// Error for a failed or cancelled invocation or turn, else unset.
    pub status: Status,
    /// Its row had not settled (its turn had not ended, for a root).
    pub unsettled: bool,
    /// The continuous export would send it now: a turn once it ended, an invocation
    /// once it settled (a background one, whose work goes on past its launch, and an
    /// unsettled one once its turn ended).
    pub ready: bool,
}

/// The spans of one trace: one turn, or a session's invocations of no known turn.
#[derive(Clone, Debug, PartialEq)]
pub struct TracePlan {
    /// `task_sessions.id`.
    pub session_id: String,
    /// The turn; `None` for the invocations of no known turn.
    pub turn_id: Option<String>,
    /// The root first, then the invocations depth first in launch order.
    pub spans: Vec<PlannedSpan>,
}

impl PlannedSpan {
    /// The span as the OTLP exporter takes it.
    pub fn to_span_data(&self, scope: &InstrumentationScope) -> SpanData {
        SpanData {
            span_context: SpanContext::new(
                self.trace_id,
                self.span_id,
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: self.parent_span_id,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Owned(self.name.clone()),
            start_time: system_time(self.start),
            end_time: system_time(self.end),
            attributes: self.attributes.clone(),
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: self.status.clone(),
            instrumentation_scope: scope.clone(),
        }
    }

    /// What the store remembers once `receiver` took it.
    pub fn mark(&self, receiver: &str, session_id: &str, exported_at: Timestamp) -> ExportMark {
        ExportMark {
            receiver: receiver.to_owned(),
            task_session_id: session_id.to_owned(),
            key: self.key.clone(),
            trace_id: self.trace_id.to_string(),
            span_id: self.span_id.to_string(),
            unsettled: self.unsettled,
            exported_at,
        }
    }
}

fn system_time(at: Timestamp) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_micros(u64::try_from(at.unix_micros()).unwrap_or(0))
}

/// Which harness a session came from: its ledger's source, else its agent command.
pub fn harness_name(session: &SessionRow) -> String {
    match session.usage_source.as_deref() {
        Some("claude-log") => return "claude".to_owned(),
        Some("codex-rollout") => return "codex".to_owned(),
        _ => {}
    }
    let Some(command) = session.agent_command.as_deref() else {
        return "unknown".to_owned();
    };
    let lower = command.to_lowercase();
    let known = [
        "claude", "codex", "opencode", "gemini", "qwen", "auggie", "cursor", "copilot",
    ];
    if let Some(name) = known.iter().find(|k| lower.contains(*k)) {
        return (*name).to_owned();
    }
    if lower.contains("fanout") && lower.contains("agent") {
        return "fanout".to_owned();
    }
    let first = command.split_whitespace().next().unwrap_or(command);
    first.rsplit('/').next().unwrap_or(first).to_owned()
}

/// What the spans of one session share.
struct Context<'a> {
    session_id: &'a str,
    conversation: &'a str,
    prices: &'a PriceTable,
    cells: &'a [UsageCell],
    /// The tool_call_ids of the tree: cells attributed to anything else are the root's.
    tree_calls: HashSet<String>,
}

impl Context<'_> {
    /// The root's own usage: the cells `in_root` selects that no invocation of the tree
    /// owns (the session's own agent, and attributions without a row).
    fn root_usage(&self, in_root: impl Fn(&UsageCell) -> bool) -> Usage {
        Usage::of_cells(
            self.cells.iter().filter(|c| {
                in_root(c)
                    && c.subagent_tool_call_id
                        .as_deref()
                        .is_none_or(|call| !self.tree_calls.contains(call))
            }),
            self.prices,
        )
    }
}

/// The traces of one session's part of an export: every turn started at or after
/// `since` (all without it), and the invocations of no known turn observed since then.
pub fn plan_session(
    part: &ExportSession,
    prices: &PriceTable,
    since: Option<Timestamp>,
) -> Vec<TracePlan> {
    let view = session_view(
        part.session.clone(),
        part.turns.clone(),
        part.rows.clone(),
        &part.cells,
        prices,
    );
    let harness = harness_name(&part.session);
    let conversation = part
        .session
        .acp_session_id
        .as_deref()
        .unwrap_or(&part.session.id);
    let tree_calls = view
        .turns
        .iter()
        .flat_map(|t| t.all_invocations())
        .map(|n| n.row.tool_call_id.clone())
        .collect();
    let cx = Context {
        session_id: &part.session.id,
        conversation,
        prices,
        cells: &part.cells,
        tree_calls,
    };
    let turn_ids: HashSet<&str> = part.turns.iter().map(|t| t.id.as_str()).collect();
    let mut plans = Vec::new();
    for turn_view in &view.turns {
        let plan = match &turn_view.turn {
            Some(turn) if since.is_none_or(|s| turn.started_at >= s) => {
                plan_turn(&cx, &harness, turn, &turn_view.invocations)
            }
            Some(_) => continue,
            None => {
                let nodes: Vec<&InvocationNode> = turn_view
                    .invocations
                    .iter()
                    .filter(|n| since.is_none_or(|s| n.row.observed_at >= s))
                    .collect();
                if nodes.is_empty() {
                    continue;
                }
                plan_no_turn(&cx, &harness, &nodes, &turn_ids)
            }
        };
        plans.push(plan);
    }
    plans
}

/// The single model of `usage`'s cells, or the row's.
fn model_of(cells: &[&UsageCell]) -> Option<String> {
    let models: HashSet<&str> = cells.iter().filter_map(|c| c.model.as_deref()).collect();
    (models.len() == 1).then(|| models.into_iter().next().map(str::to_owned))?
}

fn root_attributes(
    cx: &Context<'_>,
    harness: &str,
    usage: &Usage,
    model: Option<String>,
) -> Vec<KeyValue> {
    let mut attrs = attributes::common(Some(harness), cx.conversation);
    attrs.push(KeyValue::new(CONVERSATION_ID, cx.conversation.to_owned()));
    if let Some(model) = model {
        attrs.push(KeyValue::new(REQUEST_MODEL, model));
    }
    attrs.push(KeyValue::new("fanout.session_id", cx.session_id.to_owned()));
    attrs.extend(attributes::usage(usage));
    attrs
}

fn plan_turn(
    cx: &Context<'_>,
    harness: &str,
    turn: &TurnRow,
    invocations: &[InvocationNode],
) -> TracePlan {
    let trace_id = ids::trace_id(cx.session_id, Some(&turn.id));
    let key = ExportKey::Turn(turn.id.clone());
    let span_id = ids::span_id(cx.session_id, &key);
    let in_turn = |c: &UsageCell| c.turn_id.as_deref() == Some(turn.id.as_str());
    let usage = cx.root_usage(in_turn);
    let own_cells: Vec<&UsageCell> = cx
        .cells
        .iter()
        .filter(|c| in_turn(c) && c.subagent_tool_call_id.is_none())
        .collect();
    let open = turn.completed_at.is_none();
    let end = turn.completed_at.unwrap_or_else(|| {
        let nodes = invocations.iter().flat_map(InvocationNode::walk);
        latest_activity(turn.started_at, nodes)
    });
    let mut attrs = root_attributes(cx, harness, &usage, model_of(&own_cells));
    attrs.push(KeyValue::new("fanout.turn_id", turn.id.clone()));
    if let Some(reason) = &turn.stop_reason {
        attrs.push(KeyValue::new("fanout.stop_reason", reason.clone()));
    }
    if open {
        attrs.push(KeyValue::new("fanout.unsettled", true));
    }
    let status = match turn.stop_reason.as_deref() {
        Some(r) if r.starts_with("error") => Status::error(r.to_owned()),
        Some("cancelled") => Status::error("cancelled"),
        _ => Status::Unset,
    };
    let mut spans = vec![PlannedSpan {
        key,
        trace_id,
        span_id,
        parent_span_id: SpanId::INVALID,
        name: format!("invoke_agent {harness}"),
        start: turn.started_at,
        end: end.max(turn.started_at),
        attributes: attrs,
        status,
        unsettled: open,
        ready: !open,
    }];
    let ending = Ending {
        at: end,
        ended: !open,
    };
    for node in invocations {
        plan_invocation(cx, node, trace_id, span_id, ending, &mut spans);
    }
    TracePlan {
        session_id: cx.session_id.to_owned(),
        turn_id: Some(turn.id.clone()),
        spans,
    }
}

fn plan_no_turn(
    cx: &Context<'_>,
    harness: &str,
    nodes: &[&InvocationNode],
    turn_ids: &HashSet<&str>,
) -> TracePlan {
    let trace_id = ids::trace_id(cx.session_id, None);
    let span_id = ids::span_id(cx.session_id, &ExportKey::NoTurn);
    let all: Vec<&InvocationNode> = nodes.iter().flat_map(|n| n.walk()).collect();
    let start = all
        .iter()
        .map(|n| n.row.observed_at)
        .min()
        .unwrap_or_else(Timestamp::now);
    let end = latest_activity(start, all.iter().copied());
    let settled = all.iter().all(|n| n.row.settled_at.is_some());
    let usage = cx.root_usage(|c| c.turn_id.as_deref().is_none_or(|t| !turn_ids.contains(t)));
    let mut attrs = root_attributes(cx, harness, &usage, None);
    attrs.push(KeyValue::new("fanout.turn_known", false));
    if !settled {
        attrs.push(KeyValue::new("fanout.unsettled", true));
    }
    let mut spans = vec![PlannedSpan {
        key: ExportKey::NoTurn,
        trace_id,
        span_id,
        parent_span_id: SpanId::INVALID,
        name: format!("invoke_agent {harness}"),
        start,
        end,
        attributes: attrs,
        status: Status::Unset,
        unsettled: !settled,
        ready: settled,
    }];
    let ending = Ending {
        at: end,
        ended: false,
    };
    for node in nodes {
        plan_invocation(cx, node, trace_id, span_id, ending, &mut spans);
    }
    TracePlan {
        session_id: cx.session_id.to_owned(),
        turn_id: None,
        spans,
    }
}

/// The latest time a turn or its invocations show activity: where an open turn ends.
fn latest_activity<'a>(
    start: Timestamp,
    nodes: impl Iterator<Item = &'a InvocationNode>,
) -> Timestamp {
    nodes
        .flat_map(|n| {
            [
                Some(n.row.updated_at),
                n.row.settled_at,
                Some(invocation_end(n)),
            ]
        })
        .flatten()
        .fold(start, Timestamp::max)
}

/// A settled invocation's end: when it settled, or its start plus the duration its
/// agent reported when that is later (a background child settles at its launch and
/// reports how long it ran). Never before its start.
fn invocation_end(node: &InvocationNode) -> Timestamp {
    let row = &node.row;
    let settled = row.settled_at.unwrap_or(row.observed_at);
    let reported = row
        .duration_ms
        .map(|ms| row.observed_at.plus_micros(ms.saturating_mul(1000)));
    settled
        .max(reported.unwrap_or(settled))
        .max(row.observed_at)
}

/// Where and whether the turn ended, for its unsettled invocations.
#[derive(Clone, Copy)]
struct Ending {
    at: Timestamp,
    ended: bool,
}

fn invocation_status(tool_status: Option<&str>, agent_status: Option<&str>) -> Status {
    for status in [tool_status, agent_status].into_iter().flatten() {
        match status {
            "failed" | "error" => return Status::error(status.to_owned()),
            "cancelled" => return Status::error("cancelled"),
            _ => {}
        }
    }
    Status::Unset
}

fn plan_invocation(
    cx: &Context<'_>,
    node: &InvocationNode,
    trace_id: TraceId,
    parent: SpanId,
    turn: Ending,
    out: &mut Vec<PlannedSpan>,
) {
    let row = &node.row;
    let key = ExportKey::Invocation(row.tool_call_id.clone());
    let span_id = ids::span_id(cx.session_id, &key);
    let settled = row.settled_at.is_some();
    let end = if settled {
        invocation_end(node)
    } else {
        turn.at.max(row.observed_at)
    };
    let own_cells: Vec<&UsageCell> = cx
        .cells
        .iter()
        .filter(|c| c.subagent_tool_call_id.as_deref() == Some(row.tool_call_id.as_str()))
        .collect();
    let model = row.model.clone().or_else(|| model_of(&own_cells));
    let agent = row.subagent_type.as_deref();
    let mut attrs = attributes::common(agent, cx.conversation);
    attrs.extend(attributes::invocation(row, model.as_deref()));
    attrs.extend(attributes::usage(&node.own));
    if !settled {
        attrs.push(KeyValue::new("fanout.unsettled", true));
    }
    out.push(PlannedSpan {
        key,
        trace_id,
        span_id,
        parent_span_id: parent,
        name: agent.map_or_else(
            || "invoke_agent".to_owned(),
            |a| format!("invoke_agent {a}"),
        ),
        start: row.observed_at,
        end,
        attributes: attrs,
        status: invocation_status(row.tool_status.as_deref(), row.agent_status.as_deref()),
        unsettled: !settled,
        ready: (settled && !row.is_async) || turn.ended,
    });
    for child in &node.children {
        plan_invocation(cx, child, trace_id, span_id, turn, out);
    }
}
