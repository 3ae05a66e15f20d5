//! `fanout sessions`: one line per session, newest first (DESIGN 8): harness, task,
//! start, turns, subagents (async, unsettled), tokens, cost (unpriced flagged), source.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, ValueEnum};
use fanout_store::{SessionFilter, Timestamp};

use crate::look::timeline::fit;
use crate::look::{PriceArgs, SessionLine, clean, session_lines, tokens, usd, when};
use crate::output::DbArgs;
use crate::report::parse_instant;

/// Output formats of `sessions` and `show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LookFormat {
    /// Text for people, fitted to the terminal.
    Table,
    /// JSON with the stable field names of docs/data-contract.md.
    Json,
}

#[derive(Debug, Args)]
pub struct SessionsArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub prices: PriceArgs,
    /// Only sessions started at or after this instant (RFC 3339 or YYYY-MM-DD).
    #[arg(long, value_name = "TS", value_parser = parse_instant)]
    pub since: Option<Timestamp>,
    /// Only this task's sessions.
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = LookFormat::Table)]
    pub format: LookFormat,
}

pub async fn run(args: SessionsArgs) -> Result<ExitCode> {
    let prices = args.prices.load()?;
    let store = args.db.open_existing().await?;
    let filter = SessionFilter {
        task_id: args.task.clone(),
        since: args.since,
        ..SessionFilter::default()
    };
    let lines = session_lines(&store, &filter, &prices).await;
    store.close().await;
    let lines = lines?;
    match args.format {
        LookFormat::Json => {
            let doc = serde_json::json!({ "sessions": lines, "prices_taken_on": prices.taken_on });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        LookFormat::Table => print!("{}", table(&lines, crate::report::terminal_width())),
    }
    Ok(ExitCode::SUCCESS)
}

/// The table, one line per session; the task column takes what the width leaves.
pub fn table(lines: &[SessionLine], width: usize) -> String {
    if lines.is_empty() {
        return "no sessions (import a history with `fanout import`, or capture one with `fanout proxy`)\n".to_owned();
    }
    let fixed = [12, 8, 19, 5, 16, 8, 10, 6];
    let used: usize = fixed.iter().sum::<usize>() + fixed.len();
    let task_width = width.saturating_sub(used).clamp(8, 40);
    let mut out = format!(
        "{} {} {} {} {} {} {} {} {}\n",
        fit("SESSION", 12),
        fit("HARNESS", 8),
        fit("TASK", task_width),
        fit("STARTED", 19),
        fit("TURNS", 5),
        fit("SUBAGENTS", 16),
        fit("TOKENS", 8),
        fit("COST", 10),
        "SOURCE"
    );
    let mut unpriced = 0;
    for line in lines {
        let s = &line.session;
        let subagents = format!(
            "{} ({}a {}u)",
            line.subagents, line.async_subagents, line.unsettled_subagents
        );
        unpriced += line.usage.cost.unpriced_responses;
        out.push_str(&format!(
            "{} {} {} {} {} {} {} {} {}\n",
            fit(&s.id, 12),
            fit(&line.harness, 8),
            fit(&clean(&s.task_id), task_width),
            fit(&when(s.started_at), 19),
            fit(&s.turns.to_string(), 5),
            fit(&subagents, 16),
            fit(&tokens(line.usage.total_tokens()), 8),
            fit(&usd(&line.usage.cost), 10),
            line.source
        ));
    }
    out.push_str(&format!(
        "{} session(s); subagents as total (async, unsettled); `fanout show <SESSION>` opens one (a prefix is enough)\n",
        lines.len()
    ));
    if unpriced > 0 {
        out.push_str(&format!(
            "{unpriced} response(s) have no known price: their cost is left out (`unpriced`, or `+` for a lower bound), never counted as $0\n"
        ));
    }
    out
}
