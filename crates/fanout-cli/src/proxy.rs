//! `fanout proxy [--db URL] [--task ID] [--transcript-dir DIR] -- <agent command…>`:
//! run an ACP agent behind the capture proxy. stdout carries only the agent's bytes;
//! everything fanout has to say goes to stderr.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use fanout_metrics::{Registry, default_stats_dir};
use fanout_proxy::{ClientStreams, ProxyConfig, ProxyOutcome, ProxyTuning};

use crate::output::DbArgs;

#[derive(Debug, Args)]
pub struct ProxyArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Task id of every row (default: the cwd the client sends in session/new).
    #[arg(long, env = "FANOUT_TASK", value_name = "ID")]
    pub task: Option<String>,
    /// Directory for this run's transcript [default: $XDG_DATA_HOME/fanout/transcripts].
    #[arg(long, visible_alias = "transcript", value_name = "DIR")]
    pub transcript_dir: Option<PathBuf>,
    /// Write no transcript.
    #[arg(long, conflicts_with = "transcript_dir")]
    pub no_transcript: bool,
    /// Also serve /metrics, /debug/vars and /healthz with this run's live counters
    /// (e.g. 127.0.0.1:9478; port 0 picks a free one, printed on stderr).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Directory of the stats files `fanout serve` reads [default: $XDG_DATA_HOME/fanout/stats].
    #[arg(long, value_name = "DIR")]
    pub stats_dir: Option<PathBuf>,
    /// How often a store that cannot be opened is tried again, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub store_retry_ms: u64,
    /// After the client closes its input, seconds the agent may run on before its
    /// process group is terminated (0: wait as long as it runs).
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub eof_grace_secs: u64,
    /// At exit, seconds capture may take to write what the store does not have yet
    /// (it may be coming back); the rest stays in the transcript, and the next proxy or
    /// import on the same store writes it.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub drain_timeout_secs: u64,
    /// Also send each span of what is captured to this OTLP/HTTP traces URL once it is
    /// ready (DESIGN 12; what the receiver took is remembered in the store, so a
    /// restart sends nothing twice). A receiver that is down or slow never slows
    /// forwarding or capture.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// A request header for --otlp-endpoint, e.g. `authorization=Bearer …` (repeatable).
    #[arg(long = "otlp-header", value_name = "K=V", value_parser = crate::export::parse_header, requires = "otlp_endpoint")]
    pub otlp_headers: Vec<(String, String)>,
    /// The agent command and its arguments, after `--`.
    #[arg(required = true, trailing_var_arg = true, value_name = "AGENT COMMAND")]
    pub agent: Vec<String>,
}

pub async fn run(args: ProxyArgs) -> Result<ExitCode> {
    let code = match proxy(args).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("fanout proxy: {error:#}");
            1
        }
    };
    // The client-side pump may sit in a read of a stdin that never closes; a runtime
    // shutdown would wait for it, so the process ends here, with the agent's status.
    std::process::exit(i32::from(code))
}

async fn proxy(args: ProxyArgs) -> Result<u8> {
    let registry = Registry::new();
    if registry.install_global().is_err() {
        tracing::debug!("a metrics recorder was already installed; live counters stay empty");
    }
    let data_dir = fanout_types::default_data_dir();
    let transcript_dir = (!args.no_transcript).then(|| {
        args.transcript_dir
            .unwrap_or_else(|| data_dir.join("transcripts"))
    });
    let metrics_listener = match args.metrics_listen {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} for --metrics-listen"))?;
            let bound = listener
                .local_addr()
                .context("reading the metrics address")?;
            eprintln!("fanout proxy: metrics at http://{bound}/metrics");
            Some(listener)
        }
        None => None,
    };
    let database_url = args.db.url();
    let config = ProxyConfig {
        agent_command: args.agent,
        database_url: database_url.clone(),
        task_id: args.task,
        transcript_dir,
        stats_dir: Some(args.stats_dir.unwrap_or_else(default_stats_dir)),
        registry: Some(registry),
        metrics_listener,
        tuning: ProxyTuning {
            store_retry: Duration::from_millis(args.store_retry_ms.max(1)),
            eof_grace: (args.eof_grace_secs > 0).then(|| Duration::from_secs(args.eof_grace_secs)),
            drain_timeout: Duration::from_secs(args.drain_timeout_secs),
            ..ProxyTuning::default()
        },
    };
    let exporter = match &args.otlp_endpoint {
        Some(endpoint) => Some(otlp_exporter(endpoint, &args.otlp_headers, &database_url)?),
        None => None,
    };
    let client = ClientStreams::stdio()?;
    let result = fanout_proxy::run(config, client).await;
    if let Some(exporter) = exporter {
        let counters = exporter
            .stop(Duration::from_secs(args.drain_timeout_secs))
            .await;
        if counters.waiting > 0 || counters.dropped > 0 {
            eprintln!(
                "fanout proxy: OTLP export: {} span(s) sent, {} waiting (the next run with --otlp-endpoint sends them), {} refused by the receiver",
                counters.sent, counters.waiting, counters.dropped
            );
        }
    }
    match result {
        Ok(outcome) => {
            say_what_was_lost(&outcome, &database_url);
            Ok(outcome.exit.exit_code())
        }
        Err(error) => {
            eprintln!("fanout proxy: {error}");
            Ok(error.exit_code())
        }
    }
}

