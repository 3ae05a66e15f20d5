//! The fan-out report (DESIGN 1 "query", AC-25): what `fanout report` prints, computed
//! in SQL on both engines from one generator per statement, so the engines cannot drift.
//!
//! The decisions a reader of the figures needs, in one place (each is repeated on the
//! field it governs):
//!
//! * **Scope.** A task or a session selects turns and subagent rows by their `task_id` /
//!   `task_session_id`. A time window `[since, until)` selects turns by `started_at` and
//!   subagent rows by `observed_at`; every bound is a timestamp comparison (AC-24e).
//! * **One launch, one count.** AC-22 lets a backfilled row and a live row exist for the
//!   same `(session, tool_call_id)`: they are one launch seen twice. The live row is
//!   counted and the backfilled twin is only reported as
//!   [`Provenance::backfill_duplicates_of_live`]. Rows of different executions are
//!   different launches (AC-30) and all count.
//! * **Fan-out of a turn** = every counted subagent row whose `turn_id` is that turn,
//!   nested launches included ([`Nesting`] tells them apart); a turn with no row has
//!   fan-out 0 — unless its fan-out is unknown.
//! * **Unknown fan-out (AC-25).** See [`UNKNOWN_FANOUT_RULE`]: a turn that started
//!   before `subagent_context_backfill_through` and has no `live` row is left out of
//!   the distribution, never counted as 0; its backfilled rows are only a lower bound.
//! * **NULL is not 0 (AC-7).** Metric statistics are over reported values only, and
//!   each states how many rows reported nothing.

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde::Serialize;

use crate::error::StoreError;
use crate::model::{Activation, Engine};
use crate::store::{SqlStore, Store};
use crate::time::Timestamp;

/// How [`TurnFanout::unknown`] is decided; printed with every report so the reader
/// never has to guess.
pub const UNKNOWN_FANOUT_RULE: &str = "a turn that started before subagent_context_backfill_through and has no live subagent row has unknown fan-out: before that instant the only evidence is the backfill, which sees only messages that carried subagent metadata, so no row there means \"not recorded\", not \"none\"; such turns are left out of the distribution and their backfilled rows are a lower bound. A turn with a live row was seen by the capture path (proxy or import), which records every launch, so its count is known at any age.";

/// The label of a NULL grouping value (an agent that never said its type or model).
pub const UNREPORTED_LABEL: &str = "(unreported)";

/// Which activity a report covers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReportScope {
    /// Everything in the database.
    All,
    /// Turns and subagent rows of one task.
    Task { task_id: String },
    /// Turns and subagent rows of one session (`task_sessions.id`).
    Session { session_id: String },
    /// Turns that started, and subagent rows observed, in `[since, until)`; an absent
    /// bound is open. A turn in the window counts all of its rows, even those observed
    /// after `until`, so a turn's fan-out is never cut in half by the window.
    Window {
        since: Option<Timestamp>,
        until: Option<Timestamp>,
    },
}

impl fmt::Display for ReportScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportScope::All => f.write_str("everything"),
            ReportScope::Task { task_id } => write!(f, "task {task_id}"),
            ReportScope::Session { session_id } => write!(f, "session {session_id}"),
            ReportScope::Window { since, until } => {
                let bound = |t: &Option<Timestamp>, open: &str| {
                    t.map(|t| t.canonical()).unwrap_or_else(|| open.to_owned())
                };
                write!(
                    f,
                    "window [{}, {})",
                    bound(since, "the beginning"),
                    bound(until, "now")
                )
            }
        }
    }
}

/// Everything `fanout report` shows. Field names are a stable, pipe-friendly contract.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FanoutReport {
    pub scope: ReportScope,
    /// The activation keys as stored (AC-24); they bound what is known.
    pub activation: Activation,
    pub turns: TurnFanout,
    pub subagents: SubagentSummary,
    pub provenance: Provenance,
    /// Counted subagent rows in scope by `subagent_type`, most frequent first.
    pub by_type: Vec<CountBy>,
    /// Counted subagent rows in scope by `model`, most frequent first.
    pub by_model: Vec<CountBy>,
    pub total_tokens: MetricStats,
    pub duration_ms: MetricStats,
    pub tool_use_count: MetricStats,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FanoutBucket {
    /// Subagent rows per turn.
    pub subagents: i64,
    /// Turns that spawned exactly that many.
    pub turns: i64,
}

