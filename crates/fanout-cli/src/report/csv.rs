//! The report as one tidy CSV table (header `section,key,value`, RFC 4180 quoting, `\n`
//! line ends so `awk -F,` sees clean last fields), one row per figure, so a spreadsheet
//! or a pipe can pick any number without knowing the report's nesting:
//!
//! | section | key | value |
//! |---|---|---|
//! | `scope` | `kind`, then `task_id` / `session_id` / `since` / `until` | the scope |
//! | `activation` | `capture_since`, `backfill_through` | as stored (`''` = nothing backfilled; no row = key not set) |
//! | `turns` | `turns`, `known_turns`, `subagents_in_known_turns`, `mean_per_known_turn` | |
//! | `fanout` | subagents per turn (`0`, `1`, …) | turns with that fan-out |
//! | `unknown_fanout` | `before`, `turns`, `turns_with_backfill_rows`, `backfill_rows` | AC-25 |
//! | `subagents` | `total`, `without_turn`, `turn_not_found`, `async_launches`, `unsettled` | |
//! | `provenance` | `live`, `imported`, `backfill`, `backfill_duplicates_of_live`, `unknown_execution`, `live_unknown_execution` | |
//! | `by_type`, `by_model` | the value, `(unreported)` for NULL | subagents |
//! | `total_tokens`, `duration_ms`, `tool_use_count` | `reported`, `unreported`, `min`, `p50`, `mean`, `max`, `sum` | empty when nothing was reported |
//! | `nesting_depth` | depth (`0`, `1`, …) | subagents |
//! | `nesting` | `parent_not_a_subagent`, `cyclic` | |
//!
//! An empty value means "no such figure" (a statistic of nothing, a missing key), never 0.

use fanout_store::{FanoutReport, MetricStats, ReportScope};

use crate::output::group_label;

type Row = (&'static str, String, String);

pub(super) fn render(report: &FanoutReport) -> String {
    let mut out = String::from("section,key,value\n");
    for (section, key, value) in rows(report) {
        out.push_str(&format!(
            "{},{},{}\n",
            field(section),
            field(&key),
            field(&value)
        ));
    }
    out
}

fn rows(report: &FanoutReport) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    let mut push = |section: &'static str, key: &str, value: String| {
        rows.push((section, key.to_owned(), value));
    };
    let opt = |v: Option<String>| v.unwrap_or_default();

    match &report.scope {
        ReportScope::All => push("scope", "kind", "all".into()),
        ReportScope::Task { task_id } => {
            push("scope", "kind", "task".into());
            push("scope", "task_id", task_id.clone());
        }
        ReportScope::Session { session_id } => {
            push("scope", "kind", "session".into());
            push("scope", "session_id", session_id.clone());
        }
        ReportScope::Window { since, until } => {
            push("scope", "kind", "window".into());
            push("scope", "since", opt(since.map(|t| t.canonical())));
            push("scope", "until", opt(until.map(|t| t.canonical())));
        }
    }
    // A key that is not set has no row; a set `backfill_through` of '' is an empty value.
    let activation = &report.activation;
    for (key, value) in [
        ("capture_since", &activation.capture_since),
        ("backfill_through", &activation.backfill_through),
    ] {
        if let Some(value) = value {
            push("activation", key, value.clone());
        }
    }

    let turns = &report.turns;
    push("turns", "turns", turns.turns.to_string());
    push("turns", "known_turns", turns.known_turns.to_string());
    push(
        "turns",
        "subagents_in_known_turns",
        turns.subagents_in_known_turns.to_string(),
    );
    push(
        "turns",
        "mean_per_known_turn",
        opt(turns.mean_per_known_turn.map(|m| m.to_string())),
    );
    for bucket in &turns.distribution {
        push(
            "fanout",
            &bucket.subagents.to_string(),
            bucket.turns.to_string(),
        );
    }
    let unknown = &turns.unknown;
    push(
        "unknown_fanout",
        "before",
        opt(unknown.before.map(|t| t.canonical())),
    );
    push("unknown_fanout", "turns", unknown.turns.to_string());
    push(
        "unknown_fanout",
        "turns_with_backfill_rows",
        unknown.turns_with_backfill_rows.to_string(),
    );
    push(
        "unknown_fanout",
        "backfill_rows",
        unknown.backfill_rows.to_string(),
    );

    let s = &report.subagents;
    for (key, value) in [
        ("total", s.total),
        ("without_turn", s.without_turn),
        ("turn_not_found", s.turn_not_found),
        ("async_launches", s.async_launches),
        ("unsettled", s.unsettled),
    ] {
        push("subagents", key, value.to_string());
    }
    let p = &report.provenance;
    for (key, value) in [
        ("live", p.live),
        ("imported", p.imported),
        ("backfill", p.backfill),
        ("backfill_duplicates_of_live", p.backfill_duplicates_of_live),
        ("unknown_execution", p.unknown_execution),
        ("live_unknown_execution", p.live_unknown_execution),
    ] {
        push("provenance", key, value.to_string());
    }
    for (section, groups) in [("by_type", &report.by_type), ("by_model", &report.by_model)] {
        for group in groups {
            push(section, group_label(group), group.subagents.to_string());
        }
    }
    for (section, stats) in [
        ("total_tokens", &report.total_tokens),
        ("duration_ms", &report.duration_ms),
        ("tool_use_count", &report.tool_use_count),
    ] {
        for (key, value) in metric_cells(stats) {
            push(section, key, value);
        }
    }
    for bucket in &report.nesting.by_depth {
        push(
            "nesting_depth",
            &bucket.depth.to_string(),
            bucket.subagents.to_string(),
        );
    }
    push(
        "nesting",
        "parent_not_a_subagent",
        report.nesting.parent_not_a_subagent.to_string(),
    );
    push("nesting", "cyclic", report.nesting.cyclic.to_string());
    rows
}

fn metric_cells(m: &MetricStats) -> [(&'static str, String); 7] {
    let int = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    let float = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    [
        ("reported", m.reported.to_string()),
        ("unreported", m.unreported.to_string()),
        ("min", int(m.min)),
        ("p50", float(m.p50)),
        ("mean", float(m.mean)),
        ("max", int(m.max)),
        ("sum", int(m.sum)),
    ]
}

/// One RFC 4180 field: quoted when it holds a comma, a quote or a line break.
pub(super) fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::field;

    #[test]
    fn fields_are_quoted_only_when_they_must_be() {
        assert_eq!(field("reviewer"), "reviewer");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
    }
}
