//! The report as text for a terminal: horizontal bar charts drawn with Unicode block
//! elements (eighths of a cell, so small differences still show) and aligned tables,
//! every line within the given width, measured in terminal columns (a CJK character
//! or most emoji take two), since subagent types and models come from the agent.

use std::fmt::Write as _;

use fanout_store::{FanoutReport, MetricStats};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::{decimal, turns_summary, unknown_fanout_note};
use crate::output::{backfill_through_label, capture_since_label, group_label, scope_label};

const DEFAULT_WIDTH: usize = 80;
/// Narrower than this there is no room for a readable bar; wider lines are hard to read.
const MIN_WIDTH: usize = 40;
const MAX_WIDTH: usize = 160;
/// Labels longer than this are cut, so one odd subagent type cannot squeeze every bar.
const MAX_LABEL: usize = 24;
const PARTIAL_BLOCKS: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
const FULL_BLOCK: char = '█';
/// Unknown fan-out is drawn apart, so it never reads as one more bucket of the same kind.
const SHADED_BLOCK: char = '░';
const INDENT: &str = "  ";

/// The width to draw at: `$COLUMNS` when set, else stdout's terminal width when stdout
/// is a terminal, else 80 ([`choose_width`]).
pub(crate) fn terminal_width() -> usize {
    let terminal = terminal_size::terminal_size_of(std::io::stdout()).map(|(width, _)| width.0);
    choose_width(std::env::var("COLUMNS").ok().as_deref(), terminal)
}

