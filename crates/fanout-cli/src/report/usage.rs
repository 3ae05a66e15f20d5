//! The usage part of `fanout report` (DESIGN 4.1a, issue 11 item 7): per session, per
//! subagent type, per model and per invocation, tokens by kind and cost, own and with
//! descendants, the subagents' share, and reported (`totalTokens`) beside measured
//! (ledger). One set of sections feeds the table, the CSV and the HTML; the JSON is the
//! store's `UsageReport` as it serializes (documented in docs/data-contract.md).

use fanout_store::{Usage, UsageReport};

use crate::look::timeline::{fit, label, wrap};
use crate::look::{clean, tokens, unpriced_models, usd};
use crate::output::UNREPORTED_LABEL;

/// One table of the usage report.
pub struct Section {
    /// A stable key (`by_session`, `by_type`, `by_model`, `by_invocation`).
    pub key: &'static str,
    /// The heading.
    pub title: &'static str,
    /// Column names.
    pub header: Vec<&'static str>,
    /// The rows.
    pub rows: Vec<SectionRow>,
}

/// One row: its cells, and the session it is about (for links).
pub struct SectionRow {
    /// Cell texts, cleaned.
    pub cells: Vec<String>,
    /// The session it belongs to, if one.
    pub session: Option<String>,
}

fn share(v: Option<f64>) -> String {
    v.map(|v| format!("{:.0}%", v * 100.0))
        .unwrap_or_else(|| "-".into())
}

fn key_label(key: &Option<String>) -> String {
    key.as_deref()
        .map(clean)
        .unwrap_or_else(|| UNREPORTED_LABEL.to_owned())
}

/// The four sections.
pub fn sections(report: &UsageReport) -> Vec<Section> {
    let by_session = report
        .by_session
        .iter()
        .map(|l| SectionRow {
            cells: vec![
                l.task_session_id.clone(),
                l.usage.total.tokens.responses.to_string(),
                tokens(l.usage.total.total_tokens()),
                usd(&l.usage.total.cost),
                tokens(l.usage.subagents.total_tokens()),
                usd(&l.usage.subagents.cost),
                share(l.usage.subagent_token_share),
                share(l.usage.subagent_cost_share),
            ],
            session: Some(l.task_session_id.clone()),
        })
        .collect();
    let by_type = report
        .by_type
        .iter()
        .map(|l| SectionRow {
            cells: vec![
                key_label(&l.key),
                l.invocations.to_string(),
                tokens(l.own.total_tokens()),
                usd(&l.own.cost),
                tokens(l.with_descendants.total_tokens()),
                usd(&l.with_descendants.cost),
            ],
            session: None,
        })
        .collect();
    let by_model = report
        .by_model
        .iter()
        .map(|l| {
            let t = &l.own.tokens.tokens;
            SectionRow {
                cells: vec![
                    key_label(&l.key),
                    l.own.tokens.responses.to_string(),
                    tokens(t.input_tokens),
                    tokens(t.output_tokens),
                    tokens(t.cache_creation_tokens),
                    tokens(t.cache_read_tokens),
                    tokens(t.reasoning_tokens),
                    usd(&l.own.cost),
                ],
                session: None,
            }
        })
        .collect();
    let by_invocation = report
        .by_invocation
        .iter()
        .map(|l| SectionRow {
            cells: vec![
                label(l.subagent_type.as_deref(), l.description.as_deref()),
                l.task_session_id.chars().take(12).collect(),
                tokens(l.reported_total_tokens),
                tokens(l.own.total_tokens()),
                tokens(l.with_descendants.total_tokens()),
                usd(&l.own.cost),
                usd(&l.with_descendants.cost),
                if l.is_async {
                    "async".into()
                } else {
                    String::new()
                },
            ],
            session: Some(l.task_session_id.clone()),
        })
        .collect();
    vec![
        Section {
            key: "by_session",
            title: "Usage per session",
            header: vec![
                "session",
                "responses",
                "tokens",
                "cost",
                "subagent tokens",
                "subagent cost",
                "token share",
                "cost share",
            ],
            rows: by_session,
        },
        Section {
            key: "by_type",
            title: "Usage per subagent type",
            header: vec![
                "type",
                "invocations",
                "own tokens",
                "own cost",
                "with descendants",
                "cost with descendants",
            ],
            rows: by_type,
        },
        Section {
            key: "by_model",
            title: "Usage per model",
            header: vec![
                "model",
                "responses",
                "input",
                "output",
                "cache write",
                "cache read",
                "reasoning",
                "cost",
            ],
            rows: by_model,
        },
        Section {
            key: "by_invocation",
            title: "Usage per invocation (reported = the agent's totalTokens; measured = the ledger)",
            header: vec![
                "invocation",
                "session",
                "reported",
                "measured own",
                "with descendants",
                "cost own",
                "cost with desc.",
                "",
            ],
            rows: by_invocation,
        },
    ]
}