/// The continuous export, on its own store connection (capture never waits for it).
fn otlp_exporter(
    endpoint: &str,
    headers: &[(String, String)],
    database_url: &str,
) -> Result<fanout_otel::ContinuousExporter> {
    let receiver = fanout_otel::ReceiverConfig {
        headers: headers.to_vec(),
        ..fanout_otel::ReceiverConfig::new(endpoint)
    };
    let prices = fanout_store::PriceTable::load(None).context("loading the price table")?;
    let config = fanout_otel::ContinuousConfig::new(database_url.to_owned(), receiver, prices);
    Ok(fanout_otel::ContinuousExporter::spawn(config)?)
}

/// Tells the user, on stderr, about anything that did not reach the store and where
/// it is; says nothing when everything did.
fn say_what_was_lost(outcome: &ProxyOutcome, database_url: &str) {
    for note in what_was_lost(outcome, database_url) {
        eprintln!("fanout proxy: {note}");
    }
}

/// The notes [`say_what_was_lost`] prints, one per line.
fn what_was_lost(outcome: &ProxyOutcome, database_url: &str) -> Vec<String> {
    let mut notes = Vec::new();
    let store = fanout_store::redact_url(database_url);
    if outcome.frames_caught_up > 0 {
        notes.push(format!(
            "wrote {} line(s) of earlier runs' transcripts that were not yet in {store}",
            outcome.frames_caught_up
        ));
    }
    if outcome.frames_dropped > 0 {
        notes.push(format!(
            "{} line(s) were dropped because a queue was full (forwarding was not affected); they are in neither the store nor the transcript",
            outcome.frames_dropped
        ));
    }
    if outcome.transcript_errors > 0 {
        notes.push(format!(
            "the transcript is incomplete ({} write(s) to it failed)",
            outcome.transcript_errors
        ));
    }
    let refused = outcome.counters.failed + outcome.capture.store_errors;
    if refused > 0 {
        notes.push(format!(
            "{refused} write(s) were refused by the store {store} (see the warnings above)"
        ));
    }
    if !outcome.store_connected && outcome.frames_unprocessed == 0 {
        notes.push(format!(
            "the store {store} was not available; nothing this run saw needed writing to it"
        ));
    }
    if outcome.frames_unprocessed > 0 {
        let why = if outcome.store_connected {
            "capture did not finish in time"
        } else {
            "the store was not available"
        };
        notes.push(match &outcome.transcript {
            Some(path) => format!(
                "{} line(s) are not in the store {store} yet ({why}). They are in the transcript {}, and the next `fanout proxy` or `fanout import` on this store writes them (to do it now: `fanout import --db {store} {}`)",
                outcome.frames_unprocessed,
                path.display(),
                path.display()
            ),
            None => format!(
                "{} line(s) did not reach the store {store} ({why}) and there is no transcript: they were not recorded",
                outcome.frames_unprocessed
            ),
        });
    }
    notes
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use fanout_proxy::{AgentExit, ProxyOutcome};

    use super::what_was_lost;

    const DB: &str = "sqlite:///tmp/fanout.db";

    fn outcome(store_connected: bool, unprocessed: u64, transcript: bool) -> ProxyOutcome {
        ProxyOutcome {
            exit: AgentExit::Code(0),
            execution_id: "exec-1".to_owned(),
            transcript: transcript.then(|| PathBuf::from("/tmp/t.transcript")),
            frames_dropped: 0,
            frames_unprocessed: unprocessed,
            complete: unprocessed == 0,
            store_connected,
            store_errors: 0,
            transcript_errors: 0,
            frames_caught_up: 0,
            counters: Default::default(),
            capture: Default::default(),
        }
    }

    #[test]
    fn lines_not_yet_in_the_store_are_said_to_be_written_by_the_next_run() {
        let down = what_was_lost(&outcome(false, 12, true), DB);
        assert_eq!(down.len(), 1, "{down:?}");
        assert!(
            down[0].starts_with("12 line(s) are not in the store"),
            "{down:?}"
        );
        assert!(down[0].contains("the store was not available"), "{down:?}");
        assert!(
            down[0]
                .contains("the next `fanout proxy` or `fanout import` on this store writes them"),
            "{down:?}"
        );
        assert!(
            down[0].contains("`fanout import --db sqlite:///tmp/fanout.db /tmp/t.transcript`"),
            "{down:?}"
        );
        let lost = what_was_lost(&outcome(true, 3, false), DB);
        assert!(
            lost[0].contains("there is no transcript: they were not recorded"),
            "{lost:?}"
        );
        assert!(what_was_lost(&outcome(true, 0, true), DB).is_empty());
    }

    #[test]
    fn failed_transcript_writes_and_refused_writes_are_said() {
        let mut broken = outcome(true, 0, true);
        broken.transcript_errors = 2;
        broken.capture.store_errors = 1;
        broken.frames_caught_up = 7;
        let notes = what_was_lost(&broken, DB);
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(
            notes[0].contains("wrote 7 line(s) of earlier runs' transcripts"),
            "{notes:?}"
        );
        assert!(
            notes[1].contains("the transcript is incomplete (2 write(s) to it failed)"),
            "{notes:?}"
        );
        assert!(notes[2].contains("1 write(s) were refused"), "{notes:?}");
    }
}
