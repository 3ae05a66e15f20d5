//! The report as one self-contained HTML page: inline CSS, an inline SVG bar chart of
//! the fan-out distribution, no script and no external asset, so the file can be mailed,
//! archived or opened offline. Every value from the database is escaped.

use std::fmt::Write as _;

use fanout_store::{CountBy, FanoutReport, MetricStats};

use super::{decimal, turns_summary, unknown_fanout_note};
use crate::output::{
    UNKNOWN_FANOUT_RULE, backfill_through_label, capture_since_label, group_label, scope_label,
};

const STYLE: &str = "
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; padding: 0 1rem; color: #1d2430; }
h1 { font-size: 1.5rem; margin-bottom: .25rem; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #d5dae1; padding-bottom: .2rem; }
dl.meta { display: grid; grid-template-columns: max-content auto; gap: .15rem 1rem; }
dl.meta dt { color: #5b6575; }
dl.meta dd { margin: 0; font-family: ui-monospace, monospace; }
table { border-collapse: collapse; margin: .5rem 0; }
th, td { padding: .2rem .7rem; text-align: right; border-bottom: 1px solid #eceff3; }
th:first-child, td:first-child { text-align: left; }
td.bar { width: 16rem; text-align: left; }
td.bar span { display: inline-block; height: .8rem; background: #3b6fd8; border-radius: 2px; }
.note { color: #5b6575; font-size: .92rem; max-width: 48rem; }
.unknown { color: #8a5a00; }
svg text { font: 12px system-ui, sans-serif; fill: #1d2430; }
";

const CHART_WIDTH: f64 = 640.0;
const CHART_HEIGHT: f64 = 260.0;
const MARGIN_LEFT: f64 = 48.0;
const MARGIN_RIGHT: f64 = 16.0;
const MARGIN_TOP: f64 = 24.0;
const MARGIN_BOTTOM: f64 = 44.0;
/// Horizontal room one bar label needs.
const MIN_LABEL_SPACING: f64 = 28.0;

/// The fan-out sections as an HTML fragment (every value escaped), for the shared
/// report template: its own style first, scoped to `.fanout-report`.
pub(crate) fn fragment(report: &FanoutReport, database: &str) -> String {
    let body = sections(report, database);
    let scoped: String = STYLE
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("body"))
        .map(|l| format!(".fanout-report {l}\n"))
        .collect();
    format!("<style>{scoped}</style><div class=\"fanout-report\">{body}</div>")
}

fn sections(report: &FanoutReport, database: &str) -> String {
    let title = format!("fanout report: {}", scope_label(&report.scope));
    let mut body = String::new();
    let _ = write!(body, "<h1>{}</h1>", escape(&title));
    let activation = &report.activation;
    body.push_str("<dl class=\"meta\">");
    for (term, value) in [
        ("database", database),
        ("capture since", capture_since_label(activation)),
        ("backfill through", backfill_through_label(activation)),
    ] {
        let _ = write!(body, "<dt>{term}</dt><dd>{}</dd>", escape(value));
    }
    body.push_str("</dl>");

    fanout_section(&mut body, report);
    subagent_section(&mut body, report);
    metrics_section(&mut body, report);
    nesting_section(&mut body, report);
    body
}

fn fanout_section(body: &mut String, report: &FanoutReport) {
    let turns = &report.turns;
    body.push_str("<h2>Fan-out per turn</h2>");
    let _ = write!(body, "<p>{}.</p>", escape(&turns_summary(turns)));
    if turns.turns > 0 {
        body.push_str(&fanout_chart(report));
    }
    let _ = write!(
        body,
        "<p class=\"note\">{}</p><p class=\"note\">Rule: {}</p>",
        escape(&unknown_fanout_note(turns, "hatched")),
        escape(UNKNOWN_FANOUT_RULE)
    );
}

/// Vertical bars, one per fan-out (0, 1, 2, …) and a hatched one for unknown fan-out.
fn fanout_chart(report: &FanoutReport) -> String {
    let turns = &report.turns;
    let mut bars: Vec<(String, i64, bool)> = turns
        .distribution
        .iter()
        .map(|b| (b.subagents.to_string(), b.turns, false))
        .collect();
    if turns.unknown.turns > 0 {
        bars.push(("unknown".to_owned(), turns.unknown.turns, true));
    }
    let plot_width = CHART_WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
    let plot_height = CHART_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM;
    let largest = bars.iter().map(|b| b.1).max().unwrap_or(0).max(1) as f64;
    let slot = plot_width / bars.len().max(1) as f64;
    let bar_width = slot * 0.7;
    let baseline = MARGIN_TOP + plot_height;
    // With many buckets, label every n-th so 12px labels never overlap.
    let label_every = (MIN_LABEL_SPACING / slot).ceil().max(1.0) as usize;
    let mut svg = format!(
        "<svg width=\"{CHART_WIDTH}\" height=\"{CHART_HEIGHT}\" \
         viewBox=\"0 0 {CHART_WIDTH} {CHART_HEIGHT}\" role=\"img\" aria-label=\"turns by number of subagents spawned\">\
         <defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">\
         <rect width=\"6\" height=\"6\" fill=\"#f6e7c8\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#b07a10\" stroke-width=\"2\"/></pattern></defs>"
    );
    let _ = write!(
        svg,
        "<line x1=\"{MARGIN_LEFT}\" y1=\"{baseline:.1}\" x2=\"{:.1}\" y2=\"{baseline:.1}\" stroke=\"#8892a0\"/>",
        CHART_WIDTH - MARGIN_RIGHT
    );
    for (i, (label, value, unknown)) in bars.iter().enumerate() {
        let height = *value as f64 / largest * plot_height;
        let x = MARGIN_LEFT + i as f64 * slot + (slot - bar_width) / 2.0;
        let y = baseline - height;
        let center = x + bar_width / 2.0;
        let fill = if *unknown {
            "url(#hatch)\" stroke=\"#b07a10"
        } else {
            "#3b6fd8"
        };
        let what = if *unknown {
            format!("{value} turn(s) with unknown fan-out")
        } else {
            format!("{value} turn(s) spawned {label} subagent(s)")
        };
        let _ = write!(
            svg,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{bar_width:.1}\" height=\"{height:.1}\" fill=\"{fill}\"><title>{}</title></rect>",
            escape(&what)
        );
        if *unknown || i % label_every == 0 {
            let _ = write!(
                svg,
                "<text x=\"{center:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{value}</text>\
                 <text x=\"{center:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                y - 6.0,
                baseline + 16.0,
                escape(label)
            );
        }
    }
    let _ = write!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">subagents spawned per turn</text>\
         <text x=\"14\" y=\"{:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {:.1})\">turns</text></svg>",
        MARGIN_LEFT + plot_width / 2.0,
        CHART_HEIGHT - 8.0,
        MARGIN_TOP + plot_height / 2.0,
        MARGIN_TOP + plot_height / 2.0
    );
    svg
}

fn subagent_section(body: &mut String, report: &FanoutReport) {
    let s = &report.subagents;
    let p = &report.provenance;
    body.push_str("<h2>Subagents</h2>");
    key_value_table(
        body,
        &[
            ("in scope", s.total.to_string()),
            ("outside any turn", s.without_turn.to_string()),
            ("in a deleted turn", s.turn_not_found.to_string()),
            ("async (background) launches", s.async_launches.to_string()),
            ("never settled", s.unsettled.to_string()),
            ("provenance: live", p.live.to_string()),
            ("provenance: imported", p.imported.to_string()),
            ("provenance: backfill", p.backfill.to_string()),
            (
                "backfilled twins of live rows (counted once, as live)",
                p.backfill_duplicates_of_live.to_string(),
            ),
            (
                "execution 'unknown' (of them live)",
                format!("{} ({})", p.unknown_execution, p.live_unknown_execution),
            ),
        ],
    );
    for (title, groups) in [("By type", &report.by_type), ("By model", &report.by_model)] {
        let _ = write!(body, "<h2>{title}</h2>");
        count_table(body, groups);
    }
}

fn count_table(body: &mut String, groups: &[CountBy]) {
    if groups.is_empty() {
        body.push_str("<p>No subagents in scope.</p>");
        return;
    }
    let largest = groups.iter().map(|g| g.subagents).max().unwrap_or(0).max(1) as f64;
    body.push_str("<table><tr><th>value</th><th>subagents</th><th></th></tr>");
    for group in groups {
        let percent = group.subagents as f64 / largest * 100.0;
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td class=\"bar\"><span style=\"width: {percent:.1}%\"></span></td></tr>",
            escape(group_label(group)),
            group.subagents
        );
    }
    body.push_str("</table>");
}

fn metrics_section(body: &mut String, report: &FanoutReport) {
    body.push_str("<h2>Metrics</h2><p class=\"note\">Over reported values only: a row that reported nothing is counted in <em>unreported</em>, never as 0.</p>");
    body.push_str("<table><tr><th>metric</th><th>reported</th><th>unreported</th><th>min</th><th>p50</th><th>mean</th><th>max</th><th>sum</th></tr>");
    let int = |v: Option<i64>| v.map_or_else(|| "–".to_owned(), |v| v.to_string());
    let float = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), decimal);
    for (name, m) in [
        ("total_tokens", &report.total_tokens),
        ("duration_ms", &report.duration_ms),
        ("tool_use_count", &report.tool_use_count),
    ] {
        let m: &MetricStats = m;
        let _ = write!(
            body,
            "<tr><td>{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            m.reported,
            m.unreported,
            int(m.min),
            float(m.p50),
            float(m.mean),
            int(m.max),
            int(m.sum)
        );
    }
    body.push_str("</table>");
}

fn nesting_section(body: &mut String, report: &FanoutReport) {
    let n = &report.nesting;
    body.push_str("<h2>Nesting depth</h2><p class=\"note\">0 = launched by the session's agent, 1 = by a subagent, 2 = by a sub-subagent, …</p>");
    let rows: Vec<(String, String)> = n
        .by_depth
        .iter()
        .map(|b| (format!("depth {}", b.depth), b.subagents.to_string()))
        .chain([
            (
                "parent not a subagent".to_owned(),
                n.parent_not_a_subagent.to_string(),
            ),
            ("cyclic parent chain".to_owned(), n.cyclic.to_string()),
        ])
        .collect();
    key_value_table(body, &rows);
}

fn key_value_table(body: &mut String, rows: &[(impl AsRef<str>, String)]) {
    body.push_str("<table>");
    for (key, value) in rows {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(key.as_ref()),
            escape(value)
        );
    }
    body.push_str("</table>");
}

/// Text for HTML element content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn markup_in_values_is_escaped() {
        assert_eq!(
            escape("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"
        );
    }
}
