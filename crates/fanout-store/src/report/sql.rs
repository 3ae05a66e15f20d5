//! The report's statements: one generator per section, parameterised by [`Engine`] so
//! both engines run the same SQL, with the scope's binds collected as it is generated.

use crate::model::Engine;
use fanout_types::Timestamp;

use super::model::{Provenance, ReportScope, SubagentSummary};

/// One statement and its text binds, placeholders numbered as the binds were added.
pub(crate) struct Statement {
    pub(crate) sql: String,
    binds: Vec<Option<String>>,
}

impl Statement {
    /// The binds, in placeholder order.
    pub(crate) fn binds(&self) -> Vec<Option<&str>> {
        self.binds.iter().map(Option::as_deref).collect()
    }
}

/// Collects binds while a statement is generated, handing out their placeholders.
pub(crate) struct Binds {
    engine: Engine,
    values: Vec<Option<String>>,
}

impl Binds {
    pub(crate) fn new(engine: Engine) -> Self {
        Binds {
            engine,
            values: Vec::new(),
        }
    }

    pub(crate) fn text(&mut self, value: &str) -> String {
        self.values.push(Some(value.to_owned()));
        format!("${}", self.values.len())
    }

    /// A timestamp bind; `None` binds NULL, which makes every comparison with it false.
    pub(crate) fn timestamp(&mut self, value: Option<Timestamp>) -> String {
        self.values.push(value.map(|t| t.canonical()));
        self.engine.ts_param(self.values.len())
    }

    pub(crate) fn finish(self, sql: String) -> Statement {
        Statement {
            sql,
            binds: self.values,
        }
    }
}

