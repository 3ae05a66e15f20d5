//! The report's figures: what `fanout report` shows, with stable field names.

use serde::Serialize;

use crate::model::Activation;
use fanout_types::Timestamp;

/// Which activity a report covers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReportScope {
    /// Everything in the database.
    All,
    /// Turns and subagent rows of one task.
    Task {
        /// The task's id.
        task_id: String,
    },
    /// Turns and subagent rows of one session (`task_sessions.id`).
    Session {
        /// The session's row id.
        session_id: String,
    },
    /// Turns that started, and subagent rows observed, in `[since, until)`; an absent
    /// bound is open. A turn in the window counts all of its rows, even those observed
    /// after `until`, so a turn's fan-out is never cut in half by the window.
    Window {
        /// Inclusive start.
        since: Option<Timestamp>,
        /// Exclusive end.
        until: Option<Timestamp>,
    },
}

/// Everything `fanout report` shows. Field names are a stable, pipe-friendly contract.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FanoutReport {
    /// What the report covers.
    pub scope: ReportScope,
    /// The activation keys as stored (AC-24); they bound what is known.
    pub activation: Activation,
    /// How many subagents each turn spawned.
    pub turns: TurnFanout,
    /// The counted subagent rows and how they attach to turns.
    pub subagents: SubagentSummary,
    /// Live against backfilled rows (AC-25).
    pub provenance: Provenance,
    /// Counted subagent rows in scope by `subagent_type`, most frequent first.
    pub by_type: Vec<CountBy>,
    /// Counted subagent rows in scope by `model`, most frequent first.
    pub by_model: Vec<CountBy>,
    /// Tokens over the rows that reported them.
    pub total_tokens: MetricStats,
    /// Durations over the rows that reported them.
    pub duration_ms: MetricStats,
    /// Tool-call counts over the rows that reported them.
    pub tool_use_count: MetricStats,
    /// How deep subagents nest.
    pub nesting: Nesting,
}

/// How many turns spawned 0, 1, 2, 3… subagents.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TurnFanout {
    /// Turns in scope, known and unknown.
    pub turns: i64,
    /// Turns whose fan-out is known; `distribution` sums to this.
    pub known_turns: i64,
    /// Counted subagent rows of the known turns (Σ subagents × turns).
    pub subagents_in_known_turns: i64,
    /// Mean fan-out of the known turns; `None` when there is none.
    pub mean_per_known_turn: Option<f64>,
    /// One bucket per fan-out from 0 to the largest seen, empty buckets included.
    pub distribution: Vec<FanoutBucket>,
    /// Turns left out of the distribution (AC-25).
    pub unknown: UnknownFanout,
}

/// One bar of the fan-out distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FanoutBucket {
    /// Subagent rows per turn.
    pub subagents: i64,
    /// Turns that spawned exactly that many.
    pub turns: i64,
}

/// Turns whose fan-out is unknown (AC-25): started before
/// `subagent_context_backfill_through` with no live row, so only the backfill saw them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UnknownFanout {
    /// `subagent_context_backfill_through`; `None` when nothing was backfilled (`''`) or
    /// the store was never activated: then no turn is unknown.
    pub before: Option<Timestamp>,
    /// Turns whose fan-out is unknown.
    pub turns: i64,
    /// Unknown turns that have at least one backfilled row.
    pub turns_with_backfill_rows: i64,
    /// Backfilled rows in unknown turns: a lower bound of their fan-out, never a count.
    pub backfill_rows: i64,
}

/// Counted subagent rows in scope and how they attach to turns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct SubagentSummary {
    /// Counted rows (backfilled twins of live rows excluded).
    pub total: i64,
    /// Rows with no `turn_id`: outside any turn, in no distribution bucket.
    pub without_turn: i64,
    /// Rows whose turn no longer exists (turn deletion keeps subagent rows, AC-16).
    pub turn_not_found: i64,
    /// Background launches (`is_async`), the ones that usually report no metrics.
    pub async_launches: i64,
    /// Rows never settled by a terminal tool status (AC-10).
    pub unsettled: i64,
}

/// Where the rows came from (AC-25).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct Provenance {
    /// Counted rows written by the capture path (the proxy, or import of its transcripts).
    pub live: i64,
    /// Counted rows read from a harness's own history (Claude Code logs, Codex
    /// rollouts: `source = 'import'`).
    pub imported: i64,
    /// Counted rows reconstructed from messages by the backfill (any source other than
    /// `live` and `import` counts here, so nothing unproven passes as capture).
    pub backfill: i64,
    /// Backfilled rows that duplicate a live row of the same `(session, tool_call_id)`:
    /// not counted anywhere else.
    pub backfill_duplicates_of_live: i64,
    /// Counted rows whose execution is `'unknown'` (every backfilled row, and live rows
    /// written without an execution id, AC-31): "unrecorded", never "shared".
    pub unknown_execution: i64,
    /// The live part of `unknown_execution`.
    pub live_unknown_execution: i64,
}

/// One group of a by-type or by-model breakdown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct CountBy {
    /// The stored value; `null` when the agent never reported one.
    pub value: Option<String>,
    /// Counted subagent rows with that value.
    pub subagents: i64,
}

/// Statistics of one nullable metric over the rows that reported it (AC-7: a NULL is
/// "not reported", never 0). Every statistic is `None` when no row reported.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MetricStats {
    /// Rows that reported a value.
    pub reported: i64,
    /// Rows that reported nothing (NULL): left out of every statistic below.
    pub unreported: i64,
    /// The smallest reported value.
    pub min: Option<i64>,
    /// The median (the mean of the two middle values when `reported` is even).
    pub p50: Option<f64>,
    /// The mean of the reported values.
    pub mean: Option<f64>,
    /// The largest reported value.
    pub max: Option<i64>,
    /// The sum of the reported values.
    pub sum: Option<i64>,
}

/// Nesting depth of the counted rows in scope: 0 = launched by the session's agent,
/// 1 = launched by a subagent, and so on. A row nests under another iff its
/// `parent_tool_call_id` is the `tool_call_id` of another subagent row of the same
/// session (of any execution).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Nesting {
    /// One bucket per depth from 0 to the deepest seen, empty buckets included.
    pub by_depth: Vec<DepthBucket>,
    /// Depth-0 rows that name a parent which is not a subagent row (a plain tool call,
    /// or a parent never recorded).
    pub parent_not_a_subagent: i64,
    /// Rows whose parent chain loops back on itself: no depth can be given.
    pub cyclic: i64,
}

/// One bar of the nesting distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DepthBucket {
    /// 0 = launched by the session's agent, 1 = by a subagent, and so on.
    pub depth: u32,
    /// Counted subagent rows at that depth.
    pub subagents: i64,
}
