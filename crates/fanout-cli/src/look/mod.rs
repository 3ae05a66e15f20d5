//! Looking at runs (DESIGN 8): what `fanout sessions`, `fanout show`, the usage part of
//! `fanout report` and the web UI of `fanout serve` share — resolving a session id,
//! loading a session's tree with prices, naming the harness, and writing numbers,
//! durations and untrusted text for people (control characters made visible, so an
//! ANSI escape in a description is shown, never obeyed).

pub mod pages;
pub mod timeline;
pub mod tree;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use fanout_store::{
    Cost, PriceTable, ReportScope, SessionFilter, SessionRow, SessionView, SqlStore, Timestamp,
    Usage, UsageCell, counted_rows, session_view,
};
use serde::Serialize;

/// `--prices FILE`, shared by every command that shows cost.
#[derive(Debug, Clone, Args)]
pub struct PriceArgs {
    /// A price table (JSON, the shape of the shipped one) merged over the shipped table;
    /// `FANOUT_PRICES` also works.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
}

impl PriceArgs {
    /// The prices in force.
    pub fn load(&self) -> Result<PriceTable> {
        PriceTable::load(self.prices.as_deref()).context("loading the price table")
    }
}

/// The one session `text` names (full id, id prefix, or the harness's own id); an
/// unknown or ambiguous text is an error naming what was found.
pub async fn resolve_session(store: &SqlStore, text: &str) -> Result<String> {
    let text = text.trim();
    if text.is_empty() {
        bail!("no session id given");
    }
    let ids = store
        .session_ids_matching(text)
        .await
        .context("looking the session up")?;
    match ids.as_slice() {
        [] => bail!(
            "no session matches {:?} (give a task_sessions.id, a prefix of one, or the harness's session id; `fanout sessions` lists them)",
            clean(text)
        ),
        [one] => Ok(one.clone()),
        many => {
            let shown: Vec<&str> = many.iter().take(10).map(String::as_str).collect();
            let more = if many.len() > 10 {
                format!(" and {} more", many.len() - 10)
            } else {
                String::new()
            };
            bail!(
                "{:?} is ambiguous: {} sessions match: {}{more}",
                clean(text),
                many.len(),
                shown.join(", ")
            )
        }
    }
}

/// One session's tree, priced.
pub async fn load_view(store: &SqlStore, id: &str, prices: &PriceTable) -> Result<SessionView> {
    let only = SessionFilter {
        session_id: Some(id.to_owned()),
        ..SessionFilter::default()
    };
    let session = store
        .sessions(&only)
        .await
        .context("reading the session")?
        .into_iter()
        .next()
        .with_context(|| format!("session {id} is gone"))?;
    let scope = ReportScope::Session {
        session_id: id.to_owned(),
    };
    let turns = store.turns_of(id).await.context("reading the turns")?;
    let rows = store
        .subagents_in(&scope)
        .await
        .context("reading the subagent rows")?;
    let cells = store
        .usage_cells(&scope)
        .await
        .context("reading the usage ledger")?;
    Ok(session_view(session, turns, rows, &cells, prices))
}

/// Which harness a session came from: its ledger's source, else the dialect its agent
/// command names, else the command's program.
pub fn harness(session: &SessionRow) -> String {
    match session.usage_source.as_deref() {
        Some("claude-log") => return "claude".to_owned(),
        Some("codex-rollout") => return "codex".to_owned(),
        _ => {}
    }
    let Some(command) = session.agent_command.as_deref() else {
        return "unknown".to_owned();
    };
    // The dialect registry names the agents (fanout's own only when no other is named).
    if let Some(dialect) = fanout_acp::Dialect::for_agent_command(command) {
        return dialect.name().to_owned();
    }
    let first = command.split_whitespace().next().unwrap_or(command);
    clean(first.rsplit('/').next().unwrap_or(first))
}

/// `live` (captured by a proxy run) or `import` (read from a history).
pub fn provenance(session: &SessionRow) -> &'static str {
    match session.usage_source.as_deref() {
        Some("claude-log" | "codex-rollout") => "import",
        _ if session.agent_execution_id.is_some() => "live",
        _ => "import",
    }
}

/// One line of `fanout sessions`.
#[derive(Clone, Debug, Serialize)]
pub struct SessionLine {
    /// The session row.
    #[serde(flatten)]
    pub session: SessionRow,
    /// See [`harness`].
    pub harness: String,
    /// See [`provenance`].
    pub source: &'static str,
    /// Invocations (backfilled twins of live rows not counted).
    pub subagents: usize,
    /// Of those, launched in the background.
    pub async_subagents: usize,
    /// Of those, never settled.
    pub unsettled_subagents: usize,
    /// Every response of the session.
    pub usage: Usage,
}

