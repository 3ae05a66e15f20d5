//! Runs as people look at them (DESIGN 8, 4.1a): one session as a tree (turn ->
//! invocations in launch order -> nested ones) with each invocation's usage and cost,
//! own and with descendants, and the usage report (per session, subagent type, model
//! and invocation). Built from the rows and the ledger cells of [`crate::read_sessions`];
//! every roll-up counts each response once: an invocation's own usage is the cells
//! attributed to it, its total adds its descendants', a session's total is all cells.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::cost::{PriceTable, Usage, UsageCell};
use crate::model::{Source, SubagentRow};
use crate::read_sessions::{SessionRow, TurnRow};

/// One invocation in the tree.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InvocationNode {
    /// The stored row.
    #[serde(flatten)]
    pub row: SubagentRow,
    /// Depth below the turn (1: launched by the session's own agent).
    pub depth: usize,
    /// The ledger rows attributed to it.
    pub own: Usage,
    /// Its own and every descendant's.
    pub with_descendants: Usage,
    /// The invocations it launched, in launch order.
    pub children: Vec<InvocationNode>,
}

impl InvocationNode {
    /// Itself and every descendant, depth first in launch order.
    pub fn walk(&self) -> Vec<&InvocationNode> {
        let mut out = vec![self];
        for child in &self.children {
            out.extend(child.walk());
        }
        out
    }
}

/// One turn of a session with its invocations.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TurnView {
    /// 1-based, in start order; the group of invocations with no known turn comes last.
    pub number: usize,
    /// The turn row; `None` for the invocations and usage of no known turn.
    pub turn: Option<TurnRow>,
    /// Every response made in the turn (the session's agent and its subagents).
    pub usage: Usage,
    /// The invocations the session's own agent launched in it, in launch order.
    pub invocations: Vec<InvocationNode>,
}

impl TurnView {
    /// Every invocation of the turn, nested ones included, depth first.
    pub fn all_invocations(&self) -> Vec<&InvocationNode> {
        self.invocations.iter().flat_map(|i| i.walk()).collect()
    }
}

/// A session's usage split by who made the calls.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SessionUsageSplit {
    /// Every response of the session.
    pub total: Usage,
    /// The session's own agent (no attribution).
    pub own_agent: Usage,
    /// Made in a subagent invocation's context.
    pub subagents: Usage,
    /// Subagents' share of the session's tokens, 0..1 (`None` without tokens).
    pub subagent_token_share: Option<f64>,
    /// Subagents' share of the priced cost, 0..1 (`None` without a priced cost).
    pub subagent_cost_share: Option<f64>,
}

impl SessionUsageSplit {
    fn from_cells<'a>(cells: impl IntoIterator<Item = &'a UsageCell>, prices: &PriceTable) -> Self {
        let mut own_agent = Usage::default();
        let mut subagents = Usage::default();
        for cell in cells {
            let usage = Usage::of_cell(cell, prices);
            if cell.subagent_tool_call_id.is_some() {
                subagents = subagents.plus(&usage);
            } else {
                own_agent = own_agent.plus(&usage);
            }
        }
        let total = own_agent.plus(&subagents);
        let share = |part: Option<f64>, whole: Option<f64>| match (part, whole) {
            (Some(p), Some(w)) if w > 0.0 => Some(p / w),
            (None, Some(w)) if w > 0.0 => Some(0.0),
            _ => None,
        };
        SessionUsageSplit {
            subagent_token_share: share(
                subagents.total_tokens().map(|t| t as f64),
                total.total_tokens().map(|t| t as f64),
            ),
            subagent_cost_share: share(subagents.cost.usd, total.cost.usd),
            total,
            own_agent,
            subagents,
        }
    }
}

/// One session as a tree.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionView {
    /// The session row.
    pub session: SessionRow,
    /// Its usage, own agent and subagents.
    pub usage: SessionUsageSplit,
    /// Subagent rows (invocations), after dropping backfilled twins of live rows.
    pub invocations: usize,
    /// Of those, launched in the background.
    pub async_invocations: usize,
    /// Of those, never settled.
    pub unsettled_invocations: usize,
    /// The turns, in start order.
    pub turns: Vec<TurnView>,
}

