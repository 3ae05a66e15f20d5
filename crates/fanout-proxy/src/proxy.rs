//! [`run`]: one proxy run, from spawning the agent to the last transcript line.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fanout_acp::{DEFAULT_MAX_LINE_BYTES, Direction};
use fanout_capture::{Capture, CaptureConfig, CaptureStats, CounterSnapshot};
use fanout_metrics::{Registry, ServeError, StatsFile, serve_http};
use fanout_store::{Store, Timestamp};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::timeout;

use crate::agent::{
    AgentExit, SpawnedAgent, Supervision, end_group, signal_group, spawn_agent, supervise,
};
use crate::consumer::{Consumer, ConsumerReport, Control};
use crate::error::ProxyError;
use crate::metric_names;
use crate::queue::frame_queue;
use crate::store::ResilientStore;
use crate::tap::{PumpReport, Tap, TapShared, pump};
use crate::transcript::{TranscriptHeader, TranscriptWriter};

/// The environment variable the agent finds its execution id in (a nested fanout, or
/// an agent that logs it, can correlate with the rows).
pub const EXECUTION_ID_ENV: &str = "FANOUT_AGENT_EXECUTION_ID";

/// Knobs with defaults that suit an interactive agent; tests and benchmarks shrink them.
#[derive(Clone, Debug)]
pub struct ProxyTuning {
    /// Frames the tap queue (pumps to transcript) holds before it drops.
    pub queue_frames: usize,
    /// Bytes the tap queue holds before it drops.
    pub queue_bytes: usize,
    /// Frames the capture queue (transcript to store) holds before lines go to the
    /// transcript only.
    pub capture_queue_frames: usize,
    /// Bytes the capture queue holds before lines go to the transcript only.
    pub capture_queue_bytes: usize,
    /// Longest line observed (longer ones are forwarded, counted, not observed).
    pub max_line_bytes: usize,
    /// Read buffer of each pump.
    pub chunk_bytes: usize,
    /// How often a store that could not be opened is tried again.
    pub store_retry: Duration,
    /// How long the first frames wait for the store's first open attempt.
    pub store_first_wait: Duration,
    /// At most one WARN per this interval for each repeating condition.
    pub warn_interval: Duration,
    /// At exit, how long capture may take to finish the queue before the rest goes to
    /// the transcript only.
    pub drain_timeout: Duration,
    /// After the client closes its input, how long the agent may run on before its
    /// group gets SIGTERM; `None`: wait for it as long as it runs.
    pub eof_grace: Option<Duration>,
    /// Between the SIGTERM the proxy sends on its own and SIGKILL.
    pub kill_grace: Duration,
    /// How often the stats file is rewritten.
    pub stats_interval: Duration,
}

impl Default for ProxyTuning {
    fn default() -> Self {
        ProxyTuning {
            queue_frames: 16 * 1024,
            queue_bytes: 64 * 1024 * 1024,
            capture_queue_frames: 16 * 1024,
            capture_queue_bytes: 64 * 1024 * 1024,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            chunk_bytes: 64 * 1024,
            store_retry: Duration::from_secs(5),
            store_first_wait: Duration::from_secs(5),
            warn_interval: Duration::from_secs(30),
            drain_timeout: Duration::from_secs(10),
            eof_grace: Some(Duration::from_secs(30)),
            kill_grace: Duration::from_secs(3),
            stats_interval: Duration::from_secs(5),
        }
    }
}

/// What to run and where to record it.
#[derive(Debug, Default)]
pub struct ProxyConfig {
    /// The agent's argv; must not be empty.
    pub agent_command: Vec<String>,
    /// `sqlite://PATH` or `postgres://…`.
    pub database_url: String,
    /// `None`: the `cwd` of `session/new` (DESIGN 3.2).
    pub task_id: Option<String>,
    /// `None`: no transcript.
    pub transcript_dir: Option<PathBuf>,
    /// `None`: no stats file. Needs `registry`.
    pub stats_dir: Option<PathBuf>,
    /// The process's metrics registry (installed as the global recorder by the caller),
    /// read for the stats file and the HTTP endpoints.
    pub registry: Option<Registry>,
    /// Serve `/metrics`, `/debug/vars` and `/healthz` on this listener while running.
    pub metrics_listener: Option<TcpListener>,
    /// Queue sizes, intervals and grace periods.
    pub tuning: ProxyTuning,
}

/// The client's side of the conversation: what the proxy reads and writes. The
/// process's own stdin and stdout by default ([`ClientStreams::stdio`]).
pub struct ClientStreams {
    /// What the client sends (forwarded to the agent's stdin).
    pub input: Box<dyn Read + Send>,
    /// Where the agent's stdout goes.
    pub output: Box<dyn Write + Send>,
}