/// Turns whose fan-out is unknown: [`UNKNOWN_FANOUT_RULE`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UnknownFanout {
    /// `subagent_context_backfill_through`; `None` when nothing was backfilled (`''`) or
    /// the store was never activated: then no turn is unknown.
    pub before: Option<Timestamp>,
    pub turns: i64,
    /// Unknown turns that have at least one backfilled row.
    pub turns_with_backfill_rows: i64,
    /// Backfilled rows in unknown turns: a lower bound of their fan-out, never a count.
    pub backfill_rows: i64,
    pub rule: &'static str,
}

/// Counted subagent rows in scope and how they attach to turns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Provenance {
    /// Counted rows written by the capture path (proxy or import).
    pub live: i64,
    /// Counted rows reconstructed from messages by the backfill (any source other than
    /// `live` counts here, so nothing unproven passes as live capture).
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CountBy {
    /// The stored value; `null` when the agent never reported one.
    pub value: Option<String>,
    pub subagents: i64,
}

impl CountBy {
    /// The value for people: [`UNREPORTED_LABEL`] for NULL.
    pub fn label(&self) -> &str {
        self.value.as_deref().unwrap_or(UNREPORTED_LABEL)
    }
}

/// Statistics of one nullable metric over the rows that reported it (AC-7: a NULL is
/// "not reported", never 0). Every statistic is `None` when no row reported.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MetricStats {
    /// Rows that reported a value.
    pub reported: i64,
    /// Rows that reported nothing (NULL): left out of every statistic below.
    pub unreported: i64,
    pub min: Option<i64>,
    /// The median (the mean of the two middle values when `reported` is even).
    pub p50: Option<f64>,
    pub mean: Option<f64>,
    pub max: Option<i64>,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DepthBucket {
    pub depth: u32,
    pub subagents: i64,
}

/// One statement and its text binds, placeholders numbered as the binds were added.
struct Statement {
    sql: String,
    binds: Vec<Option<String>>,
}

/// Collects binds while a statement is generated, handing out their placeholders.
struct Binds {
    engine: Engine,
    values: Vec<Option<String>>,
}

impl Binds {
    fn new(engine: Engine) -> Self {
        Binds {
            engine,
            values: Vec::new(),
        }
    }

    fn text(&mut self, value: &str) -> String {
        self.values.push(Some(value.to_owned()));
        format!("${}", self.values.len())
    }

    /// A timestamp bind; `None` binds NULL, which makes every comparison with it false.
    fn timestamp(&mut self, value: Option<Timestamp>) -> String {
        self.values.push(value.map(|t| t.canonical()));
        self.engine.ts_param(self.values.len())
    }

    fn finish(self, sql: String) -> Statement {
        Statement {
            sql,
            binds: self.values,
        }
    }
}

impl ReportScope {
    /// The scope as a predicate on the row aliased `alias`, whose time is `time_column`.
    fn predicate(&self, binds: &mut Binds, alias: &str, time_column: &str) -> String {
        match self {
            ReportScope::All => "1 = 1".to_owned(),
            ReportScope::Task { task_id } => format!("{alias}.task_id = {}", binds.text(task_id)),
            ReportScope::Session { session_id } => {
                format!("{alias}.task_session_id = {}", binds.text(session_id))
            }
            ReportScope::Window { since, until } => {
                let mut parts = Vec::new();
                if let Some(since) = since {
                    parts.push(format!(
                        "{alias}.{time_column} >= {}",
                        binds.timestamp(Some(*since))
                    ));
                }
                if let Some(until) = until {
                    parts.push(format!(
                        "{alias}.{time_column} < {}",
                        binds.timestamp(Some(*until))
                    ));
                }
                if parts.is_empty() {
                    "1 = 1".to_owned()
                } else {
                    parts.join(" AND ")
                }
            }
        }
    }