/// The one row per launch: a backfilled row whose `(tool_call_id)` also has a live or
/// imported row is the same launch seen twice (AC-22) and is dropped.
pub fn counted_rows(rows: Vec<SubagentRow>) -> Vec<SubagentRow> {
    let seen: HashSet<(String, String)> = rows
        .iter()
        .filter(|r| r.source != Source::Backfill)
        .map(|r| (r.task_session_id.clone(), r.tool_call_id.clone()))
        .collect();
    let mut kept = HashSet::new();
    rows.into_iter()
        .filter(|r| {
            let key = (r.task_session_id.clone(), r.tool_call_id.clone());
            if r.source == Source::Backfill && seen.contains(&key) {
                return false;
            }
            // Several executions with one tool_call_id: the ledger attributes by
            // tool_call_id alone, so the first row stands for them in the tree.
            kept.insert(key)
        })
        .collect()
}

/// Builds the tree of one session from its rows (any order), turns and cells.
pub fn session_view(
    session: SessionRow,
    turns: Vec<TurnRow>,
    rows: Vec<SubagentRow>,
    cells: &[UsageCell],
    prices: &PriceTable,
) -> SessionView {
    let rows = counted_rows(rows);
    let mut by_turn = forest(&rows, cells, prices);
    let turn_ids: HashSet<&str> = turns.iter().map(|t| t.id.as_str()).collect();
    let mut turn_views = Vec::new();
    for (index, turn) in turns.iter().enumerate() {
        turn_views.push(TurnView {
            number: index + 1,
            usage: Usage::of_cells(
                cells
                    .iter()
                    .filter(|c| c.turn_id.as_deref() == Some(turn.id.as_str())),
                prices,
            ),
            invocations: by_turn.remove(&Some(turn.id.clone())).unwrap_or_default(),
            turn: Some(turn.clone()),
        });
    }
    let orphans: Vec<InvocationNode> = by_turn.into_values().flatten().collect();
    let orphan_usage = Usage::of_cells(
        cells
            .iter()
            .filter(|c| c.turn_id.as_deref().is_none_or(|t| !turn_ids.contains(t))),
        prices,
    );
    if !orphans.is_empty() || orphan_usage.tokens.responses > 0 {
        turn_views.push(TurnView {
            number: turns.len() + 1,
            turn: None,
            usage: orphan_usage,
            invocations: orphans,
        });
    }
    SessionView {
        usage: SessionUsageSplit::from_cells(cells, prices),
        invocations: rows.len(),
        async_invocations: rows.iter().filter(|r| r.is_async).count(),
        unsettled_invocations: rows.iter().filter(|r| r.settled_at.is_none()).count(),
        session,
        turns: turn_views,
    }
}

/// The invocation trees of one session's counted rows, by the turn of their root.
fn forest(
    rows: &[SubagentRow],
    cells: &[UsageCell],
    prices: &PriceTable,
) -> BTreeMap<Option<String>, Vec<InvocationNode>> {
    let mut own_by_call: HashMap<&str, Usage> = HashMap::new();
    for cell in cells {
        if let Some(call) = cell.subagent_tool_call_id.as_deref() {
            let usage = Usage::of_cell(cell, prices);
            let entry = own_by_call.entry(call).or_default();
            *entry = entry.plus(&usage);
        }
    }
    let calls: HashSet<&str> = rows.iter().map(|r| r.tool_call_id.as_str()).collect();
    let mut children_of: HashMap<&str, Vec<&SubagentRow>> = HashMap::new();
    let mut roots: Vec<&SubagentRow> = Vec::new();
    for row in rows {
        match row.parent_tool_call_id.as_deref() {
            Some(parent) if calls.contains(parent) && parent != row.tool_call_id => {
                children_of.entry(parent).or_default().push(row);
            }
            _ => roots.push(row),
        }
    }
    let by_launch = |a: &&SubagentRow, b: &&SubagentRow| {
        (a.observed_at, &a.tool_call_id).cmp(&(b.observed_at, &b.tool_call_id))
    };
    roots.sort_by(by_launch);
    for list in children_of.values_mut() {
        list.sort_by(by_launch);
    }
    let builder = TreeBuilder {
        children_of: &children_of,
        own_by_call: &own_by_call,
    };
    let mut visited = HashSet::new();
    let mut by_turn: BTreeMap<Option<String>, Vec<InvocationNode>> = BTreeMap::new();
    for root in roots {
        if let Some(node) = builder.node(root, 1, &mut visited) {
            by_turn.entry(root.turn_id.clone()).or_default().push(node);
        }
    }
    // Rows in a parent cycle are reachable from no root: show them at the top level.
    for row in rows {
        if !visited.contains(row.tool_call_id.as_str())
            && let Some(node) = builder.node(row, 1, &mut visited)
        {
            by_turn.entry(row.turn_id.clone()).or_default().push(node);
        }
    }
    by_turn
}