/// `columns` (the `COLUMNS` variable) wins when it is a number, since it is an explicit
/// choice (a script, `COLUMNS=120 fanout report`); else the terminal's width; else
/// [`DEFAULT_WIDTH`] (a pipe or a file has no width). Clamped to what stays readable.
fn choose_width(columns: Option<&str>, terminal: Option<u16>) -> usize {
    columns
        .and_then(|value| value.trim().parse::<usize>().ok())
        .or_else(|| terminal.map(usize::from))
        .map_or(DEFAULT_WIDTH, |width| width.clamp(MIN_WIDTH, MAX_WIDTH))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fill {
    Solid,
    Shaded,
}

struct Bar {
    label: String,
    value: i64,
    fill: Fill,
}

impl Bar {
    fn solid(label: impl Into<String>, value: i64) -> Self {
        Bar {
            label: label.into(),
            value,
            fill: Fill::Solid,
        }
    }
}

pub(super) fn render(report: &FanoutReport, database: &str, width: usize) -> String {
    let width = width.clamp(MIN_WIDTH, MAX_WIDTH);
    let mut out = String::new();
    header(&mut out, report, database, width);
    fanout_section(&mut out, report, width);
    subagent_section(&mut out, report, width);
    metrics_section(&mut out, report, width);
    nesting_section(&mut out, report, width);
    out
}

fn header(out: &mut String, report: &FanoutReport, database: &str, width: usize) {
    line(
        out,
        &format!("fanout report: {}", scope_label(&report.scope)),
        width,
    );
    line(out, &format!("database          {database}"), width);
    let activation = &report.activation;
    line(
        out,
        &format!("capture since     {}", capture_since_label(activation)),
        width,
    );
    line(
        out,
        &format!("backfill through  {}", backfill_through_label(activation)),
        width,
    );
}

fn fanout_section(out: &mut String, report: &FanoutReport, width: usize) {
    let turns = &report.turns;
    heading(out, "FAN-OUT PER TURN", width);
    wrap(out, &turns_summary(turns), INDENT, width);
    if turns.turns == 0 {
        line(out, &format!("{INDENT}no turns in scope"), width);
    } else {
        let mut bars: Vec<Bar> = turns
            .distribution
            .iter()
            .map(|b| Bar::solid(b.subagents.to_string(), b.turns))
            .collect();
        if turns.unknown.turns > 0 {
            bars.push(Bar {
                label: "unknown".to_owned(),
                value: turns.unknown.turns,
                fill: Fill::Shaded,
            });
        }
        chart(out, "subagents", "turns", &bars, width);
    }
    wrap(
        out,
        &unknown_fanout_note(turns, &SHADED_BLOCK.to_string()),
        INDENT,
        width,
    );
}

fn subagent_section(out: &mut String, report: &FanoutReport, width: usize) {
    let s = &report.subagents;
    let p = &report.provenance;
    heading(out, "SUBAGENTS", width);
    wrap(
        out,
        &format!(
            "{} in scope: {} outside any turn, {} in a deleted turn, {} async, {} never settled",
            s.total, s.without_turn, s.turn_not_found, s.async_launches, s.unsettled
        ),
        INDENT,
        width,
    );
    wrap(
        out,
        &format!(
            "provenance: live {} · imported {} · backfill {} · backfilled twins of live rows {} (counted once, as live) · execution 'unknown' {} ({} of them live)",
            p.live,
            p.imported,
            p.backfill,
            p.backfill_duplicates_of_live,
            p.unknown_execution,
            p.live_unknown_execution
        ),
        INDENT,
        width,
    );
    for (title, groups) in [("BY TYPE", &report.by_type), ("BY MODEL", &report.by_model)] {
        heading(out, title, width);
        if groups.is_empty() {
            line(out, &format!("{INDENT}no subagents in scope"), width);
            continue;
        }
        let bars: Vec<Bar> = groups
            .iter()
            .map(|g| Bar::solid(group_label(g), g.subagents))
            .collect();
        chart(out, "", "", &bars, width);
    }
}

fn metrics_section(out: &mut String, report: &FanoutReport, width: usize) {
    heading(out, "METRICS", width);
    wrap(
        out,
        "over reported values only: a row that reported nothing is counted in 'unreported', never as 0",
        INDENT,
        width,
    );
    let int = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    let float = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), decimal);
    let row = |name: &str, m: &MetricStats| {
        vec![
            name.to_owned(),
            m.reported.to_string(),
            m.unreported.to_string(),
            int(m.min),
            float(m.p50),
            float(m.mean),
            int(m.max),
            int(m.sum),
        ]
    };
    let rows = vec![
        [
            "metric",
            "reported",
            "unreported",
            "min",
            "p50",
            "mean",
            "max",
            "sum",
        ]
        .map(str::to_owned)
        .to_vec(),
        row("total_tokens", &report.total_tokens),
        row("duration_ms", &report.duration_ms),
        row("tool_use_count", &report.tool_use_count),
    ];
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for r in &rows {
        let mut text = INDENT.to_owned();
        for (c, cell) in r.iter().enumerate() {
            if c == 0 {
                let _ = write!(text, "{cell:<w$}", w = widths[c]);
            } else {
                let _ = write!(text, "  {cell:>w$}", w = widths[c]);
            }
        }
        line(out, &text, width);
    }
}

fn nesting_section(out: &mut String, report: &FanoutReport, width: usize) {
    let n = &report.nesting;
    heading(out, "NESTING DEPTH", width);
    wrap(
        out,
        "0 = launched by the session's agent, 1 = by a subagent, and so on",
        INDENT,
        width,
    );
    if n.by_depth.is_empty() {
        line(out, &format!("{INDENT}no subagents in scope"), width);
    } else {
        let bars: Vec<Bar> = n
            .by_depth
            .iter()
            .map(|b| Bar::solid(b.depth.to_string(), b.subagents))
            .collect();
        chart(out, "depth", "subagents", &bars, width);
    }
    line(
        out,
        &format!(
            "{INDENT}parent not a subagent {} · cyclic parent chain {}",
            n.parent_not_a_subagent, n.cyclic
        ),
        width,
    );
}

