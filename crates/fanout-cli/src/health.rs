//! `fanout health`: the writer-health verdict of AC-28/AC-28a/AC-29 from the database
//! alone, as an exit status a script can branch on.
//!
//! Exit status: 0 healthy, 1 shortfall (subagent messages without a subagent row), 2 no
//! verdict (capture never activated, or nothing written since activation), 3 the check
//! could not run (bad URL, unreachable or missing database). Errors never share a code
//! with a verdict, so `fanout health || page-someone` cannot mistake one for the other.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use fanout_store::{Health, HealthVerdict, SqlStore};
use serde::Serialize;

use crate::output::{
    DbArgs, Format, backfill_through_label, capture_since_label, health_explanation,
};

/// The exit status when the check itself could not run.
pub const EXIT_CHECK_FAILED: u8 = 3;

#[derive(Debug, Args)]
#[command(after_help = "\
Exit status: 0 healthy, 1 shortfall (subagent messages since capture_since with no subagent
row), 2 no verdict (capture never activated, or nothing written since activation), 3 the
check could not run (bad URL, unreachable or missing database), 64 a usage error.")]
pub struct HealthArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

pub async fn run(args: HealthArgs) -> Result<ExitCode> {
    match check(&args).await {
        Ok(code) => Ok(code),
        Err(err) => {
            // One line, and a status no verdict uses (the caller's generic failure is 1,
            // which here means "shortfall").
            let message = format!("{err:#}");
            eprintln!(
                "fanout health: {}",
                message.split_whitespace().collect::<Vec<_>>().join(" ")
            );
            Ok(ExitCode::from(EXIT_CHECK_FAILED))
        }
    }
}

/// The verdict's exit status.
fn exit_status(verdict: HealthVerdict) -> u8 {
    match verdict {
        HealthVerdict::Healthy => 0,
        HealthVerdict::Shortfall => 1,
        HealthVerdict::NoVerdict => 2,
    }
}

/// The JSON shape of `fanout health --format json`: flat, stable names, `null` where a
/// figure does not exist (no verdict).
#[derive(Serialize)]
struct HealthJson<'a> {
    verdict: HealthVerdict,
    exit_status: u8,
    explanation: String,
    database: &'a str,
    engine: fanout_store::Engine,
    capture_since: Option<&'a str>,
    /// `""` when activation found nothing to backfill.
    backfill_through: Option<&'a str>,
    shortfall: Option<i64>,
    excess: Option<i64>,
    /// The last subagent row observed since activation; `null` means none (AC-29).
    last_observed_at: Option<String>,
}

async fn check(args: &HealthArgs) -> Result<ExitCode> {
    let store = args.db.open_existing().await?;
    let health = store.health().await.context("checking writer health")?;
    let verdict = health.verdict();
    let status = exit_status(verdict);
    match args.format {
        Format::Json => {
            let json = health_json(&store, &health, status);
            println!("{}", serde_json::to_string_pretty(&json)?);
        }
        Format::Text => print_text(&store, &health),
    }
    store.close().await;
    Ok(ExitCode::from(status))
}

fn health_json<'a>(store: &'a SqlStore, health: &'a Health, exit_status: u8) -> HealthJson<'a> {
    let figures = health.figures.as_ref();
    HealthJson {
        verdict: health.verdict(),
        exit_status,
        explanation: health_explanation(health),
        database: store.target(),
        engine: store.engine(),
        capture_since: health.activation.capture_since.as_deref(),
        backfill_through: health.activation.backfill_through.as_deref(),
        shortfall: figures.map(|f| f.shortfall),
        excess: figures.map(|f| f.excess),
        last_observed_at: figures.and_then(|f| f.last_observed_at.map(|t| t.canonical())),
    }
}

fn print_text(store: &SqlStore, health: &Health) {
    let verdict = match health.verdict() {
        HealthVerdict::Healthy => "healthy",
        HealthVerdict::Shortfall => "SHORTFALL",
        HealthVerdict::NoVerdict => "no verdict",
    };
    println!("verdict           {verdict}");
    println!("                  {}", health_explanation(health));
    println!("database          {} ({})", store.target(), store.engine());
    println!(
        "capture since     {}",
        capture_since_label(&health.activation)
    );
    println!(
        "backfill through  {}",
        backfill_through_label(&health.activation)
    );
    match &health.figures {
        None => println!("figures           none: there is no capture_since to scope them"),
        Some(f) => {
            println!(
                "shortfall         {}  (subagent messages with no row: alarms)",
                f.shortfall
            );
            println!(
                "excess            {}  (rows with no message: attributed, never alarms)",
                f.excess
            );
            println!(
                "last write        {}",
                f.last_observed_at
                    .map(|t| t.canonical())
                    .unwrap_or_else(|| "nothing written since activation".to_owned())
            );
        }
    }
}