impl ClientStreams {
    /// Unbuffered handles on fd 0 and fd 1 (duplicates, so Rust's buffered stdout is
    /// never involved: every chunk is one write, forwarded as soon as it is read).
    pub fn stdio() -> Result<Self, ProxyError> {
        let input = std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .map_err(ProxyError::ClientStdio)?;
        let output = std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .map_err(ProxyError::ClientStdio)?;
        Ok(ClientStreams {
            input: Box::new(File::from(input)),
            output: Box::new(File::from(output)),
        })
    }
}

/// How a run ended.
#[derive(Debug)]
pub struct ProxyOutcome {
    /// How the agent exited, for the proxy's own exit status.
    pub exit: AgentExit,
    /// This run's execution id (UUID v7).
    pub execution_id: String,
    /// The transcript written, if any.
    pub transcript: Option<PathBuf>,
    /// Lines forwarded but neither captured nor in the transcript (a queue was full).
    pub frames_dropped: u64,
    /// Lines capture was too far behind to take; they are in the transcript.
    pub frames_transcript_only: u64,
    /// Lines queued at exit that the store did not get in time; they are in the transcript.
    pub frames_unprocessed: u64,
    /// Whether the store was open when the run ended.
    pub store_connected: bool,
    /// Failed store opens and calls.
    pub store_errors: u64,
    /// Transcript writes that failed (the transcript is then incomplete).
    pub transcript_errors: u64,
    /// The subagent writer's counters (AC-26).
    pub counters: CounterSnapshot,
    /// What capture recorded.
    pub capture: CaptureStats,
}

/// After the agent exits, how long its remaining output may take to arrive before the
/// rest of its group is ended.
const OUTPUT_SETTLE: Duration = Duration::from_millis(250);
/// After the group is ended, how long to wait for the output pipe to close.
const OUTPUT_CLOSE: Duration = Duration::from_secs(1);