/// Draws one bar per row: `label │bar value`, bars scaled to the largest value and to
/// the room the width leaves. A non-zero value always shows at least an eighth.
fn chart(out: &mut String, label_title: &str, value_title: &str, bars: &[Bar], width: usize) {
    let labels: Vec<String> = bars.iter().map(|b| printable(&b.label)).collect();
    let label_width = labels
        .iter()
        .map(|l| columns(l))
        .chain(std::iter::once(columns(label_title)))
        .max()
        .unwrap_or(0);
    let value_width = bars
        .iter()
        .map(|b| b.value.to_string().len())
        .max()
        .unwrap_or(1);
    // indent + label + " │" + bar + " " + value, one column spare for terminals that wrap
    // on the last one.
    let room = width.saturating_sub(INDENT.len() + label_width + 2 + 1 + value_width + 1);
    let largest = bars.iter().map(|b| b.value).max().unwrap_or(0).max(1);
    if !label_title.is_empty() || !value_title.is_empty() {
        line(
            out,
            &format!(
                "{INDENT}{} │ {value_title}",
                pad_left(label_title, label_width)
            ),
            width,
        );
    }
    for (bar, label) in bars.iter().zip(&labels) {
        let eighths = scaled_eighths(bar.value, largest, room);
        let drawn = match bar.fill {
            Fill::Solid => {
                let mut text = FULL_BLOCK.to_string().repeat(eighths / 8);
                text.push_str(PARTIAL_BLOCKS[eighths % 8]);
                text
            }
            Fill::Shaded => SHADED_BLOCK.to_string().repeat(eighths.div_ceil(8)),
        };
        line(
            out,
            &format!(
                "{INDENT}{} │{drawn} {}",
                pad_left(label, label_width),
                bar.value
            ),
            width,
        );
    }
}

/// `value / largest` of `room` cells, in eighths of a cell.
fn scaled_eighths(value: i64, largest: i64, room: usize) -> usize {
    if value <= 0 || room == 0 {
        return 0;
    }
    let exact = value as f64 / largest as f64 * room as f64 * 8.0;
    (exact.round() as usize).clamp(1, room * 8)
}

/// A value from the database made safe and short for a terminal: control characters
/// (an agent-supplied escape sequence) become `?`, and long text is cut with `…`.
fn printable(text: &str) -> String {
    let clean: String = text
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    fit(&clean, MAX_LABEL)
}

/// The terminal columns `text` takes.
fn columns(text: &str) -> usize {
    text.width()
}

/// `text` in at most `max` columns: whole when it fits, else cut at a character
/// boundary and ended with `…`.
fn fit(text: &str, max: usize) -> String {
    if columns(text) <= max {
        return text.to_owned();
    }
    let room = max.saturating_sub(1);
    let mut cut = String::with_capacity(text.len());
    let mut used = 0;
    for c in text.chars() {
        let width = c.width().unwrap_or(0);
        if used + width > room {
            break;
        }
        cut.push(c);
        used += width;
    }
    cut.push('…');
    cut
}

/// `text` right-aligned in `width` columns (`format!`'s padding counts characters,
/// not columns).
fn pad_left(text: &str, width: usize) -> String {
    let mut padded = " ".repeat(width.saturating_sub(columns(text)));
    padded.push_str(text);
    padded
}

/// A blank line, then the section title.
fn heading(out: &mut String, title: &str, width: usize) {
    out.push('\n');
    line(out, title, width);
}

fn line(out: &mut String, text: &str, width: usize) {
    // Only database values can be long here (an id in the scope, a URL); cut them rather
    // than break the layout.
    out.push_str(&fit(text, width));
    out.push('\n');
}