    fn subagent_predicate(&self, binds: &mut Binds, alias: &str) -> String {
        self.predicate(binds, alias, "observed_at")
    }

    fn turn_predicate(&self, binds: &mut Binds, alias: &str) -> String {
        self.predicate(binds, alias, "started_at")
    }
}

/// Every subagent row with `duplicate_of_live` = 1 on a non-live row whose
/// `(session, tool_call_id)` also has a live row: the one launch seen twice (AC-22).
fn subagents_with_duplicate_flag() -> &'static str {
    "(SELECT s.*, CASE WHEN s.source <> 'live' AND EXISTS (
         SELECT 1 FROM task_session_subagents l
         WHERE l.task_session_id = s.task_session_id AND l.tool_call_id = s.tool_call_id AND l.source = 'live'
       ) THEN 1 ELSE 0 END AS duplicate_of_live
     FROM task_session_subagents s)"
}

/// The counted rows in scope, aliased `c`: `FROM … WHERE …` without the keywords' tail.
fn counted_in_scope(binds: &mut Binds, scope: &ReportScope) -> String {
    format!(
        "{} AS c WHERE c.duplicate_of_live = 0 AND {}",
        subagents_with_duplicate_flag(),
        scope.subagent_predicate(binds, "c")
    )
}

/// Per (unknown?, fan-out): how many turns. A turn is unknown iff it has no live row
/// and started before the backfill_through bind (NULL binds make no turn unknown).
fn turn_distribution(
    e: Engine,
    scope: &ReportScope,
    backfill_through: Option<Timestamp>,
) -> Statement {
    let mut binds = Binds::new(e);
    let turn_scope = scope.turn_predicate(&mut binds, "t");
    let before = binds.timestamp(backfill_through);
    let sql = format!(
        "SELECT k.unknown_fanout, k.subagents, COUNT(*) AS turns FROM (
           SELECT CAST(CASE WHEN pt.live_rows = 0 AND pt.started_at < {before} THEN 1 ELSE 0 END AS BIGINT) AS unknown_fanout,
                  pt.subagents
           FROM (
             SELECT t.id, t.started_at, COUNT(c.id) AS subagents,
                    COUNT(CASE WHEN c.source = 'live' THEN 1 END) AS live_rows
             FROM task_session_turns t
             LEFT JOIN {counted} c ON c.turn_id = t.id AND c.duplicate_of_live = 0
             WHERE {turn_scope}
             GROUP BY t.id, t.started_at
           ) AS pt
         ) AS k
         GROUP BY k.unknown_fanout, k.subagents
         ORDER BY k.unknown_fanout, k.subagents",
        counted = subagents_with_duplicate_flag(),
    );
    binds.finish(sql)
}

/// Row counts of the summary and provenance sections, duplicates included so they can
/// be reported.
fn subagent_summary(e: Engine, scope: &ReportScope) -> Statement {
    let mut binds = Binds::new(e);
    let in_scope = scope.subagent_predicate(&mut binds, "c");
    let counted = |condition: &str| {
        format!("COUNT(CASE WHEN c.duplicate_of_live = 0 AND ({condition}) THEN 1 END)")
    };
    let columns = [
        counted("1 = 1"),
        counted("c.turn_id IS NULL"),
        counted(
            "c.turn_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM task_session_turns t WHERE t.id = c.turn_id)",
        ),
        counted("c.is_async <> 0"),
        counted("c.settled_at IS NULL"),
        counted("c.source = 'live'"),
        counted("c.source <> 'live'"),
        "COUNT(CASE WHEN c.duplicate_of_live = 1 THEN 1 END)".to_owned(),
        counted("c.agent_execution_id = 'unknown'"),
        counted("c.agent_execution_id = 'unknown' AND c.source = 'live'"),
    ];
    let sql = format!(
        "SELECT {} FROM {} AS c WHERE {in_scope}",
        columns.join(", "),
        subagents_with_duplicate_flag()
    );
    binds.finish(sql)
}

