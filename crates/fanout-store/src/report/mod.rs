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
//! * **Unknown fan-out (AC-25).** A turn that started before
//!   `subagent_context_backfill_through` and has no `live` (or `import`) row is left out of the
//!   distribution, never counted as 0: before that instant only the backfill saw
//!   launches, and it sees only messages that carried subagent metadata. Its
//!   backfilled rows are only a lower bound ([`UnknownFanout`]).
//! * **NULL is not 0 (AC-7).** Metric statistics are over reported values only, and
//!   each states how many rows reported nothing.

use std::collections::{HashMap, HashSet};

mod model;
pub(crate) mod sql;

pub use model::{
    CountBy, DepthBucket, FanoutBucket, FanoutReport, MetricStats, Nesting, Provenance,
    ReportScope, SubagentSummary, TurnFanout, UnknownFanout,
};

use crate::error::StoreError;
use crate::exec::{FromEngineRow, Reader};
use crate::model::Activation;
use fanout_types::Timestamp;

use sql::{
    Aggregates, Metric, MetricAggregatesRow, MiddleValue, NestingLink, Statement, SummaryRow,
    TurnCount,
};

/// Builds the report with one read per section (all on the reader).
pub(crate) async fn fanout_report(
    reader: Reader<'_>,
    scope: &ReportScope,
    activation: Activation,
) -> Result<FanoutReport, StoreError> {
    let e = reader.engine();
    let backfill_through = parse_backfill_through(&activation)?;

    let statement = sql::turn_distribution(e, scope, backfill_through);
    let turn_rows: Vec<TurnCount> = fetch_all(reader, "fan-out report: turns", &statement).await?;

    let statement = sql::subagent_summary(e, scope);
    let summary: SummaryRow = fetch_one(reader, "fan-out report: subagents", &statement).await?;

    let statement = sql::metric_aggregates(e, scope);
    let aggregates: MetricAggregatesRow =
        fetch_one(reader, "fan-out report: metrics", &statement).await?;
    let metric = |metric: Metric| {
        metric_stats(
            reader,
            scope,
            metric.column(),
            aggregates.rows_in_scope,
            aggregates.of(metric),
        )
    };
    let total_tokens = metric(Metric::TotalTokens).await?;
    let duration_ms = metric(Metric::DurationMs).await?;
    let tool_use_count = metric(Metric::ToolUseCount).await?;

    let statement = sql::nesting_links(e, scope);
    let links: Vec<NestingLink> = fetch_all(reader, "fan-out report: nesting", &statement).await?;

    Ok(FanoutReport {
        scope: scope.clone(),
        activation,
        turns: turn_fanout(&turn_rows, backfill_through),
        subagents: summary.subagents,
        provenance: summary.provenance,
        by_type: breakdown(reader, scope, "subagent_type").await?,
        by_model: breakdown(reader, scope, "model").await?,
        total_tokens,
        duration_ms,
        tool_use_count,
        nesting: nesting(&links),
    })
}

async fn breakdown(
    reader: Reader<'_>,
    scope: &ReportScope,
    column: &str,
) -> Result<Vec<CountBy>, StoreError> {
    let statement = sql::count_by(reader.engine(), scope, column);
    let groups: Vec<CountBy> = fetch_all(reader, "fan-out report: breakdown", &statement).await?;
    Ok(sorted_groups(groups))
}

/// Completes one metric's aggregates with its median and mean; nothing is computed from
/// a metric no row reported.
async fn metric_stats(
    reader: Reader<'_>,
    scope: &ReportScope,
    column: &str,
    rows_in_scope: i64,
    Aggregates {
        reported,
        min,
        max,
        sum,
    }: Aggregates,
) -> Result<MetricStats, StoreError> {
    let p50 = if reported > 0 {
        let statement = sql::metric_middle(reader.engine(), scope, column, reported);
        let middle: Vec<MiddleValue> =
            fetch_all(reader, "fan-out report: median", &statement).await?;
        median_of_middle(&middle.iter().map(|m| m.value).collect::<Vec<_>>())
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

/// Runs one generated read and decodes its rows.
pub(crate) async fn fetch_all<T: FromEngineRow>(
    reader: Reader<'_>,
    op: &'static str,
    statement: &Statement,
) -> Result<Vec<T>, StoreError> {
    reader
        .fetch_all(op, &statement.sql, &statement.binds())
        .await
}

async fn fetch_one<T: FromEngineRow>(
    reader: Reader<'_>,
    op: &'static str,
    statement: &Statement,
) -> Result<T, StoreError> {
    reader
        .fetch_one(op, &statement.sql, &statement.binds())
        .await
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

/// Folds the turn counts into the known distribution (gaps filled with empty buckets)
/// and the unknown bucket.
fn turn_fanout(rows: &[TurnCount], backfill_through: Option<Timestamp>) -> TurnFanout {
    let mut unknown = UnknownFanout {
        before: backfill_through,
        turns: 0,
        turns_with_backfill_rows: 0,
        backfill_rows: 0,
    };
    let mut known: Vec<(i64, i64)> = Vec::new();
    for &TurnCount {
        unknown_fanout,
        subagents,
        turns,
    } in rows
    {
        if unknown_fanout != 0 {
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
fn sorted_groups(mut groups: Vec<CountBy>) -> Vec<CountBy> {
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
fn nesting(links: &[NestingLink]) -> Nesting {
    // (session, tool_call_id) -> parent; of several executions, the first named parent.
    let mut parents: HashMap<(&str, &str), Option<&str>> = HashMap::new();
    for link in links {
        let slot = parents
            .entry((link.task_session_id.as_str(), link.tool_call_id.as_str()))
            .or_insert(None);
        if slot.is_none() {
            *slot = link.parent_tool_call_id.as_deref();
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
    for link in links {
        if link.in_scope == 0 {
            continue;
        }
        match depth_of(&link.task_session_id, &link.tool_call_id) {
            Depth::Cyclic => cyclic += 1,
            Depth::Level(depth) => {
                let index = depth as usize;
                if counts.len() <= index {
                    counts.resize(index + 1, 0);
                }
                counts[index] += 1;
                if depth == 0 && link.parent_tool_call_id.is_some() {
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

    fn link(session: &str, id: &str, parent: Option<&str>) -> NestingLink {
        NestingLink {
            task_session_id: session.into(),
            tool_call_id: id.into(),
            parent_tool_call_id: parent.map(Into::into),
            in_scope: 1,
        }
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
        links[0].in_scope = 0;
        let n = nesting(&links);
        assert_eq!(depths(&n), vec![(0, 0), (1, 1)]);
    }

    #[test]
    fn distribution_fills_gaps_and_keeps_unknown_apart() {
        let rows = [(0, 0, 2), (0, 3, 1), (1, 0, 4), (1, 2, 1)].map(
            |(unknown_fanout, subagents, turns)| TurnCount {
                unknown_fanout,
                subagents,
                turns,
            },
        );
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
        let group = |value: Option<&str>, subagents| CountBy {
            value: value.map(Into::into),
            subagents,
        };
        let groups = sorted_groups(vec![
            group(None, 2),
            group(Some("b"), 2),
            group(Some("a"), 2),
            group(Some("z"), 5),
        ]);
        let values: Vec<Option<&str>> = groups.iter().map(|g| g.value.as_deref()).collect();
        assert_eq!(values, vec![Some("z"), Some("a"), Some("b"), None]);
    }
}
