//! The `fanout` binary. It owns argument parsing, wiring and presentation; every
//! capability lives in a library crate, and nothing here knows SQL or the ACP wire.

mod demo;
mod export;
mod gen_history;
mod health;
mod import;
mod look;
mod migrate;
mod output;
mod proxy;
mod replay;
mod report;
mod serve;
mod sessions;
mod show;
mod snapshot;
mod web;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Make nested coding agents observable and testable.
#[derive(Debug, Parser)]
#[command(name = "fanout", version, about, long_about = None)]
struct Cli {
    /// Log filter (tracing `EnvFilter` syntax); `FANOUT_LOG` also works.
    #[arg(long, global = true, env = "FANOUT_LOG", default_value = "warn")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Open the store, create the schema, run migrations and the backfill, and say what happened.
    Migrate(migrate::MigrateArgs),
    /// The fan-out report: turns by subagents spawned, types, models, metrics, nesting, provenance.
    Report(report::ReportArgs),
    /// Writer health from the database alone; exit 0 healthy, 1 shortfall, 2 no verdict, 3 error.
    Health(health::HealthArgs),
    /// Run the reference nested ACP agent over stdio.
    Agent(fanout_agent::AgentArgs),
    /// Replay recorded sessions over HTTP (Anthropic and OpenAI streaming), keyless.
    Replay(replay::ReplayArgs),
    /// Snapshot-test nested agents: run, refresh or record scenario directories.
    Snapshot(snapshot::SnapshotArgs),
    /// The whole loop offline: the reference agent replays a bundled nested scenario
    /// behind `fanout proxy` into the store, then the fan-out report is printed.
    Demo(demo::DemoArgs),
    /// Run an ACP agent behind the capture proxy: forwards every byte, records every subagent.
    Proxy(proxy::ProxyArgs),
    /// Read-only web UI (sessions, trees, timelines, report; live) and /metrics, on loopback.
    Serve(serve::ServeArgs),
    /// List sessions, newest first: harness, task, turns, subagents, tokens, cost, source.
    Sessions(sessions::SessionsArgs),
    /// One session as a tree of turns and subagent invocations, with usage, cost and a timeline.
    Show(show::ShowArgs),
    /// Send every turn's invocation tree to an OpenTelemetry receiver (`export otlp`).
    Export(export::ExportArgs),
    /// Import recorded history: fanout transcripts and Claude Code session folders (idempotent).
    Import(import::ImportArgs),
    /// Write a synthetic Claude Code history (the import bench's input).
    #[command(hide = true)]
    GenClaudeHistory(gen_history::GenHistoryArgs),
}

fn main() -> std::process::ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // --help and --version exit 0.
            let _ = err.print();
            return if err.use_stderr() {
                std::process::ExitCode::from(output::EXIT_USAGE)
            } else {
                std::process::ExitCode::SUCCESS
            };
        }
    };
    init_tracing(&cli.log);
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if matches!(cli.command, Command::Proxy(_)) {
        // The runtime's threads do capture and the store; the agent, the pumps and
        // the recorder start from the main thread (block_on), which keeps its
        // priority.
        builder.on_thread_start(fanout_proxy::lower_telemetry_thread);
    }
    let runtime = match builder.build() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("fanout: cannot start the async runtime: {err}");
            return std::process::ExitCode::from(70);
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("fanout: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> Result<std::process::ExitCode> {
    match command {
        Command::Migrate(args) => migrate::run(args).await,
        Command::Report(args) => report::run(args).await,
        Command::Health(args) => health::run(args).await,
        Command::Agent(args) => {
            fanout_agent::run_stdio(args).await?;
            Ok(std::process::ExitCode::SUCCESS)
        }
        Command::Replay(args) => replay::run(args).await,
        Command::Snapshot(args) => snapshot::run(args).await,
        Command::Demo(args) => demo::run(args).await,
        Command::Proxy(args) => proxy::run(args).await,
        Command::Serve(args) => serve::run(args).await,
        Command::Import(args) => import::run(args).await,
        Command::GenClaudeHistory(args) => {
            gen_history::run(&args).map(|()| std::process::ExitCode::SUCCESS)
        }
        Command::Sessions(args) => sessions::run(args).await,
        Command::Show(args) => show::run(args).await,
        Command::Export(args) => export::run(args).await,
    }
}

fn init_tracing(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Ctrl-C, or SIGTERM on Unix: what ends the long-running servers (`serve`, `replay
/// serve`); never resolves if the handlers cannot be installed.
pub(crate) async fn shutdown_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = interrupt => {}
            () = terminate => {}
        }
    }
    #[cfg(not(unix))]
    interrupt.await;
}
