//! `fanout export otlp --endpoint URL [--db URL] [--since TS] [--task ID] [--header K=V]…
//! [--format text|json]`: every turn's invocation tree as OTLP spans (DESIGN 12), through
//! `fanout-otel`. Progress on stderr, the summary on stdout; the store is only read.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use fanout_otel::{ExportProgress, ExportSummary, Receiver, ReceiverConfig, RetryPolicy};
use fanout_store::{ExportScope, Timestamp};

use crate::look::PriceArgs;
use crate::output::{DbArgs, Format};
use crate::report::parse_instant;

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(subcommand)]
    pub target: ExportTarget,
}

#[derive(Debug, Subcommand)]
pub enum ExportTarget {
    /// Send every turn as a trace of `invoke_agent` spans (OTLP over HTTP, protobuf):
    /// the turn as root, each invocation a child under its parent's span.
    Otlp(OtlpArgs),
}

#[derive(Debug, Args)]
pub struct OtlpArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub prices: PriceArgs,
    #[command(flatten)]
    pub receiver: OtlpReceiverArgs,
    /// Only turns started at or after this instant (RFC 3339 or YYYY-MM-DD).
    #[arg(long, value_name = "TS", value_parser = parse_instant)]
    pub since: Option<Timestamp>,
    /// Only this task's turns.
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,
    /// Spans per request.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub batch_size: usize,
    /// How long a batch the receiver does not take is tried again before the export
    /// stops, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub retry_for_secs: u64,
    /// Output format of the summary on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// The receiver's flags, shared with `fanout proxy --otlp-endpoint`.
#[derive(Debug, Clone, Args)]
pub struct OtlpReceiverArgs {
    /// The OTLP/HTTP traces URL, used as given (Phoenix: http://127.0.0.1:6006/v1/traces).
    #[arg(long, value_name = "URL")]
    pub endpoint: String,
    /// A request header, e.g. `authorization=Bearer …` (repeatable).
    #[arg(long = "header", value_name = "K=V", value_parser = parse_header)]
    pub headers: Vec<(String, String)>,
    /// How long one request may take, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub timeout_secs: u64,
}

impl OtlpReceiverArgs {
    pub fn config(&self) -> ReceiverConfig {
        ReceiverConfig {
            endpoint: self.endpoint.clone(),
            headers: self.headers.clone(),
            timeout: Duration::from_secs(self.timeout_secs.max(1)),
        }
    }
}

pub(crate) fn parse_header(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_owned(), value.trim().to_owned()))
        }
        _ => Err(format!("not a header: {text:?} (expected KEY=VALUE)")),
    }
}

pub async fn run(args: ExportArgs) -> Result<ExitCode> {
    match args.target {
        ExportTarget::Otlp(args) => otlp(args).await,
    }
}

async fn otlp(args: OtlpArgs) -> Result<ExitCode> {
    let prices = args.prices.load()?;
    let receiver = Receiver::new(&args.receiver.config())?;
    let store = args.db.open_existing().await?;
    let scope = ExportScope {
        task_id: args.task.clone(),
        since: args.since,
        pending_for: None,
    };
    let retry = RetryPolicy {
        give_up_after: Duration::from_secs(args.retry_for_secs),
        ..RetryPolicy::default()
    };
    let mut progress = Progress::new();
    let result = fanout_otel::export_once(
        &store,
        &scope,
        &prices,
        &receiver,
        args.batch_size,
        &retry,
        &mut |event| progress.show(&event),
    )
    .await;
    store.close().await;
    progress.finish();
    let (summary, error) = match result {
        Ok(summary) => (summary, None),
        Err(failed) => (failed.summary, Some(failed.error)),
    };
    match args.format {
        Format::Json => {
            let mut doc = serde_json::to_value(&summary)?;
            doc["error"] = serde_json::json!(error.as_ref().map(ToString::to_string));
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        Format::Text => println!("{}", summary_line(&summary)),
    }
    if let Some(error) = error {
        bail!("export stopped: {error}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The one line people read at the end.
fn summary_line(s: &ExportSummary) -> String {
    format!(
        "sent {} span(s) of {} turn(s) ({} trace(s), {} session(s), {} unsettled) to {}; {} failed attempt(s)",
        s.spans_sent,
        s.turns,
        s.traces,
        s.sessions,
        s.unsettled_spans,
        s.receiver,
        s.failed_attempts
    )
}

/// Progress on stderr: a line per request and per retry (a terminal gets them on one
/// line, rewritten).
struct Progress {
    sessions: usize,
    terminal: bool,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            sessions: 0,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    fn show(&mut self, event: &ExportProgress<'_>) {
        let line = match event {
            ExportProgress::Planned { sessions } => {
                self.sessions = *sessions;
                format!("exporting {sessions} session(s)")
            }
            ExportProgress::Sent(s) => format!(
                "sent {} span(s), {} of {} session(s) read",
                s.spans_sent, s.sessions, self.sessions
            ),
            ExportProgress::Retrying { error, pause } => format!(
                "the receiver did not take the spans ({error}); trying again in {:.1} s",
                pause.as_secs_f64()
            ),
        };
        if self.terminal {
            eprint!("\r\x1b[2Kfanout export: {line}");
        } else {
            eprintln!("fanout export: {line}");
        }
    }

    fn finish(&self) {
        if self.terminal {
            eprintln!();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_key_value() {
        assert_eq!(
            parse_header("authorization=Bearer a=b").unwrap(),
            ("authorization".to_owned(), "Bearer a=b".to_owned())
        );
        assert!(parse_header("no-equals").is_err());
        assert!(parse_header("=v").is_err());
    }
}
