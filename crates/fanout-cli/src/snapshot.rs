//! `fanout snapshot run|refresh|record`: the snapshot harness over scenario
//! directories; presentation of matches and unified diffs.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use fanout_agent::{AgentArgs, ProviderRegistry};
use fanout_harness::Scenario;
use fanout_harness::snapshot::{self, CassetteRecording, FileCheck, RecordProvider, RunMode};

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    command: SnapshotCommand,
}

#[derive(Debug, Subcommand)]
enum SnapshotCommand {
    /// Replay each scenario and diff its normalised transcript and session logs
    /// against the expected files; exit 1 on any difference.
    Run {
        /// Scenario directories (each with scenario.toml).
        #[arg(required = true)]
        scenarios: Vec<PathBuf>,
    },
    /// Replay each scenario and rewrite its expected files from the run.
    Refresh {
        /// Scenario directories (each with scenario.toml).
        #[arg(required = true)]
        scenarios: Vec<PathBuf>,
    },
    /// Run each scenario against a live provider and write its expected files
    /// (a third-party agent's scenario: through `replay record` against
    /// --upstream, writing its cassette).
    Record(RecordArgs),
}

#[derive(Debug, Args)]
struct RecordArgs {
    /// Scenario directories (each with scenario.toml).
    #[arg(required = true)]
    scenarios: Vec<PathBuf>,
    /// Provider to record against: anthropic or openai (need their API key), or
    /// scripted (deterministic, with --script).
    #[arg(long, default_value = "anthropic")]
    provider: String,
    /// Model name (default: the scenario's `model`, else the provider's default).
    #[arg(long)]
    model: Option<String>,
    /// Script file for --provider scripted.
    #[arg(long)]
    script: Option<PathBuf>,
    /// Provider base URL.
    #[arg(long)]
    base_url: Option<String>,
    /// For scenarios that replay a cassette: the model API to record from
    /// (through the recording proxy).
    #[arg(long, conflicts_with_all = ["script", "base_url"])]
    upstream: Option<String>,
    /// Replace a cassette that is already recorded.
    #[arg(long, requires = "upstream")]
    force: bool,
}

pub async fn run(args: SnapshotArgs) -> Result<std::process::ExitCode> {
    let fanout = std::env::current_exe().context("cannot locate the fanout executable")?;
    match args.command {
        SnapshotCommand::Run { scenarios } => {
            let mut failed = 0;
            for dir in &scenarios {
                if !check(&fanout, dir).await? {
                    failed += 1;
                }
            }
            if scenarios.len() > 1 {
                println!(
                    "{} of {} scenario(s) match",
                    scenarios.len() - failed,
                    scenarios.len()
                );
            }
            Ok(if failed == 0 {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::FAILURE
            })
        }
        SnapshotCommand::Refresh { scenarios } => {
            for dir in &scenarios {
                write(&fanout, dir, &RunMode::Replay, "refreshed").await?;
            }
            Ok(std::process::ExitCode::SUCCESS)
        }
        SnapshotCommand::Record(args) if args.upstream.is_some() => {
            let recording = CassetteRecording {
                upstream: args.upstream.clone().unwrap_or_default(),
                force: args.force,
            };
            for dir in &args.scenarios {
                write(
                    &fanout,
                    dir,
                    &RunMode::RecordCassette(recording.clone()),
                    "recorded",
                )
                .await?;
            }
            Ok(std::process::ExitCode::SUCCESS)
        }
        SnapshotCommand::Record(args) => {
            let provider = RecordProvider {
                provider: args.provider,
                model: args.model,
                script: args.script.map(absolute).transpose()?,
                base_url: args.base_url,
            };
            // Before anything runs: an unusable provider (no key and no custom
            // base URL, no script…) is one clear error, not a half-written scenario.
            check_provider(&provider)?;
            for dir in &args.scenarios {
                write(&fanout, dir, &RunMode::Record(provider.clone()), "recorded").await?;
            }
            Ok(std::process::ExitCode::SUCCESS)
        }
    }
}

/// Whether `fanout agent` can start this provider: the agent's own rule (its
/// provider registry), so the check never disagrees with the agent it runs.
fn check_provider(provider: &RecordProvider) -> Result<()> {
    let args = AgentArgs {
        provider: provider.provider.clone(),
        base_url: provider.base_url.clone(),
        script: provider.script.clone(),
        ..AgentArgs::default()
    };
    ProviderRegistry::builtin().build(&args).map(drop).context(
        "`snapshot record` cannot use this provider (for a keyless, deterministic \
         recording use --provider scripted --script FILE)",
    )
}

fn absolute(path: PathBuf) -> Result<PathBuf> {
    std::fs::canonicalize(&path).with_context(|| format!("{}", path.display()))
}

/// Runs and compares one scenario; prints what matched and every diff.
async fn check(fanout: &Path, dir: &Path) -> Result<bool> {
    let scenario = Scenario::load(dir)?;
    let run = snapshot::run(&scenario, fanout, &RunMode::Replay)
        .await
        .with_context(|| format!("snapshot {}", dir.display()))?;
    let checks = snapshot::compare(dir, &run)?;
    for miss in &run.misses {
        println!("MISS    {}: {miss}", dir.display());
    }
    let differing = checks.iter().filter(|c| !c.is_same()).count() + run.misses.len();
    for check in &checks {
        match check {
            FileCheck::Same { name } => println!("ok      {}", dir.join(name).display()),
            FileCheck::Differs { name, diff } => {
                println!("DIFFERS {}", dir.join(name).display());
                print!("{diff}");
            }
            FileCheck::MissingExpected { name, diff } => {
                println!(
                    "EXTRA   {}: the run produced it, but there is no expected file",
                    dir.join(name).display()
                );
                print!("{diff}");
            }
            FileCheck::NotProduced { name } => println!(
                "MISSING {}: expected, but the run did not produce it",
                dir.join(name).display()
            ),
        }
    }
    if differing == 0 {
        println!("{}: {} file(s) match", dir.display(), checks.len());
    } else if run.misses.is_empty() {
        println!(
            "{}: {differing} of {} file(s) differ (`fanout snapshot refresh {}` accepts the run)",
            dir.display(),
            checks.len(),
            dir.display()
        );
    } else {
        println!(
            "{}: {} request(s) found no recorded answer, {} of {} file(s) differ",
            dir.display(),
            run.misses.len(),
            differing - run.misses.len(),
            checks.len()
        );
    }
    Ok(differing == 0)
}

async fn write(fanout: &Path, dir: &Path, mode: &RunMode, verb: &str) -> Result<()> {
    let scenario = Scenario::load(dir)?;
    let run = snapshot::run(&scenario, fanout, mode)
        .await
        .with_context(|| format!("snapshot {}", dir.display()))?;
    if !run.misses.is_empty() {
        anyhow::bail!(
            "snapshot {}: {} request(s) found no recorded answer, nothing written:\n{}",
            dir.display(),
            run.misses.len(),
            run.misses.join("\n")
        );
    }
    let written = snapshot::write_expected(dir, &run)?;
    println!("{}: {verb} {}", dir.display(), written.join(", "));
    Ok(())
}