/// The session list `filter` selects, with each session's counts and usage, newest first.
pub async fn session_lines(
    store: &SqlStore,
    filter: &SessionFilter,
    prices: &PriceTable,
) -> Result<Vec<SessionLine>> {
    let sessions = store
        .sessions(filter)
        .await
        .context("reading the sessions")?;
    let scope = match &filter.task_id {
        Some(task_id) => ReportScope::Task {
            task_id: task_id.clone(),
        },
        None => ReportScope::All,
    };
    let rows = counted_rows(
        store
            .subagents_in(&scope)
            .await
            .context("reading subagents")?,
    );
    let cells = store
        .usage_cells(&scope)
        .await
        .context("reading the ledger")?;
    let mut rows_by: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for row in &rows {
        let entry = rows_by.entry(row.task_session_id.as_str()).or_default();
        entry.0 += 1;
        entry.1 += usize::from(row.is_async);
        entry.2 += usize::from(row.settled_at.is_none());
    }
    let mut cells_by: BTreeMap<&str, Vec<&UsageCell>> = BTreeMap::new();
    for cell in &cells {
        cells_by
            .entry(cell.task_session_id.as_str())
            .or_default()
            .push(cell);
    }
    Ok(sessions
        .into_iter()
        .map(|session| {
            let (subagents, async_subagents, unsettled_subagents) = rows_by
                .get(session.id.as_str())
                .copied()
                .unwrap_or_default();
            let usage = Usage::of_cells(
                cells_by
                    .get(session.id.as_str())
                    .into_iter()
                    .flatten()
                    .copied(),
                prices,
            );
            SessionLine {
                harness: harness(&session),
                source: provenance(&session),
                session,
                subagents,
                async_subagents,
                unsettled_subagents,
                usage,
            }
        })
        .collect())
}

/// What the tree and the pages say about one invocation, in words.
pub struct Facts {
    /// The tool status, else the agent's status, cleaned; `-` without either.
    pub status: String,
    /// The reported duration, else observation to settle; `-` while running unreported.
    pub duration: String,
    /// `async`, `unsettled`, `unpriced`, as they apply.
    pub flags: Vec<&'static str>,
}

/// The [`Facts`] of one invocation.
pub fn facts(node: &fanout_store::InvocationNode) -> Facts {
    let row = &node.row;
    let mut flags = Vec::new();
    if row.is_async {
        flags.push("async");
    }
    if row.settled_at.is_none() {
        flags.push("unsettled");
    }
    if node.with_descendants.cost.has_unpriced() {
        flags.push("unpriced");
    }
    Facts {
        status: row
            .tool_status
            .as_deref()
            .or(row.agent_status.as_deref())
            .map(clean)
            .unwrap_or_else(|| "-".into()),
        duration: row
            .duration_ms
            .or_else(|| row.settled_at.map(|s| millis_between(row.observed_at, s)))
            .map(duration)
            .unwrap_or_else(|| "-".into()),
        flags,
    }
}

/// Untrusted text for a terminal or a page: control characters (ESC, BEL, CR, …) are
/// written as visible escapes (`\u{1b}`), and a line break becomes a space.
pub fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(' '),
            c if c.is_control() => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    out
}

/// A token count for people: `812`, `12.3k`, `4.56M`; `-` when nothing was reported.
pub fn tokens(value: Option<i64>) -> String {
    match value {
        None => "-".to_owned(),
        Some(n) if n.abs() < 1_000 => n.to_string(),
        Some(n) if n.abs() < 1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        Some(n) => format!("{:.2}M", n as f64 / 1e6),
    }
}

/// A cost for people: `$0.0123`, `$12.35`; `-` with no response; `unpriced` when no
/// response is priced; a `+` marks a lower bound (some responses unpriced).
pub fn usd(cost: &Cost) -> String {
    match cost.usd {
        None if cost.unpriced_responses > 0 => "unpriced".to_owned(),
        None => "-".to_owned(),
        Some(v) => {
            let plus = if cost.has_unpriced() { "+" } else { "" };
            if v < 1.0 {
                format!("${v:.4}{plus}")
            } else {
                format!("${v:.2}{plus}")
            }
        }
    }
}

/// The unpriced models of `cost`, named (`(no model)` for responses that named none).
pub fn unpriced_models(cost: &Cost) -> String {
    cost.unpriced_models
        .iter()
        .map(|m| {
            m.as_deref()
                .map(clean)
                .unwrap_or_else(|| "(no model)".to_owned())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A duration in milliseconds for people: `850ms`, `12.3s`, `4m05s`, `2h03m`.
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1e3)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms / 1_000) % 60)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}

/// Milliseconds from `a` to `b`.
pub fn millis_between(a: Timestamp, b: Timestamp) -> i64 {
    (b.unix_micros() - a.unix_micros()) / 1_000
}

/// A timestamp for people: `2026-08-10 09:00:01`.
pub fn when(t: Timestamp) -> String {
    let text = t.canonical();
    text.get(..19).map(|s| s.replace('T', " ")).unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_never_obeyed() {
        assert_eq!(clean("a\u{1b}[31mred\u{7}"), "a\\u{1b}[31mred\\u{7}");
        assert_eq!(clean("two\nlines"), "two lines");
        assert_eq!(clean("<b>é</b>"), "<b>é</b>");
    }

    #[test]
    fn numbers_read_as_words() {
        assert_eq!(tokens(None), "-");
        assert_eq!(tokens(Some(812)), "812");
        assert_eq!(tokens(Some(12_345)), "12.3k");
        assert_eq!(tokens(Some(4_560_000)), "4.56M");
        assert_eq!(duration(850), "850ms");
        assert_eq!(duration(12_300), "12.3s");
        assert_eq!(duration(245_000), "4m05s");
        let unpriced = Cost {
            usd: None,
            priced_responses: 0,
            unpriced_responses: 2,
            unpriced_models: [Some("m".to_owned())].into(),
        };
        assert_eq!(usd(&unpriced), "unpriced");
        assert_eq!(usd(&Cost::default()), "-");
        let partly = Cost {
            usd: Some(1.5),
            priced_responses: 1,
            ..unpriced
        };
        assert_eq!(usd(&partly), "$1.50+");
    }
}
