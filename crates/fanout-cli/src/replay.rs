//! `fanout replay serve`: a scenario's recorded model responses over HTTP.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use fanout_harness::server::{self, DEFAULT_LISTEN};
use fanout_replay::{ReplayBinding, SESSION_ID_HEADER, ScenarioScripts};
use tokio::io::AsyncWriteExt;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(subcommand)]
    command: ReplayCommand,
}

#[derive(Debug, Subcommand)]
enum ReplayCommand {
    /// Serve a scenario's recorded responses as Anthropic Messages and OpenAI
    /// chat-completions streams, per calling session (x-fanout-session-id).
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Scenario directory (session.jsonl, session.1.jsonl, …) or a sessions root.
    #[arg(long)]
    scenario: PathBuf,
    /// Address to listen on (loopback by default; port 0 picks a free one).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: String,
}

pub async fn run(args: ReplayArgs) -> Result<std::process::ExitCode> {
    match args.command {
        ReplayCommand::Serve(args) => serve(args).await,
    }
}

async fn serve(args: ServeArgs) -> Result<std::process::ExitCode> {
    let scripts = ScenarioScripts::load(&args.scenario)?;
    let count = scripts.len();
    let binding = Arc::new(ReplayBinding::new(scripts));
    let listener = server::bind(&args.listen).await?;
    let addr = listener
        .local_addr()
        .with_context(|| format!("cannot read the address bound for {}", args.listen))?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "the replay server listens beyond loopback");
    }
    // The first line is machine-readable on purpose: tests and scripts read the
    // URL from it when listening on port 0.
    let banner = format!(
        "fanout replay: serving {count} recorded session(s) from {} at http://{addr}\n\
         \x20 anthropic: fanout agent --provider anthropic --base-url http://{addr}\n\
         \x20 openai:    fanout agent --provider openai --base-url http://{addr}/v1\n\
         \x20 sessions are told apart by the {SESSION_ID_HEADER} header; Ctrl-C stops\n",
        args.scenario.display()
    );
    let mut stdout = tokio::io::stdout();
    stdout.write_all(banner.as_bytes()).await?;
    stdout.flush().await?;
    server::serve(listener, binding, crate::shutdown_signal()).await?;
    Ok(std::process::ExitCode::SUCCESS)
}
