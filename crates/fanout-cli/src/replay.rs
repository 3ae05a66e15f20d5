//! `fanout replay record|serve`: record an agent's model traffic into a
//! cassette, and serve a cassette's (or a scenario's) recorded responses.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use fanout_harness::cassette::Cassette;
use fanout_harness::cassette::record::{self, RecordOptions, Recorder};
use fanout_harness::cassette::serve::{self as cassette_serve, CassetteServer};
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
    /// Record an agent's model requests into a cassette: a forwarding proxy
    /// (point the agent's base URL at it) for Anthropic Messages, OpenAI chat
    /// completions and Responses. Ctrl-C or SIGTERM finishes the files.
    Record(RecordArgs),
    /// Serve recorded responses keyless: a cassette's (each live conversation
    /// bound to its own recorded one) or a scenario's session logs (per
    /// x-fanout-session-id). With --cassette, exits 1 if any request missed.
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
struct RecordArgs {
    /// The model API to forward to (e.g. `https://api.anthropic.com`).
    #[arg(long)]
    upstream: String,
    /// The cassette directory to write.
    #[arg(long)]
    out: PathBuf,
    /// Address to listen on (loopback by default; port 0 picks a free one).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: String,
    /// Replace a cassette already in --out.
    #[arg(long)]
    force: bool,
    /// A run-specific value (NAME=VALUE, e.g. workspace=/path) that the
    /// volatile-value rules remove from content roots; repeatable.
    #[arg(long = "declare", value_name = "NAME=VALUE")]
    declare: Vec<String>,
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Scenario directory (session.jsonl, session.1.jsonl, …) or a sessions root.
    #[arg(
        long,
        conflicts_with = "cassette",
        required_unless_present = "cassette"
    )]
    scenario: Option<PathBuf>,
    /// Cassette directory (written by `fanout replay record`).
    #[arg(long)]
    cassette: Option<PathBuf>,
    /// Address to listen on (loopback by default; port 0 picks a free one).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: String,
    /// This run's value of a value the recording declared (NAME=VALUE): it
    /// replaces the recorded one in replayed responses; repeatable.
    #[arg(long = "declare", value_name = "NAME=VALUE", requires = "cassette")]
    declare: Vec<String>,
}

pub async fn run(args: ReplayArgs) -> Result<ExitCode> {
    match args.command {
        ReplayCommand::Record(args) => record(args).await,
        ReplayCommand::Serve(args) => match (&args.scenario, &args.cassette) {
            (_, Some(cassette)) => serve_cassette(cassette.clone(), &args).await,
            (Some(scenario), None) => serve_scenario(scenario.clone(), &args.listen).await,
            (None, None) => bail!("give --scenario DIR or --cassette DIR"),
        },
    }
}

fn declared(pairs: &[String]) -> Result<BTreeMap<String, String>> {
    let mut declared = BTreeMap::new();
    for pair in pairs {
        let Some((name, value)) = pair.split_once('=') else {
            bail!("--declare {pair:?}: expected NAME=VALUE");
        };
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            bail!("--declare {pair:?}: NAME must be letters, digits, '-' or '_'");
        }
        declared.insert(name.to_string(), value.to_string());
    }
    Ok(declared)
}

async fn bind(listen: &str) -> Result<(tokio::net::TcpListener, std::net::SocketAddr)> {
    let listener = server::bind(listen).await?;
    let addr = listener
        .local_addr()
        .with_context(|| format!("cannot read the address bound for {listen}"))?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "listening beyond loopback");
    }
    Ok((listener, addr))
}

/// Prints the banner; its first line is machine-readable on purpose: tests
/// and scripts read the URL from it when listening on port 0.
async fn banner(text: String) -> Result<()> {
    let mut stdout = tokio::io::stdout();
    stdout.write_all(text.as_bytes()).await?;
    stdout.flush().await?;
    Ok(())
}

async fn record(args: RecordArgs) -> Result<ExitCode> {
    let recorder = Recorder::new(RecordOptions {
        upstream: args.upstream.clone(),
        out: args.out.clone(),
        force: args.force,
        declared: declared(&args.declare)?,
    })?;
    let (listener, addr) = bind(&args.listen).await?;
    banner(format!(
        "fanout replay: recording to {} at http://{addr} (upstream {})\n\
         \x20 point the agent's base URL here (ANTHROPIC_BASE_URL, an OpenAI base URL + /v1, …);\n\
         \x20 keys pass through and are never written; Ctrl-C finishes the cassette\n",
        args.out.display(),
        args.upstream
    ))
    .await?;
    record::serve(listener, recorder.clone(), crate::shutdown_signal()).await?;
    println!(
        "fanout replay: recorded {} exchange(s) to {}",
        recorder.recorded(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

async fn serve_cassette(dir: PathBuf, args: &ServeArgs) -> Result<ExitCode> {
    let cassette = Cassette::load(&dir)?;
    let conversations = cassette.index.conversations.len();
    let server = CassetteServer::new(cassette, &declared(&args.declare)?)?;
    let (listener, addr) = bind(&args.listen).await?;
    banner(format!(
        "fanout replay: serving {conversations} recorded conversation(s) from {} at http://{addr}\n\
         \x20 each live conversation is bound to its own recorded one; a miss is HTTP 599; Ctrl-C stops\n",
        dir.display()
    ))
    .await?;
    cassette_serve::serve(listener, server.clone(), crate::shutdown_signal()).await?;
    Ok(report(&server))
}

/// What was served and missed; exit 1 when anything missed.
fn report(server: &Arc<CassetteServer>) -> ExitCode {
    let binding = server.binding();
    let scripts = binding.scripts();
    let progress = binding.progress();
    for (at, (conversation, served)) in scripts.conversations().iter().zip(&progress).enumerate() {
        println!(
            "  {}: {}/{} exchange(s) served ({})",
            conversation.name,
            served,
            conversation.steps.len(),
            scripts.recorded_rung(at)
        );
    }
    let misses = binding.misses();
    for miss in &misses {
        eprintln!("fanout replay: MISS {miss}");
    }
    if misses.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("fanout replay: {} request(s) missed", misses.len());
        ExitCode::FAILURE
    }
}

async fn serve_scenario(scenario: PathBuf, listen: &str) -> Result<ExitCode> {
    let scripts = ScenarioScripts::load(&scenario)?;
    let count = scripts.len();
    let binding = Arc::new(ReplayBinding::new(scripts));
    let (listener, addr) = bind(listen).await?;
    banner(format!(
        "fanout replay: serving {count} recorded session(s) from {} at http://{addr}\n\
         \x20 anthropic: fanout agent --provider anthropic --base-url http://{addr}\n\
         \x20 openai:    fanout agent --provider openai --base-url http://{addr}/v1\n\
         \x20 sessions are told apart by the {SESSION_ID_HEADER} header; Ctrl-C stops\n",
        scenario.display()
    ))
    .await?;
    server::serve(listener, binding, crate::shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}
