//! `fanout migrate`: open the store (schema, migrations, backfill) and say what happened.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use fanout_store::StepStatus;

use crate::output::{DbArgs, Format, backfill_through_label, capture_since_label};

#[derive(Debug, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

pub async fn run(args: MigrateArgs) -> Result<ExitCode> {
    let store = args.db.open().await?;
    let report = store.migration_report().clone();
    let counts = store.counts().await.context("counting rows")?;
    let activation = store
        .activation()
        .await
        .context("reading activation keys")?;
    let failed = report
        .steps
        .iter()
        .any(|s| matches!(s.status, StepStatus::Failed { .. }));
    match args.format {
        Format::Json => {
            let value = serde_json::json!({
                "database": store.target(),
                "engine": store.engine(),
                "schema_version": report.schema_version,
                "steps": report.steps,
                "activation": activation,
                "counts": counts,
            });
            println!("{}", serde_json::to_string_pretty(&value)?);
        }
        Format::Text => {
            println!("database        {} ({})", store.target(), store.engine());
            println!("schema version  {}", report.schema_version);
            for step in &report.steps {
                let what = match &step.status {
                    StepStatus::Applied { rows } if step.name.ends_with(".backfill") => {
                        format!("applied, {rows} row(s) backfilled")
                    }
                    StepStatus::Applied { .. } => "applied".to_owned(),
                    StepStatus::AlreadyApplied => "already applied".to_owned(),
                    StepStatus::Failed { error } => {
                        format!("FAILED (will retry next start): {error}")
                    }
                };
                println!("step            {}: {what}", step.name);
            }
            println!("capture since   {}", capture_since_label(&activation));
            println!("backfill through {}", backfill_through_label(&activation));
            println!(
                "rows            {} session(s), {} turn(s), {} message(s), {} subagent(s) ({} live, {} backfill)",
                counts.sessions,
                counts.turns,
                counts.messages,
                counts.subagents,
                counts.subagents_live,
                counts.subagents_backfill
            );
        }
    }
    store.close().await;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