/// The nullable metrics the report summarises, as stored.
const METRIC_COLUMNS: [&str; 3] = ["total_tokens", "duration_ms", "tool_use_count"];

/// Per metric: reported count, MIN, MAX and SUM over reported values only (SQL
/// aggregates skip NULL, which is exactly AC-7's reading).
fn metric_aggregates(e: Engine, scope: &ReportScope) -> Statement {
    let mut binds = Binds::new(e);
    let from = counted_in_scope(&mut binds, scope);
    let columns = METRIC_COLUMNS
        .iter()
        .map(|col| {
            // PostgreSQL's SUM(bigint) is numeric; the cast keeps one integer type.
            format!("COUNT(c.{col}), MIN(c.{col}), MAX(c.{col}), CAST(SUM(c.{col}) AS BIGINT)")
        })
        .collect::<Vec<_>>()
        .join(", ");
    binds.finish(format!("SELECT COUNT(*), {columns} FROM {from}"))
}

/// The middle one or two reported values of `column` (the median without fetching all).
fn metric_middle(e: Engine, scope: &ReportScope, column: &str, reported: i64) -> Statement {
    let mut binds = Binds::new(e);
    let from = counted_in_scope(&mut binds, scope);
    let offset = (reported - 1) / 2;
    let take = if reported % 2 == 0 { 2 } else { 1 };
    binds.finish(format!(
        "SELECT c.{column} FROM {from} AND c.{column} IS NOT NULL ORDER BY c.{column} LIMIT {take} OFFSET {offset}"
    ))
}

/// Counted rows in scope grouped by `column` (NULL is a group of its own).
fn count_by(e: Engine, scope: &ReportScope, column: &str) -> Statement {
    let mut binds = Binds::new(e);
    let from = counted_in_scope(&mut binds, scope);
    binds.finish(format!(
        "SELECT c.{column}, COUNT(*) FROM {from} GROUP BY c.{column}"
    ))
}

/// `(session, tool_call_id, parent_tool_call_id, in scope?)` of every counted row of
/// every session with a row in scope: parents may lie outside the scope.
fn nesting_links(e: Engine, scope: &ReportScope) -> Statement {
    let mut binds = Binds::new(e);
    let row_in_scope = scope.subagent_predicate(&mut binds, "c");
    let session_in_scope = scope.subagent_predicate(&mut binds, "s");
    binds.finish(format!(
        "SELECT c.task_session_id, c.tool_call_id, c.parent_tool_call_id,
                CAST(CASE WHEN {row_in_scope} THEN 1 ELSE 0 END AS BIGINT)
         FROM {} AS c
         WHERE c.duplicate_of_live = 0
           AND c.task_session_id IN (SELECT s.task_session_id FROM task_session_subagents s WHERE {session_in_scope})",
        subagents_with_duplicate_flag()
    ))
}