/// Runs the agent behind the proxy until it exits; returns its exit status.
pub async fn run(config: ProxyConfig, client: ClientStreams) -> Result<ProxyOutcome, ProxyError> {
    let ProxyConfig {
        agent_command,
        database_url,
        task_id,
        transcript_dir,
        stats_dir,
        registry,
        metrics_listener,
        tuning,
    } = config;
    if agent_command.is_empty() {
        return Err(ProxyError::NoAgentCommand);
    }
    metric_names::describe_all();
    let execution_id = uuid::Uuid::now_v7().to_string();
    let started_at = Timestamp::now();
    let SpawnedAgent {
        mut child,
        process_group,
        stdin: agent_stdin,
        stdout: agent_stdout,
    } = spawn_agent(&agent_command, &[(EXECUTION_ID_ENV, execution_id.as_str())])?;

    let (sender, queue) = frame_queue(tuning.queue_frames, tuning.queue_bytes);
    let shared = Arc::new(TapShared::new(tuning.warn_interval));
    let (client_closed_tx, client_closed) = oneshot::channel();
    let (output_done_tx, mut output_done) = oneshot::channel::<()>();
    let ClientStreams { input, output } = client;
    let pumps = {
        let c2a = Tap::new(
            Direction::ClientToAgent,
            sender.clone(),
            Arc::clone(&shared),
        );
        let a2c = Tap::new(Direction::AgentToClient, sender, Arc::clone(&shared));
        let (max_line, chunk) = (tuning.max_line_bytes, tuning.chunk_bytes);
        start_pump("fanout-c2a", move || {
            // `pump` drops the agent's stdin when the client's input ends: EOF travels on.
            let report = pump(input, agent_stdin, &c2a, max_line, chunk);
            let _ = client_closed_tx.send(());
            report
        })
        .and_then(|()| {
            start_pump("fanout-a2c", move || {
                let report = pump(agent_stdout, output, &a2c, max_line, chunk);
                let _ = output_done_tx.send(());
                report
            })
        })
    };
    if let Err(error) = pumps {
        signal_group(process_group, libc::SIGKILL);
        let _ = child.wait().await;
        return Err(error);
    }

    let header = TranscriptHeader::new(
        &execution_id,
        task_id.as_deref(),
        &agent_command,
        started_at,
    );
    let transcript = transcript_dir.and_then(|dir| match TranscriptWriter::create(&dir, &header) {
        Ok(writer) => Some(writer),
        Err(error) => {
            tracing::warn!("{error}; continuing without a transcript");
            None
        }
    });
    let transcript_path = transcript.as_ref().map(|t| t.path().to_owned());

    let store = ResilientStore::new(&database_url, tuning.store_retry, tuning.warn_interval);
    let connecting = tokio::spawn(Arc::clone(&store).connect());
    let capture = Capture::new(
        Arc::clone(&store) as Arc<dyn Store>,
        CaptureConfig {
            agent_execution_id: Some(execution_id.clone()),
            task_id: task_id.clone(),
            agent_command: Some(agent_command.join(" ")),
        },
    );
    let (control, control_rx) = watch::channel(Control::Run);
    let mut consumer = tokio::spawn(
        Consumer {
            queue,
            capture,
            transcript,
            shared: Arc::clone(&shared),
            store: Arc::clone(&store),
            store_first_wait: tuning.store_first_wait,
            warn_interval: tuning.warn_interval,
            capture_queue_frames: tuning.capture_queue_frames,
            capture_queue_bytes: tuning.capture_queue_bytes,
        }
        .run(control_rx),
    );

    let stats = stats_dir
        .zip(registry.clone())
        .map(|(dir, registry)| StatsWriter {
            dir,
            registry,
            file: StatsFile {
                execution_id: execution_id.clone(),
                task_id: task_id.clone(),
                agent_command: agent_command.clone(),
                pid: std::process::id(),
                started_at,
                updated_at: started_at,
                finished: false,
                metrics: Default::default(),
            },
        });
    let stats_task = stats
        .clone()
        .map(|writer| tokio::spawn(writer.every(tuning.stats_interval)));
    let (http_stop, http_stopped) = oneshot::channel::<()>();
    let http_task: Option<JoinHandle<Result<(), ServeError>>> = metrics_listener.map(|listener| {
        let source = Arc::new(registry.clone().unwrap_or_default());
        tokio::spawn(serve_http(listener, source, async {
            let _ = http_stopped.await;
        }))
    });

    let policy = Supervision {
        eof_grace: tuning.eof_grace,
        kill_grace: tuning.kill_grace,
    };
    let exit = supervise(&mut child, process_group, client_closed, policy).await;

    // The agent is gone: let its last output through, end what is left of its group,
    // then drain the queue so nothing already seen is lost.
    let settled = timeout(OUTPUT_SETTLE, &mut output_done).await.is_ok();
    end_group(process_group, tuning.kill_grace).await;
    if !settled && timeout(OUTPUT_CLOSE, &mut output_done).await.is_err() {
        tracing::warn!(
            "the agent's stdout is still held open by a process outside its group; not waiting for it"
        );
    }
    control.send_replace(Control::Drain);
    let report = match timeout(tuning.drain_timeout, &mut consumer).await {
        Ok(joined) => joined_report(joined),
        Err(_) => {
            control.send_replace(Control::Abandon);
            match timeout(tuning.drain_timeout, &mut consumer).await {
                Ok(joined) => joined_report(joined),
                Err(_) => {
                    consumer.abort();
                    tracing::warn!("the capture queue could not be drained in time");
                    ConsumerReport::default()
                }
            }
        }
    };
    connecting.abort();
    let store_connected = store.is_connected();
    store.close().await;

    if let Some(task) = stats_task {
        task.abort();
        // Wait until it has stopped: on a multi-thread runtime it may be mid-write, and
        // the final write below must not race it on the same file.
        let _ = task.await;
    }
    if let Some(mut writer) = stats {
        writer.file.finished = true;
        writer.write_now();
    }
    let _ = http_stop.send(());
    if let Some(task) = http_task
        && let Ok(Ok(Err(error))) = timeout(Duration::from_secs(1), task).await
    {
        tracing::warn!("{error}");
    }

    Ok(ProxyOutcome {
        exit: exit?,
        execution_id,
        transcript: transcript_path,
        frames_dropped: shared.dropped.load(Ordering::Relaxed),
        frames_transcript_only: report.transcript_only,
        frames_unprocessed: report.unprocessed,
        store_connected,
        store_errors: store.errors(),
        transcript_errors: report.transcript_errors,
        counters: report.counters,
        capture: report.capture,
    })
}

fn joined_report(joined: Result<ConsumerReport, tokio::task::JoinError>) -> ConsumerReport {
    joined.unwrap_or_else(|error| {
        tracing::warn!("the capture task failed: {error}");
        ConsumerReport::default()
    })
}

/// Starts a pump on its own OS thread. The thread is never joined: the client-side pump
/// may sit in a read of a stdin that never closes, and that must not hold the exit.
fn start_pump(
    name: &str,
    body: impl FnOnce() -> PumpReport + Send + 'static,
) -> Result<(), ProxyError> {
    let direction = name.to_owned();
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let report = body();
            if let Some(error) = report.read_error {
                tracing::warn!(pump = %direction, "reading failed: {error}");
            }
        })
        .map(|_| ())
        .map_err(|cause| ProxyError::Setup {
            what: "forwarding threads",
            cause,
        })
}

/// Rewrites this run's stats file from the registry.
#[derive(Clone)]
struct StatsWriter {
    dir: PathBuf,
    registry: Registry,
    file: StatsFile,
}

impl StatsWriter {
    fn write_now(&mut self) {
        self.file.updated_at = Timestamp::now();
        self.file.metrics = self.registry.snapshot();
        if let Err(error) = self.file.write(&self.dir) {
            tracing::debug!(dir = %self.dir.display(), %error, "cannot write the stats file");
        }
    }

    async fn every(mut self, interval: Duration) {
        loop {
            self.write_now();
            tokio::time::sleep(interval).await;
        }
    }
}