impl ReportScope {
    /// The scope as a predicate on the row aliased `alias`, whose time is `time_column`.
    pub(crate) fn predicate(&self, binds: &mut Binds, alias: &str, time_column: &str) -> String {
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

/// Per (unknown?, fan-out): how many turns. A turn is unknown iff it has no live or
/// imported row (rows read from the history itself, not reconstructed) and started
/// before the backfill_through bind (NULL binds make no turn unknown).
pub(super) fn turn_distribution(
    e: Engine,
    scope: &ReportScope,
    backfill_through: Option<Timestamp>,
) -> Statement {
    let mut binds = Binds::new(e);
    let turn_scope = scope.turn_predicate(&mut binds, "t");
    let before = binds.timestamp(backfill_through);
    let sql = format!(
        "SELECT k.unknown_fanout AS unknown_fanout, k.subagents AS subagents, COUNT(*) AS turns FROM (
           SELECT CAST(CASE WHEN pt.live_rows = 0 AND pt.started_at < {before} THEN 1 ELSE 0 END AS BIGINT) AS unknown_fanout,
                  pt.subagents
           FROM (
             SELECT t.id, t.started_at, COUNT(c.id) AS subagents,
                    COUNT(CASE WHEN c.source IN ('live', 'import') THEN 1 END) AS live_rows
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
pub(super) fn subagent_summary(e: Engine, scope: &ReportScope) -> Statement {
    let mut binds = Binds::new(e);
    let in_scope = scope.subagent_predicate(&mut binds, "c");
    let counted = |condition: &str, alias: &str| {
        format!("COUNT(CASE WHEN c.duplicate_of_live = 0 AND ({condition}) THEN 1 END) AS {alias}")
    };
    // Aliased as the fields of SubagentSummary and Provenance, which decode them.
    let columns = [
        counted("1 = 1", "total"),
        counted("c.turn_id IS NULL", "without_turn"),
        counted(
            "c.turn_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM task_session_turns t WHERE t.id = c.turn_id)",
            "turn_not_found",
        ),
        counted("c.is_async <> 0", "async_launches"),
        counted("c.settled_at IS NULL", "unsettled"),
        counted("c.source = 'live'", "live"),
        counted("c.source = 'import'", "imported"),
        counted("c.source NOT IN ('live', 'import')", "backfill"),
        "COUNT(CASE WHEN c.duplicate_of_live = 1 THEN 1 END) AS backfill_duplicates_of_live"
            .to_owned(),
        counted("c.agent_execution_id = 'unknown'", "unknown_execution"),
        counted(
            "c.agent_execution_id = 'unknown' AND c.source = 'live'",
            "live_unknown_execution",
        ),
    ];
    let sql = format!(
        "SELECT {} FROM {} AS c WHERE {in_scope}",
        columns.join(", "),
        subagents_with_duplicate_flag()
    );
    binds.finish(sql)
}

/// The nullable metrics the report summarises, as stored.
#[derive(Clone, Copy, Debug)]
pub(super) enum Metric {
    TotalTokens,
    DurationMs,
    ToolUseCount,
}

impl Metric {
    const ALL: [Metric; 3] = [
        Metric::TotalTokens,
        Metric::DurationMs,
        Metric::ToolUseCount,
    ];

    /// The column, which also prefixes its aggregates' aliases in [`MetricAggregatesRow`].
    pub(super) fn column(self) -> &'static str {
        match self {
            Metric::TotalTokens => "total_tokens",
            Metric::DurationMs => "duration_ms",
            Metric::ToolUseCount => "tool_use_count",
        }
    }
}

/// Per metric: reported count, MIN, MAX and SUM over reported values only (SQL
/// aggregates skip NULL, which is exactly AC-7's reading).
pub(super) fn metric_aggregates(e: Engine, scope: &ReportScope) -> Statement {
    let mut binds = Binds::new(e);
    let from = counted_in_scope(&mut binds, scope);
    let columns = Metric::ALL
        .iter()
        .map(|m| {
            let col = m.column();
            // PostgreSQL's SUM(bigint) is numeric; the cast keeps one integer type.
            format!(
                "COUNT(c.{col}) AS {col}_reported, MIN(c.{col}) AS {col}_min, \
                 MAX(c.{col}) AS {col}_max, CAST(SUM(c.{col}) AS BIGINT) AS {col}_sum"
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    binds.finish(format!(
        "SELECT COUNT(*) AS rows_in_scope, {columns} FROM {from}"
    ))
}

/// The middle one or two reported values of `column` (the median without fetching all).
pub(super) fn metric_middle(
    e: Engine,
    scope: &ReportScope,
    column: &str,
    reported: i64,
) -> Statement {
    let mut binds = Binds::new(e);
    let from = counted_in_scope(&mut binds, scope);
    let offset = (reported - 1) / 2;
    let take = if reported % 2 == 0 { 2 } else { 1 };
    binds.finish(format!(
        "SELECT c.{column} AS value FROM {from} AND c.{column} IS NOT NULL ORDER BY c.{column} LIMIT {take} OFFSET {offset}"
    ))
}

/// Counted rows in scope grouped by `column` (NULL is a group of its own).
pub(super) fn count_by(e: Engine, scope: &ReportScope, column: &str) -> Statement {
    let mut binds = Binds::new(e);
    let from = counted_in_scope(&mut binds, scope);
    binds.finish(format!(
        "SELECT c.{column} AS value, COUNT(*) AS subagents FROM {from} GROUP BY c.{column}"
    ))
}

/// A [`NestingLink`] for every counted row of every session with a row in scope:
/// parents may lie outside the scope.
pub(super) fn nesting_links(e: Engine, scope: &ReportScope) -> Statement {
    let mut binds = Binds::new(e);
    let row_in_scope = scope.subagent_predicate(&mut binds, "c");
    let session_in_scope = scope.subagent_predicate(&mut binds, "s");
    binds.finish(format!(
        "SELECT c.task_session_id AS task_session_id, c.tool_call_id AS tool_call_id,
                c.parent_tool_call_id AS parent_tool_call_id,
                CAST(CASE WHEN {row_in_scope} THEN 1 ELSE 0 END AS BIGINT) AS in_scope
         FROM {} AS c
         WHERE c.duplicate_of_live = 0
           AND c.task_session_id IN (SELECT s.task_session_id FROM task_session_subagents s WHERE {session_in_scope})",
        subagents_with_duplicate_flag()
    ))
}

/// One row of [`turn_distribution`]: `turns` turns had fan-out `subagents`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, sqlx::FromRow)]
pub(super) struct TurnCount {
    /// 1 when these turns' fan-out is unknown (AC-25).
    pub(super) unknown_fanout: i64,
    pub(super) subagents: i64,
    pub(super) turns: i64,
}

/// The one row of [`subagent_summary`].
#[derive(sqlx::FromRow)]
pub(super) struct SummaryRow {
    #[sqlx(flatten)]
    pub(super) subagents: SubagentSummary,
    #[sqlx(flatten)]
    pub(super) provenance: Provenance,
}

/// The one row of [`metric_aggregates`]: rows in scope, then per [`Metric`] its
/// reported count, MIN, MAX and SUM.
#[derive(sqlx::FromRow)]
pub(super) struct MetricAggregatesRow {
    pub(super) rows_in_scope: i64,
    total_tokens_reported: i64,
    total_tokens_min: Option<i64>,
    total_tokens_max: Option<i64>,
    total_tokens_sum: Option<i64>,
    duration_ms_reported: i64,
    duration_ms_min: Option<i64>,
    duration_ms_max: Option<i64>,
    duration_ms_sum: Option<i64>,
    tool_use_count_reported: i64,
    tool_use_count_min: Option<i64>,
    tool_use_count_max: Option<i64>,
    tool_use_count_sum: Option<i64>,
}

/// One metric's aggregates over the rows that reported it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Aggregates {
    pub(super) reported: i64,
    pub(super) min: Option<i64>,
    pub(super) max: Option<i64>,
    pub(super) sum: Option<i64>,
}

impl MetricAggregatesRow {
    pub(super) fn of(&self, metric: Metric) -> Aggregates {
        let (reported, min, max, sum) = match metric {
            Metric::TotalTokens => (
                self.total_tokens_reported,
                self.total_tokens_min,
                self.total_tokens_max,
                self.total_tokens_sum,
            ),
            Metric::DurationMs => (
                self.duration_ms_reported,
                self.duration_ms_min,
                self.duration_ms_max,
                self.duration_ms_sum,
            ),
            Metric::ToolUseCount => (
                self.tool_use_count_reported,
                self.tool_use_count_min,
                self.tool_use_count_max,
                self.tool_use_count_sum,
            ),
        };
        Aggregates {
            reported,
            min,
            max,
            sum,
        }
    }
}

/// One of the middle values of [`metric_middle`].
#[derive(sqlx::FromRow)]
pub(super) struct MiddleValue {
    pub(super) value: i64,
}

/// One row of [`nesting_links`]: a counted row, its parent, and whether it is in scope.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub(super) struct NestingLink {
    pub(super) task_session_id: String,
    pub(super) tool_call_id: String,
    pub(super) parent_tool_call_id: Option<String>,
    /// 1 when the row itself is in scope; 0 when it is only a parent of one that is.
    pub(super) in_scope: i64,
}