type SummaryRow = (i64, i64, i64, i64, i64, i64, i64, i64, i64, i64);
/// Rows in scope, then per metric of [`METRIC_COLUMNS`]: reported, MIN, MAX, SUM.
type MetricAggregatesRow = (
    i64,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// One metric's reported count, MIN, MAX and SUM, as [`metric_aggregates`] returns them.
type Aggregates = (i64, Option<i64>, Option<i64>, Option<i64>);

/// Builds the report with one read per section (all on the reader pool).
pub(crate) async fn fanout_report(
    store: &SqlStore,
    scope: &ReportScope,
    activation: Activation,
) -> Result<FanoutReport, StoreError> {
    let e = store.engine();
    let backfill_through = parse_backfill_through(&activation)?;

    let statement = turn_distribution(e, scope, backfill_through);
    let turn_rows: Vec<(i64, i64, i64)> = store
        .fetch_all_as("fan-out report: turns", &statement.sql, &statement.binds)
        .await?;

    let statement = subagent_summary(e, scope);
    let summary: SummaryRow = fetch_one(store, "fan-out report: subagents", &statement).await?;

    let statement = metric_aggregates(e, scope);
    let a: MetricAggregatesRow = fetch_one(store, "fan-out report: metrics", &statement).await?;
    let rows_in_scope = a.0;
    let metric = |column: &'static str, aggregates: Aggregates| {
        metric_stats(store, e, scope, column, rows_in_scope, aggregates)
    };
    let total_tokens = metric(METRIC_COLUMNS[0], (a.1, a.2, a.3, a.4)).await?;
    let duration_ms = metric(METRIC_COLUMNS[1], (a.5, a.6, a.7, a.8)).await?;
    let tool_use_count = metric(METRIC_COLUMNS[2], (a.9, a.10, a.11, a.12)).await?;

    let statement = nesting_links(e, scope);
    let links: Vec<(String, String, Option<String>, i64)> = store
        .fetch_all_as("fan-out report: nesting", &statement.sql, &statement.binds)
        .await?;

    Ok(FanoutReport {
        scope: scope.clone(),
        activation,
        turns: turn_fanout(&turn_rows, backfill_through),
        subagents: SubagentSummary {
            total: summary.0,
            without_turn: summary.1,
            turn_not_found: summary.2,
            async_launches: summary.3,
            unsettled: summary.4,
        },
        provenance: Provenance {
            live: summary.5,
            backfill: summary.6,
            backfill_duplicates_of_live: summary.7,
            unknown_execution: summary.8,
            live_unknown_execution: summary.9,
        },
        by_type: breakdown(store, e, scope, "subagent_type").await?,
        by_model: breakdown(store, e, scope, "model").await?,
        total_tokens,
        duration_ms,
        tool_use_count,
        nesting: nesting(&links),
    })
}

async fn breakdown(
    store: &SqlStore,
    e: Engine,
    scope: &ReportScope,
    column: &str,
) -> Result<Vec<CountBy>, StoreError> {
    let statement = count_by(e, scope, column);
    let rows: Vec<(Option<String>, i64)> = store
        .fetch_all_as(
            "fan-out report: breakdown",
            &statement.sql,
            &statement.binds,
        )
        .await?;
    Ok(sorted_groups(rows))
}

/// Completes one metric's aggregates with its median and mean; nothing is computed from
/// a metric no row reported.
async fn metric_stats(
    store: &SqlStore,
    e: Engine,
    scope: &ReportScope,
    column: &str,
    rows_in_scope: i64,
    (reported, min, max, sum): Aggregates,
) -> Result<MetricStats, StoreError> {
    let p50 = if reported > 0 {
        let statement = metric_middle(e, scope, column, reported);
        let middle: Vec<(i64,)> = store
            .fetch_all_as("fan-out report: median", &statement.sql, &statement.binds)
            .await?;
        median_of_middle(&middle.iter().map(|m| m.0).collect::<Vec<_>>())
    } else {
        None
    };
    Ok(MetricStats {
        reported,
        unreported: rows_in_scope - reported,
        min,
        p50,
        mean: sum
            .filter(|_| reported > 0)
            .map(|sum| sum as f64 / reported as f64),
        max,
        sum,
    })
}

async fn fetch_one<T>(
    store: &SqlStore,
    op: &'static str,
    statement: &Statement,
) -> Result<T, StoreError>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
        + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
        + Send
        + Unpin,
{
    store
        .fetch_all_as::<T>(op, &statement.sql, &statement.binds)
        .await?
        .into_iter()
        .next()
        .ok_or(StoreError::Query {
            op,
            cause: sqlx::Error::RowNotFound,
        })
}

/// `backfill_through` as an instant; `''` (nothing backfilled) and a missing key are
/// `None`, and never a time to compare with (the `''` sentinel is not a timestamp).
fn parse_backfill_through(activation: &Activation) -> Result<Option<Timestamp>, StoreError> {
    match activation.backfill_through.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(text) => Timestamp::parse(text)
            .map(Some)
            .map_err(|cause| StoreError::BadTimestamp {
                what: "fanout_meta.subagent_context_backfill_through".to_owned(),
                cause,
            }),
    }
}

