//! The report's statements: one generator per section, parameterised by [`Engine`] so
//! both engines run the same SQL, with the scope's binds collected as it is generated.

use crate::model::Engine;
use crate::time::Timestamp;

use super::model::ReportScope;

/// One statement and its text binds, placeholders numbered as the binds were added.
pub(super) struct Statement {
    pub(super) sql: String,
    binds: Vec<Option<String>>,
}

impl Statement {
    /// The binds, in placeholder order.
    pub(super) fn binds(&self) -> Vec<Option<&str>> {
        self.binds.iter().map(Option::as_deref).collect()
    }
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
pub(super) fn turn_distribution(
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
pub(super) fn subagent_summary(e: Engine, scope: &ReportScope) -> Statement {
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
pub(super) const METRIC_COLUMNS: [&str; 3] = ["total_tokens", "duration_ms", "tool_use_count"];

/// Per metric: reported count, MIN, MAX and SUM over reported values only (SQL
/// aggregates skip NULL, which is exactly AC-7's reading).
pub(super) fn metric_aggregates(e: Engine, scope: &ReportScope) -> Statement {
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
        "SELECT c.{column} FROM {from} AND c.{column} IS NOT NULL ORDER BY c.{column} LIMIT {take} OFFSET {offset}"
    ))
}

/// Counted rows in scope grouped by `column` (NULL is a group of its own).
pub(super) fn count_by(e: Engine, scope: &ReportScope, column: &str) -> Statement {
    let mut binds = Binds::new(e);
    let from = counted_in_scope(&mut binds, scope);
    binds.finish(format!(
        "SELECT c.{column}, COUNT(*) FROM {from} GROUP BY c.{column}"
    ))
}

/// `(session, tool_call_id, parent_tool_call_id, in scope?)` of every counted row of
/// every session with a row in scope: parents may lie outside the scope.
pub(super) fn nesting_links(e: Engine, scope: &ReportScope) -> Statement {
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

pub(super) type SummaryRow = (i64, i64, i64, i64, i64, i64, i64, i64, i64, i64);
/// Rows in scope, then per metric of [`METRIC_COLUMNS`]: reported, MIN, MAX, SUM.
pub(super) type MetricAggregatesRow = (
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
pub(super) type Aggregates = (i64, Option<i64>, Option<i64>, Option<i64>);