/// Word-wraps `text` to `width`, every line starting with `indent`.
fn wrap(out: &mut String, text: &str, indent: &str, width: usize) {
    let room = width.saturating_sub(indent.len()).max(1);
    let mut current = String::new();
    for word in text.split_whitespace() {
        let needed = columns(&current) + usize::from(!current.is_empty()) + columns(word);
        if !current.is_empty() && needed > room {
            line(out, &format!("{indent}{current}"), width);
            current.clear();
        }
        if !current.is_empty() {
            current.push(' ');
        }
        current.push_str(word);
    }
    if !current.is_empty() {
        line(out, &format!("{indent}{current}"), width);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_the_room_and_never_vanish() {
        assert_eq!(scaled_eighths(10, 10, 50), 400);
        assert_eq!(scaled_eighths(5, 10, 50), 200);
        assert_eq!(scaled_eighths(1, 100_000, 50), 1, "non-zero stays visible");
        assert_eq!(scaled_eighths(0, 10, 50), 0);
    }

    #[test]
    fn labels_lose_control_characters_and_length() {
        assert_eq!(printable("a\u{1b}[31mb"), "a?[31mb");
        let long = "x".repeat(40);
        assert_eq!(printable(&long).chars().count(), MAX_LABEL);
        assert!(printable(&long).ends_with('…'));
    }

    #[test]
    fn every_chart_line_fits_the_width() {
        let bars = vec![
            Bar::solid("0", 1_000_000),
            Bar::solid("a-very-long-subagent-type-name-indeed", 3),
            Bar {
                label: "unknown".into(),
                value: 999,
                fill: Fill::Shaded,
            },
        ];
        for width in [MIN_WIDTH, 80, 120] {
            let mut out = String::new();
            chart(&mut out, "subagents", "turns", &bars, width);
            for l in out.lines() {
                assert!(columns(l) <= width, "{width}: {l:?}");
            }
            assert!(out.contains(FULL_BLOCK));
            assert!(out.contains(SHADED_BLOCK));
        }
    }

    #[test]
    fn columns_win_then_the_terminal_then_80() {
        assert_eq!(
            choose_width(Some("120"), Some(200)),
            120,
            "COLUMNS overrides"
        );
        assert_eq!(choose_width(Some(" 100 "), None), 100);
        assert_eq!(choose_width(None, Some(132)), 132, "the real terminal");
        assert_eq!(
            choose_width(Some("wide"), Some(132)),
            132,
            "a junk COLUMNS is unset"
        );
        assert_eq!(choose_width(Some(""), Some(90)), 90);
        assert_eq!(choose_width(None, None), DEFAULT_WIDTH, "not a terminal");
        assert_eq!(choose_width(Some("10"), None), MIN_WIDTH);
        assert_eq!(choose_width(None, Some(400)), MAX_WIDTH);
    }

    #[test]
    fn wide_characters_count_as_two_columns() {
        assert_eq!(columns("探索"), 4);
        assert_eq!(columns("🤖x"), 3);
        assert_eq!(pad_left("探索", 6), "  探索");
        // Cut to columns, never inside a character: 11 CJK characters are 22 columns.
        let cut = fit(&"探".repeat(11), 10);
        assert_eq!(cut, format!("{}…", "探".repeat(4)));
        assert!(columns(&cut) <= 10);
        let cut = printable(&"🤖".repeat(20));
        assert!(columns(&cut) <= MAX_LABEL, "{cut}");
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn charts_of_wide_labels_fit_and_align_by_columns() {
        let bars = vec![
            Bar::solid("探索エージェント", 7),
            Bar::solid("🤖 reviewer", 3),
            Bar::solid("plan", 1),
        ];
        let mut out = String::new();
        chart(&mut out, "", "", &bars, MIN_WIDTH);
        let bar_at: Vec<usize> = out
            .lines()
            .map(|l| {
                assert!(columns(l) <= MIN_WIDTH, "{l:?}");
                columns(&l[..l.find('│').unwrap()])
            })
            .collect();
        assert_eq!(bar_at.len(), 3);
        assert!(bar_at.iter().all(|&c| c == bar_at[0]), "{out}");
    }

    #[test]
    fn wrapping_keeps_words_and_width() {
        let mut out = String::new();
        wrap(&mut out, &"word ".repeat(40), INDENT, 40);
        assert!(
            out.lines()
                .all(|l| l.chars().count() <= 40 && l.starts_with(INDENT))
        );
        assert_eq!(out.split_whitespace().count(), 40);
    }
}
