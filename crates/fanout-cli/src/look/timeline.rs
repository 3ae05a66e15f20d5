//! The timeline of one turn: one bar per invocation, from its observation to its
//! settle, in launch order (depth first), so parallel invocations stack one above the
//! other; an unsettled invocation runs to the turn's end and is drawn open. The same
//! layout feeds the text timeline of `fanout show` and the SVG of the HTML pages.

use fanout_store::{Timestamp, TurnView};
use serde::Serialize;
use unicode_width::UnicodeWidthStr;

use super::{clean, duration, millis_between};

/// One invocation's bar, in milliseconds from the turn's start.
#[derive(Clone, Debug, Serialize)]
pub struct Bar {
    /// The invocation's tool call.
    pub tool_call_id: String,
    /// `type: description`, cleaned.
    pub label: String,
    /// Nesting depth (1: launched by the session's agent).
    pub depth: usize,
    /// Offset of its observation.
    pub start_ms: i64,
    /// Offset of its settle, or of the turn's end when open.
    pub end_ms: i64,
    /// Never settled: drawn open to the turn's end.
    pub open: bool,
    /// Left edge in percent of the turn (for the SVG).
    pub x_pct: f64,
    /// Width in percent of the turn (for the SVG), at least a sliver.
    pub w_pct: f64,
}

/// One turn's bars.
#[derive(Clone, Debug, Serialize)]
pub struct TurnTimeline {
    /// The turn's length in milliseconds (at least 1).
    pub span_ms: i64,
    /// One per invocation.
    pub bars: Vec<Bar>,
}

/// Lays out `turn`; a turn that has not ended ends at its latest known instant.
pub fn layout(turn: &TurnView) -> TurnTimeline {
    let nodes = turn.all_invocations();
    let start = turn
        .turn
        .as_ref()
        .map(|t| t.started_at)
        .into_iter()
        .chain(nodes.iter().map(|n| n.row.observed_at))
        .min()
        .unwrap_or_else(Timestamp::now);
    let end = match turn.turn.as_ref().and_then(|t| t.completed_at) {
        Some(end) => end,
        None => nodes
            .iter()
            .flat_map(|n| [Some(n.row.updated_at), n.row.settled_at])
            .flatten()
            .max()
            .unwrap_or(start),
    };
    let span_ms = millis_between(start, end).max(1);
    let bars = nodes
        .iter()
        .map(|node| {
            let row = &node.row;
            let start_ms = millis_between(start, row.observed_at).clamp(0, span_ms);
            let (end_ms, open) = match row.settled_at {
                Some(settled) => (
                    millis_between(start, settled).clamp(start_ms, span_ms),
                    false,
                ),
                None => (span_ms, true),
            };
            let x_pct = start_ms as f64 * 100.0 / span_ms as f64;
            let w_pct = ((end_ms - start_ms) as f64 * 100.0 / span_ms as f64).max(0.4);
            Bar {
                tool_call_id: row.tool_call_id.clone(),
                label: label(row.subagent_type.as_deref(), row.description.as_deref()),
                depth: node.depth,
                start_ms,
                end_ms,
                open,
                x_pct,
                w_pct: w_pct.min(100.0 - x_pct).max(0.4),
            }
        })
        .collect();
    TurnTimeline { span_ms, bars }
}

/// `type: description`, cleaned; `(untyped)` without a type.
pub fn label(kind: Option<&str>, description: Option<&str>) -> String {
    let kind = kind.map(clean).unwrap_or_else(|| "(untyped)".to_owned());
    match description {
        Some(d) if !d.trim().is_empty() => format!("{kind}: {}", clean(d)),
        _ => kind,
    }
}

/// The text timeline in `width` columns: a label column, then the bar area. A settled
/// bar is `█`, an open one `▒` ending in `▸` at the turn's end.
pub fn render_text(timeline: &TurnTimeline, width: usize) -> Vec<String> {
    let width = width.max(40);
    let label_width = (width / 3).clamp(12, 40);
    let area = width.saturating_sub(label_width + 3).max(10);
    let scale = |ms: i64| ((ms as f64 / timeline.span_ms as f64) * area as f64).round() as usize;
    let mut lines = vec![format!(
        "{:label_width$} ┊0{:>pad$}┊",
        "",
        duration(timeline.span_ms),
        pad = area.saturating_sub(1)
    )];
    for bar in &timeline.bars {
        let indent = "  ".repeat(bar.depth.saturating_sub(1));
        let name = fit(&format!("{indent}{}", bar.label), label_width);
        let from = scale(bar.start_ms).min(area.saturating_sub(1));
        let to = scale(bar.end_ms).clamp(from + 1, area);
        let mut cells = " ".repeat(from);
        if bar.open {
            cells.push_str(&"▒".repeat(to - from - 1));
            cells.push('▸');
        } else {
            cells.push_str(&"█".repeat(to - from));
        }
        cells.push_str(&" ".repeat(area - to));
        lines.push(format!("{name} ┊{cells}┊"));
    }
    lines
}

/// `text` cut or padded to exactly `width` display columns (`…` marks a cut).
pub fn fit(text: &str, width: usize) -> String {
    if text.width() <= width {
        return format!("{text}{}", " ".repeat(width - text.width()));
    }
    let mut out = String::new();
    for c in text.chars() {
        if out.width() + unicode_width::UnicodeWidthChar::width(c).unwrap_or(0) + 1 > width {
            break;
        }
        out.push(c);
    }
    out.push('…');
    let pad = width.saturating_sub(out.width());
    out.push_str(&" ".repeat(pad));
    out
}

/// `line` broken at spaces into pieces of at most `width` columns, continuations
/// indented by four; a line that is already short enough (the tree, the timeline)
/// is kept, and a word longer than a line is cut.
pub fn wrap(line: &str, width: usize) -> Vec<String> {
    if line.width() <= width {
        return vec![line.to_owned()];
    }
    let body = line.trim_start_matches(' ');
    let indent = &line[..line.len() - body.len()];
    let mut pieces = Vec::new();
    let mut current = indent.to_owned();
    for word in body.split(' ') {
        let candidate = if current.trim().is_empty() {
            format!("{current}{word}")
        } else {
            format!("{current} {word}")
        };
        if candidate.width() > width && !current.trim().is_empty() {
            pieces.push(current);
            current = format!("{indent}    {word}");
        } else {
            current = candidate;
        }
    }
    pieces.push(current);
    pieces
        .into_iter()
        .map(|p| {
            if p.width() > width {
                fit(&p, width).trim_end().to_owned()
            } else {
                p
            }
        })
        .collect()
}
