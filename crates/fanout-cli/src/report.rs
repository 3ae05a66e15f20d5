//! `fanout report`: the fan-out report of one task, one session, one time window or
//! everything, as a terminal table with bar charts, JSON, CSV, and optionally a
//! self-contained HTML page. The figures come from `fanout_store::FanoutReport`; this
//! module only chooses the scope and draws.

mod csv;
mod html;
mod json;
mod table;
pub(crate) mod usage;

pub(crate) use table::terminal_width;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use fanout_store::{ReportScope, Timestamp, TurnFanout};

use crate::output::DbArgs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// Text for people: bar charts and tables, fitted to the width (`COLUMNS`, else the terminal's, else 80).
    Table,
    /// The report as one JSON document with stable field names.
    Json,
    /// One tidy table `section,key,value` (RFC 4180): one row per figure.
    Csv,
}

/// What `fanout report --help` adds after the options: how to read the figures.
const REPORT_AFTER_HELP: &str = "\
Scope: without --task, --session, --since or --until the report covers everything. A window
[--since, --until) selects turns by start time and subagents by observation time; a turn in
the window keeps all of its subagents.

Unknown fan-out (AC-25): a turn that started before subagent_context_backfill_through and has
no live subagent row is shown apart as unknown, never counted as 0 (before that instant only
the backfill saw subagents). Metrics are over reported values: a NULL is \"not reported\" and
is counted as such, never as 0.";

#[derive(Debug, Args)]
#[command(after_help = REPORT_AFTER_HELP)]
pub struct ReportArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub prices: crate::look::PriceArgs,
    /// Only this task's turns and subagents.
    #[arg(long, value_name = "ID", conflicts_with_all = ["session", "since", "until"])]
    pub task: Option<String>,
    /// Only this session's turns and subagents (`task_sessions.id`).
    #[arg(long, value_name = "ID", conflicts_with_all = ["since", "until"])]
    pub session: Option<String>,
    /// Window start, inclusive (RFC 3339 or YYYY-MM-DD for UTC midnight): turns by start time, subagents by observation time.
    #[arg(long, value_name = "TS", value_parser = parse_instant)]
    pub since: Option<Timestamp>,
    /// Window end, exclusive (RFC 3339 or YYYY-MM-DD for UTC midnight).
    #[arg(long, value_name = "TS", value_parser = parse_instant)]
    pub until: Option<Timestamp>,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
    /// Also write the report as one self-contained HTML page (inline CSS and SVG chart).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// RFC 3339 with any offset, or a bare date meaning its UTC midnight.
pub(crate) fn parse_instant(text: &str) -> Result<Timestamp, String> {
    Timestamp::parse(text)
        .or_else(|_| Timestamp::parse(&format!("{}T00:00:00Z", text.trim())))
        .map_err(|_| format!("not a timestamp: {text:?} (expected RFC 3339, e.g. 2026-08-10T09:00:00Z, or YYYY-MM-DD)"))
}

impl ReportArgs {
    fn scope(&self) -> Result<ReportScope> {
        if let Some(task_id) = &self.task {
            return Ok(ReportScope::Task {
                task_id: task_id.clone(),
            });
        }
        if let Some(session_id) = &self.session {
            return Ok(ReportScope::Session {
                session_id: session_id.clone(),
            });
        }
        if let (Some(since), Some(until)) = (self.since, self.until)
            && since >= until
        {
            bail!("the window is empty: --since {since} is not before --until {until}");
        }
        Ok(match (self.since, self.until) {
            (None, None) => ReportScope::All,
            (since, until) => ReportScope::Window { since, until },
        })
    }
}

pub async fn run(args: ReportArgs) -> Result<ExitCode> {
    let scope = match args.scope() {
        Ok(scope) => scope,
        Err(err) => {
            // Contradictory flags are a usage error, like the ones clap refuses.
            eprintln!("fanout: {err:#}");
            return Ok(ExitCode::from(crate::output::EXIT_USAGE));
        }
    };
    let prices = args.prices.load()?;
    let store = args.db.open_existing().await?;
    let both = async {
        let report = store
            .fanout_report(&scope)
            .await
            .context("computing the fan-out report")?;
        let usage = usage_report_of(&store, &scope, &prices).await?;
        anyhow::Ok((report, usage))
    }
    .await;
    let database = format!("{} ({})", store.target(), store.engine());
    store.close().await;
    let (report, usage) = both?;
    if let Some(path) = &args.html {
        let page = crate::look::pages::Pages::new()?.report_page(
            &usage,
            &crate::output::scope_label(&scope),
            Some(html::fragment(&report, &database)),
            false,
        )?;
        std::fs::write(path, page)
            .with_context(|| format!("writing the HTML report to {}", path.display()))?;
        eprintln!("fanout: wrote the HTML report to {}", path.display());
    }
    let text = match args.format {
        ReportFormat::Table => {
            let width = terminal_width();
            table::render(&report, &database, width) + &usage::table(&usage, width)
        }
        ReportFormat::Json => json::render(&report, &usage)?,
        ReportFormat::Csv => {
            let mut text = csv::render(&report);
            for (section, key, value) in usage::csv_rows(&usage) {
                text.push_str(&format!(
                    "{},{},{}\n",
                    csv::field(&section),
                    csv::field(&key),
                    csv::field(&value)
                ));
            }
            text
        }
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// The fan-out report's HTML sections, for the shared report template.
pub(crate) fn fanout_fragment(report: &fanout_store::FanoutReport, database: &str) -> String {
    html::fragment(report, database)
}

/// The usage report over `scope`, priced with `prices`.
pub(crate) async fn usage_report_of(
    store: &fanout_store::SqlStore,
    scope: &ReportScope,
    prices: &fanout_store::PriceTable,
) -> Result<fanout_store::UsageReport> {
    let rows = store
        .subagents_in(scope)
        .await
        .context("reading the subagent rows")?;
    let cells = store
        .usage_cells(scope)
        .await
        .context("reading the usage ledger")?;
    Ok(fanout_store::usage_report(rows, &cells, prices))
}

/// A number of the report for people: integers as they are, fractions to two places.
fn decimal(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

/// The one-line summary of the turns: known, unknown, and the mean of the known.
fn turns_summary(turns: &TurnFanout) -> String {
    let mean = turns
        .mean_per_known_turn
        .map(|m| format!(", mean {} per turn", decimal(m)))
        .unwrap_or_default();
    format!(
        "{} turn(s): {} with known fan-out ({} subagent(s){mean}), {} unknown",
        turns.turns, turns.known_turns, turns.subagents_in_known_turns, turns.unknown.turns
    )
}

/// What the unknown-fan-out bucket holds and why (AC-25), short enough for a terminal;
/// `marker` names how the bucket is drawn. The full rule travels in the JSON and HTML.
fn unknown_fanout_note(turns: &TurnFanout, marker: &str) -> String {
    let unknown = &turns.unknown;
    match unknown.before {
        None => {
            "No unknown fan-out window: nothing was backfilled, so every turn's count is known."
                .to_owned()
        }
        Some(before) => format!(
            "Unknown fan-out ({marker}): {} turn(s) started before backfill_through {before} and have no live row. Before that instant only the backfill saw subagents, so a missing row means \"not recorded\", not \"none\": these turns are left out of the distribution, never counted as 0. With backfilled rows: {} turn(s), {} row(s), a lower bound.",
            unknown.turns, unknown.turns_with_backfill_rows, unknown.backfill_rows
        ),
    }
}