/// Folds `(unknown?, fan-out, turns)` rows into the known distribution (gaps filled with
/// empty buckets) and the unknown bucket.
fn turn_fanout(rows: &[(i64, i64, i64)], backfill_through: Option<Timestamp>) -> TurnFanout {
    let mut unknown = UnknownFanout {
        before: backfill_through,
        turns: 0,
        turns_with_backfill_rows: 0,
        backfill_rows: 0,
        rule: UNKNOWN_FANOUT_RULE,
    };
    let mut known: Vec<(i64, i64)> = Vec::new();
    for &(is_unknown, subagents, turns) in rows {
        if is_unknown != 0 {
            unknown.turns += turns;
            if subagents > 0 {
                unknown.turns_with_backfill_rows += turns;
                unknown.backfill_rows += subagents * turns;
            }
        } else {
            known.push((subagents, turns));
        }
    }
    let largest = known.iter().map(|(s, _)| *s).max().unwrap_or(-1);
    let distribution: Vec<FanoutBucket> = (0..=largest)
        .map(|subagents| FanoutBucket {
            subagents,
            turns: known
                .iter()
                .filter(|(s, _)| *s == subagents)
                .map(|(_, t)| t)
                .sum(),
        })
        .collect();
    let known_turns: i64 = distribution.iter().map(|b| b.turns).sum();
    let subagents_in_known_turns: i64 = distribution.iter().map(|b| b.subagents * b.turns).sum();
    TurnFanout {
        turns: known_turns + unknown.turns,
        known_turns,
        subagents_in_known_turns,
        mean_per_known_turn: (known_turns > 0)
            .then(|| subagents_in_known_turns as f64 / known_turns as f64),
        distribution,
        unknown,
    }
}

/// Most frequent first; ties by value, the unreported group last among equals, so the
/// order is the same on both engines (they sort NULL differently).
fn sorted_groups(rows: Vec<(Option<String>, i64)>) -> Vec<CountBy> {
    let mut groups: Vec<CountBy> = rows
        .into_iter()
        .map(|(value, subagents)| CountBy { value, subagents })
        .collect();
    groups.sort_by(|a, b| {
        b.subagents
            .cmp(&a.subagents)
            .then_with(|| a.value.is_none().cmp(&b.value.is_none()))
            .then_with(|| a.value.cmp(&b.value))
    });
    groups
}

/// The median from the one (odd count) or two (even count) middle values.
fn median_of_middle(middle: &[i64]) -> Option<f64> {
    match middle {
        [one] => Some(*one as f64),
        [low, high] => Some((*low as f64 + *high as f64) / 2.0),
        _ => None,
    }
}

/// Where a row sits in its parent chain.
#[derive(Debug, PartialEq, Eq)]
enum Depth {
    Level(u32),
    Cyclic,
}