struct TreeBuilder<'a> {
    children_of: &'a HashMap<&'a str, Vec<&'a SubagentRow>>,
    own_by_call: &'a HashMap<&'a str, Usage>,
}

impl<'a> TreeBuilder<'a> {
    fn node(
        &self,
        row: &'a SubagentRow,
        depth: usize,
        visited: &mut HashSet<&'a str>,
    ) -> Option<InvocationNode> {
        if !visited.insert(row.tool_call_id.as_str()) {
            return None;
        }
        let own = self
            .own_by_call
            .get(row.tool_call_id.as_str())
            .cloned()
            .unwrap_or_default();
        let children: Vec<InvocationNode> = self
            .children_of
            .get(row.tool_call_id.as_str())
            .into_iter()
            .flatten()
            .filter_map(|child| self.node(child, depth + 1, visited))
            .collect();
        let with_descendants = children
            .iter()
            .fold(own.clone(), |sum, c| sum.plus(&c.with_descendants));
        Some(InvocationNode {
            row: row.clone(),
            depth,
            own,
            with_descendants,
            children,
        })
    }
}

/// Usage of one session in the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionUsageLine {
    /// `task_sessions.id`.
    pub task_session_id: String,
    /// Its task.
    pub task_id: String,
    /// Its usage, own agent and subagents, with the subagents' shares.
    #[serde(flatten)]
    pub usage: SessionUsageSplit,
}

/// Usage of one subagent type (or model) in the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupUsageLine {
    /// The type or model; `None`: not reported.
    pub key: Option<String>,
    /// Invocations of this type (for a model: ledger responses are in `usage`).
    pub invocations: usize,
    /// The responses of these invocations themselves (for a model: of that model).
    pub own: Usage,
    /// With their descendants, each response once (a descendant of the same type is
    /// inside its ancestor's figure and not added again).
    pub with_descendants: Usage,
}

/// Usage of one invocation in the report: measured and, where the agent said, reported.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InvocationUsageLine {
    /// `task_sessions.id`.
    pub task_session_id: String,
    /// The launching tool call.
    pub tool_call_id: String,
    /// The parent invocation, if nested.
    pub parent_tool_call_id: Option<String>,
    /// Its type.
    pub subagent_type: Option<String>,
    /// Its description.
    pub description: Option<String>,
    /// Its model, as the row says.
    pub model: Option<String>,
    /// Launched in the background.
    pub is_async: bool,
    /// The agent's own `totalTokens` (reported), `None` when it never said.
    pub reported_total_tokens: Option<i64>,
    /// The ledger's responses attributed to it (measured).
    pub own: Usage,
    /// With its descendants.
    pub with_descendants: Usage,
}

/// The usage section of `fanout report`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UsageReport {
    /// The prices used: the date taken, sources and overrides.
    pub prices_taken_on: String,
    /// The price pages and any override files.
    pub price_sources: Vec<String>,
    /// Everything in scope.
    pub total: SessionUsageSplit,
    /// Per session, by id.
    pub by_session: Vec<SessionUsageLine>,
    /// Per subagent type.
    pub by_type: Vec<GroupUsageLine>,
    /// Per model (of the ledger's responses).
    pub by_model: Vec<GroupUsageLine>,
    /// Per invocation, by session then launch.
    pub by_invocation: Vec<InvocationUsageLine>,
}