/// The usage sections as text in `width` columns.
pub fn table(report: &UsageReport, width: usize) -> String {
    let t = &report.total;
    let mut out = format!(
        "\nUSAGE (measured from the ledger; prices of {})\n{} tokens in {} response(s), cost {} · subagents {} tokens, {} ({} of tokens, {} of cost)\n",
        report.prices_taken_on,
        tokens(t.total.total_tokens()),
        t.total.tokens.responses,
        usd(&t.total.cost),
        tokens(t.subagents.total_tokens()),
        usd(&t.subagents.cost),
        share(t.subagent_token_share),
        share(t.subagent_cost_share),
    );
    out.push_str(&unpriced_note(&t.total));
    let mut out: String = out
        .lines()
        .flat_map(|line| wrap(line, width))
        .map(|line| line + "\n")
        .collect();
    for section in sections(report) {
        if section.rows.is_empty() {
            continue;
        }
        out.push_str(&format!("\n{}\n", section.title));
        let columns = section.header.len();
        let numeric = 8usize;
        let first = width
            .saturating_sub((columns - 1) * (numeric + 1))
            .clamp(12, 48);
        let mut line = fit(section.header[0], first);
        for h in &section.header[1..] {
            line.push(' ');
            line.push_str(&format!("{:>numeric$}", fit(h, numeric).trim_end()));
        }
        out.push_str(line.trim_end());
        out.push('\n');
        for row in &section.rows {
            let mut line = fit(&row.cells[0], first);
            for cell in &row.cells[1..] {
                line.push(' ');
                line.push_str(&format!("{:>numeric$}", fit(cell, numeric).trim_end()));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    out
}

fn unpriced_note(total: &Usage) -> String {
    if total.cost.has_unpriced() {
        format!(
            "unpriced: {} response(s) of {}: no known price, left out of every cost (shown as `unpriced`, or `+` for a lower bound), never $0; add prices with --prices FILE\n",
            total.cost.unpriced_responses,
            unpriced_models(&total.cost)
        )
    } else {
        String::new()
    }
}

fn usage_rows(
    section: &'static str,
    key: &str,
    usage: &Usage,
    out: &mut Vec<(String, String, String)>,
) {
    let t = &usage.tokens.tokens;
    let opt = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    let fields = [
        ("responses", usage.tokens.responses.to_string()),
        ("input_tokens", opt(t.input_tokens)),
        ("output_tokens", opt(t.output_tokens)),
        ("cache_creation_tokens", opt(t.cache_creation_tokens)),
        ("cache_read_tokens", opt(t.cache_read_tokens)),
        ("reasoning_tokens", opt(t.reasoning_tokens)),
        (
            "cost_usd",
            usage
                .cost
                .usd
                .map(|v| format!("{v:.6}"))
                .unwrap_or_default(),
        ),
        (
            "unpriced_responses",
            usage.cost.unpriced_responses.to_string(),
        ),
    ];
    for (field, value) in fields {
        out.push((section.to_owned(), format!("{key}.{field}"), value));
    }
}

/// The usage figures as tidy `section,key,value` rows: sections `usage_total`,
/// `usage_by_session`, `usage_by_type`, `usage_by_model`, `usage_by_invocation`; keys
/// `<group>.<part>.<field>` (an empty value: not reported / not priced, never 0).
pub fn csv_rows(report: &UsageReport) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let t = &report.total;
    out.push((
        "usage_total".into(),
        "prices_taken_on".into(),
        report.prices_taken_on.clone(),
    ));
    usage_rows("usage_total", "total", &t.total, &mut out);
    usage_rows("usage_total", "subagents", &t.subagents, &mut out);
    for l in &report.by_session {
        usage_rows(
            "usage_by_session",
            &format!("{}.total", l.task_session_id),
            &l.usage.total,
            &mut out,
        );
        usage_rows(
            "usage_by_session",
            &format!("{}.subagents", l.task_session_id),
            &l.usage.subagents,
            &mut out,
        );
    }
    for l in &report.by_type {
        let key = key_label(&l.key);
        out.push((
            "usage_by_type".into(),
            format!("{key}.invocations"),
            l.invocations.to_string(),
        ));
        usage_rows("usage_by_type", &format!("{key}.own"), &l.own, &mut out);
        usage_rows(
            "usage_by_type",
            &format!("{key}.with_descendants"),
            &l.with_descendants,
            &mut out,
        );
    }
    for l in &report.by_model {
        usage_rows("usage_by_model", &key_label(&l.key), &l.own, &mut out);
    }
    for l in &report.by_invocation {
        let key = format!("{}/{}", l.task_session_id, l.tool_call_id);
        out.push((
            "usage_by_invocation".into(),
            format!("{key}.reported_total_tokens"),
            l.reported_total_tokens
                .map(|v| v.to_string())
                .unwrap_or_default(),
        ));
        usage_rows(
            "usage_by_invocation",
            &format!("{key}.own"),
            &l.own,
            &mut out,
        );
        usage_rows(
            "usage_by_invocation",
            &format!("{key}.with_descendants"),
            &l.with_descendants,
            &mut out,
        );
    }
    out
}