/// Walks each in-scope row's parents within its session. A parent is a subagent row
/// with that `tool_call_id` in the same session; the walk stops at a row whose parent is
/// not one, and gives up (cyclic) on revisiting a row.
fn nesting(links: &[(String, String, Option<String>, i64)]) -> Nesting {
    // (session, tool_call_id) -> parent; of several executions, the first named parent.
    let mut parents: HashMap<(&str, &str), Option<&str>> = HashMap::new();
    for (session, tool_call_id, parent, _) in links {
        let slot = parents
            .entry((session.as_str(), tool_call_id.as_str()))
            .or_insert(None);
        if slot.is_none() {
            *slot = parent.as_deref();
        }
    }
    let depth_of = |session: &str, tool_call_id: &str| -> Depth {
        let mut seen: HashSet<&str> = HashSet::from([tool_call_id]);
        let mut current = tool_call_id;
        let mut depth = 0u32;
        loop {
            let parent = parents.get(&(session, current)).copied().flatten();
            match parent {
                Some(parent) if parents.contains_key(&(session, parent)) => {
                    if !seen.insert(parent) {
                        return Depth::Cyclic;
                    }
                    depth += 1;
                    current = parent;
                }
                _ => return Depth::Level(depth),
            }
        }
    };
    let mut counts: Vec<i64> = Vec::new();
    let mut parent_not_a_subagent = 0;
    let mut cyclic = 0;
    for (session, tool_call_id, parent, in_scope) in links {
        if *in_scope == 0 {
            continue;
        }
        match depth_of(session, tool_call_id) {
            Depth::Cyclic => cyclic += 1,
            Depth::Level(depth) => {
                let index = depth as usize;
                if counts.len() <= index {
                    counts.resize(index + 1, 0);
                }
                counts[index] += 1;
                if depth == 0 && parent.is_some() {
                    parent_not_a_subagent += 1;
                }
            }
        }
    }
    Nesting {
        by_depth: counts
            .into_iter()
            .zip(0u32..)
            .map(|(subagents, depth)| DepthBucket { depth, subagents })
            .collect(),
        parent_not_a_subagent,
        cyclic,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(
        session: &str,
        id: &str,
        parent: Option<&str>,
    ) -> (String, String, Option<String>, i64) {
        (session.into(), id.into(), parent.map(Into::into), 1)
    }

    fn depths(nesting: &Nesting) -> Vec<(u32, i64)> {
        nesting
            .by_depth
            .iter()
            .map(|b| (b.depth, b.subagents))
            .collect()
    }

    #[test]
    fn depth_walks_parents_within_the_session_and_survives_cycles() {
        let links = vec![
            link("s1", "a", None),
            link("s1", "b", Some("a")),
            link("s1", "c", Some("b")),
            // A parent that is a plain tool call: top level.
            link("s1", "d", Some("bash-1")),
            // Same ids in another session do not nest across sessions.
            link("s2", "b", Some("a")),
            // A two-row loop and a self-loop.
            link("s3", "x", Some("y")),
            link("s3", "y", Some("x")),
            link("s3", "z", Some("z")),
        ];
        let n = nesting(&links);
        assert_eq!(depths(&n), vec![(0, 3), (1, 1), (2, 1)]);
        assert_eq!(n.parent_not_a_subagent, 2, "d and s2/b");
        assert_eq!(n.cyclic, 3);
    }

    #[test]
    fn out_of_scope_rows_are_parents_but_not_counted() {
        let mut links = vec![link("s1", "a", None), link("s1", "b", Some("a"))];
        links[0].3 = 0;
        let n = nesting(&links);
        assert_eq!(depths(&n), vec![(0, 0), (1, 1)]);
    }

    #[test]
    fn distribution_fills_gaps_and_keeps_unknown_apart() {
        let rows = [(0, 0, 2), (0, 3, 1), (1, 0, 4), (1, 2, 1)];
        let f = turn_fanout(&rows, None);
        assert_eq!(
            f.distribution
                .iter()
                .map(|b| (b.subagents, b.turns))
                .collect::<Vec<_>>(),
            vec![(0, 2), (1, 0), (2, 0), (3, 1)]
        );
        assert_eq!(
            (f.turns, f.known_turns, f.subagents_in_known_turns),
            (8, 3, 3)
        );
        assert_eq!(f.mean_per_known_turn, Some(1.0));
        assert_eq!(
            (
                f.unknown.turns,
                f.unknown.turns_with_backfill_rows,
                f.unknown.backfill_rows
            ),
            (5, 1, 2)
        );
    }

    #[test]
    fn no_turns_means_no_buckets_and_no_mean() {
        let f = turn_fanout(&[], None);
        assert!(f.distribution.is_empty());
        assert_eq!(f.mean_per_known_turn, None);
    }

    #[test]
    fn median_of_even_counts_is_the_mean_of_the_middle_pair() {
        assert_eq!(median_of_middle(&[4]), Some(4.0));
        assert_eq!(median_of_middle(&[4, 7]), Some(5.5));
        assert_eq!(median_of_middle(&[]), None);
    }

    #[test]
    fn groups_sort_by_count_then_value_with_unreported_last() {
        let groups = sorted_groups(vec![
            (None, 2),
            (Some("b".into()), 2),
            (Some("a".into()), 2),
            (Some("z".into()), 5),
        ]);
        let labels: Vec<&str> = groups.iter().map(CountBy::label).collect();
        assert_eq!(labels, vec!["z", "a", "b", UNREPORTED_LABEL]);
    }
}