/// Builds the usage report from the rows and cells of one scope.
pub fn usage_report(
    rows: Vec<SubagentRow>,
    cells: &[UsageCell],
    prices: &PriceTable,
) -> UsageReport {
    let mut rows_by_session: BTreeMap<String, Vec<SubagentRow>> = BTreeMap::new();
    for row in counted_rows(rows) {
        rows_by_session
            .entry(row.task_session_id.clone())
            .or_default()
            .push(row);
    }
    let mut cells_by_session: BTreeMap<&str, Vec<UsageCell>> = BTreeMap::new();
    for cell in cells {
        cells_by_session
            .entry(cell.task_session_id.as_str())
            .or_default()
            .push(cell.clone());
    }
    let mut by_session = Vec::new();
    let mut by_invocation = Vec::new();
    let mut by_type: BTreeMap<Option<String>, GroupUsageLine> = BTreeMap::new();
    let session_ids: std::collections::BTreeSet<String> = rows_by_session
        .keys()
        .cloned()
        .chain(cells_by_session.keys().map(|k| (*k).to_owned()))
        .collect();
    for session_id in session_ids {
        let rows = rows_by_session.remove(&session_id).unwrap_or_default();
        let session_cells = cells_by_session
            .get(session_id.as_str())
            .cloned()
            .unwrap_or_default();
        let task_id = rows
            .first()
            .map(|r| r.task_id.clone())
            .or_else(|| session_cells.first().map(|c| c.task_id.clone()))
            .unwrap_or_default();
        for roots in forest(&rows, &session_cells, prices).values() {
            for root in roots {
                for node in root.walk() {
                    let row = &node.row;
                    by_invocation.push(InvocationUsageLine {
                        task_session_id: row.task_session_id.clone(),
                        tool_call_id: row.tool_call_id.clone(),
                        parent_tool_call_id: row.parent_tool_call_id.clone(),
                        subagent_type: row.subagent_type.clone(),
                        description: row.description.clone(),
                        model: row.model.clone(),
                        is_async: row.is_async,
                        reported_total_tokens: row.total_tokens,
                        own: node.own.clone(),
                        with_descendants: node.with_descendants.clone(),
                    });
                }
                add_by_type(&mut by_type, root, &mut Vec::new());
            }
        }
        by_session.push(SessionUsageLine {
            task_session_id: session_id,
            task_id,
            usage: SessionUsageSplit::from_cells(&session_cells, prices),
        });
    }
    let mut by_model: BTreeMap<Option<String>, GroupUsageLine> = BTreeMap::new();
    for cell in cells {
        let usage = Usage::of_cell(cell, prices);
        let line = by_model
            .entry(cell.model.clone())
            .or_insert_with(|| GroupUsageLine {
                key: cell.model.clone(),
                invocations: 0,
                own: Usage::default(),
                with_descendants: Usage::default(),
            });
        line.own = line.own.plus(&usage);
        line.with_descendants = line.own.clone();
    }
    UsageReport {
        prices_taken_on: prices.taken_on.clone(),
        price_sources: prices
            .sources
            .iter()
            .chain(&prices.overrides)
            .cloned()
            .collect(),
        total: SessionUsageSplit::from_cells(cells, prices),
        by_session,
        by_type: by_type.into_values().collect(),
        by_model: by_model.into_values().collect(),
        by_invocation,
    }
}

/// Adds `node` and its subtree to the per-type lines; `open_types` are the types of
/// its ancestors, so a subtree is added to a type once, at its topmost invocation.
fn add_by_type(
    lines: &mut BTreeMap<Option<String>, GroupUsageLine>,
    node: &InvocationNode,
    open_types: &mut Vec<Option<String>>,
) {
    let key = node.row.subagent_type.clone();
    let line = lines.entry(key.clone()).or_insert_with(|| GroupUsageLine {
        key: key.clone(),
        invocations: 0,
        own: Usage::default(),
        with_descendants: Usage::default(),
    });
    line.invocations += 1;
    line.own = line.own.plus(&node.own);
    if !open_types.contains(&key) {
        line.with_descendants = line.with_descendants.plus(&node.with_descendants);
    }
    open_types.push(key);
    for child in &node.children {
        add_by_type(lines, child, open_types);
    }
    open_types.pop();
}
