//! [`run`]: one proxy run, from spawning the agent to the last transcript line.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fanout_acp::{DEFAULT_MAX_LINE_BYTES, Direction};
use fanout_capture::import::{CatchUp, catch_up_pending};
use fanout_capture::transcript::{
    Applier, RecordReader, remove_pending_hint, try_lock, write_pending_hint,
};
use fanout_capture::{Capture, CaptureConfig, CaptureStats, CounterSnapshot};
use fanout_metrics::{Registry, ServeError, StatsFile, serve_http};
use fanout_store::{Store, Timestamp};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};

use crate::agent::{
    AgentExit, SpawnedAgent, Supervision, end_group, signal_group, spawn_agent, supervise,
};
use crate::error::ProxyError;
use crate::follower::{Control, Follower, FollowerReport, Source};
use crate::metric_names;
use crate::queue::ChunkQueue;
use crate::recorder::{self, Progress, RecorderReport};
use crate::splice::SidePipe;
use crate::store::ResilientStore;
use crate::tap::{PumpReport, Tap, TapShared, pump};
use crate::transcript::{TranscriptHeader, TranscriptWriter};

/// The environment variable the agent finds its execution id in (a nested fanout, or
/// an agent that logs it, can correlate with the rows).
pub const EXECUTION_ID_ENV: &str = "FANOUT_AGENT_EXECUTION_ID";

/// Knobs with defaults that suit an interactive agent; tests and benchmarks shrink them.
#[derive(Clone, Debug)]
pub struct ProxyTuning {
    /// Bytes of chunks the queue between the pumps and the transcript (or, without
    /// one, capture) holds before chunks are dropped (counted).
    pub queue_bytes: usize,
    /// Longest line observed (longer ones are forwarded and recorded, counted, not
    /// observed).
    pub max_line_bytes: usize,
    /// Read buffer of each pump: the largest chunk.
    pub chunk_bytes: usize,
    /// How often a store that could not be opened is tried again.
    pub store_retry: Duration,
    /// How long the first lines wait for the store's first open attempt.
    pub store_first_wait: Duration,
    /// At most one WARN per this interval for each repeating condition.
    pub warn_interval: Duration,
    /// At exit, how long capture may take to write what it has not written yet (the
    /// store may be coming back); the rest stays in the transcript for the next proxy
    /// or import on the same store.
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
            queue_bytes: 4 * 1024 * 1024,
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
    /// `None`: no transcript. Transcripts of earlier runs here that are not wholly in
    /// the same store are caught up by this run.
    pub transcript_dir: Option<PathBuf>,
    /// `None`: no stats file. Needs `registry`.
    pub stats_dir: Option<PathBuf>,
    /// The process's metrics registry (installed as the global recorder by the caller),
    /// read for the stats file and the HTTP endpoints.
    pub registry: Option<Registry>,
    /// Serve `/metrics`, `/debug/vars` and `/healthz` on this listener while running.
    pub metrics_listener: Option<TcpListener>,
    /// The defaults suit an interactive agent.
    pub tuning: ProxyTuning,
}

/// The client's side of the conversation: what the proxy reads and writes. The
/// process's own stdin and stdout by default ([`ClientStreams::stdio`]). Any file will
/// do; when they are pipes or sockets, the bytes are forwarded without being copied
/// through the proxy.
pub struct ClientStreams {
    /// What the client sends (the agent's input).
    pub input: File,
    /// Where the agent's output goes.
    pub output: File,
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
            input: File::from(input),
            output: File::from(output),
        })
    }
}

/// How a run ended.
#[derive(Debug)]
pub struct ProxyOutcome {
    /// How the agent ended.
    pub exit: AgentExit,
    /// This run's execution id.
    pub execution_id: String,
    /// This run's transcript, if it wrote one.
    pub transcript: Option<PathBuf>,
    /// Lines forwarded but neither captured nor in the transcript (the queue was full,
    /// or the transcript could not be written).
    pub frames_dropped: u64,
    /// Lines seen that are not in the store at exit: with a transcript, in it, and
    /// written by the next proxy or import on the same store (its hint stays).
    pub frames_unprocessed: u64,
    /// Everything this run saw is in the store.
    pub complete: bool,
    /// Whether the store was open when the run ended.
    pub store_connected: bool,
    /// Store operations that failed (each retry of a held batch counts).
    pub store_errors: u64,
    /// Transcript writes that failed.
    pub transcript_errors: u64,
    /// Lines of earlier runs' transcripts this run wrote to the store.
    pub frames_caught_up: u64,
    /// The subagent writer's counters (AC-26).
    pub counters: CounterSnapshot,
    /// Capture's totals.
    pub capture: CaptureStats,
}

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
    let store_identity = fanout_store::store_identity(&database_url);

    // The transcript first: it is the record of everything, so it exists (with the
    // hint that it is not yet in the store) before the first byte is forwarded.
    let header = TranscriptHeader::new(
        &execution_id,
        task_id.as_deref(),
        &agent_command,
        started_at,
    );
    let transcript = transcript_dir
        .as_deref()
        .and_then(|dir| open_transcript(dir, &header, &store_identity));

    let SpawnedAgent {
        mut child,
        process_group,
        stdin: agent_stdin,
        stdout: agent_stdout,
    } = spawn_agent(&agent_command, &[(EXECUTION_ID_ENV, execution_id.as_str())])?;

    let queue = Arc::new(ChunkQueue::new(tuning.queue_bytes));
    let shared = Arc::new(TapShared::new(tuning.warn_interval));
    let (client_closed_tx, client_closed) = oneshot::channel();
    let (output_done_tx, mut output_done) = oneshot::channel::<()>();
    let ClientStreams { input, output } = client;
    let why_dropped = if transcript.is_some() {
        "the transcript cannot keep up"
    } else {
        "capture is behind and there is no transcript"
    };
    // With a recorder to read them, side pipes let the pumps splice (crate::splice).
    let side_pipes = transcript.as_ref().and_then(|_| {
        let pipes = SidePipe::new().and_then(|c2a| Ok([c2a, SidePipe::new()?]));
        pipes
            .inspect_err(|error| tracing::debug!(%error, "no side pipes; the pumps copy"))
            .ok()
    });
    let (side_writes, side_reads) = match side_pipes {
        Some([c2a, a2c]) => (
            [Some(c2a.write), Some(a2c.write)],
            Some([File::from(c2a.read), File::from(a2c.read)]),
        ),
        None => ([None, None], None),
    };
    let pumps = {
        let [c2a_side, a2c_side] = side_writes;
        let tap = |direction, side| {
            Tap::new(
                direction,
                Arc::clone(&queue),
                Arc::clone(&shared),
                why_dropped,
                side,
            )
        };
        let (c2a, a2c) = (
            tap(Direction::ClientToAgent, c2a_side),
            tap(Direction::AgentToClient, a2c_side),
        );
        let chunk = tuning.chunk_bytes;
        start_pump("fanout-c2a", move || {
            // `pump` drops the agent's stdin when the client's input ends: EOF travels on.
            let report = pump(input, agent_stdin, &c2a, chunk);
            let _ = client_closed_tx.send(());
            report
        })
        .and_then(|()| {
            start_pump("fanout-a2c", move || {
                let report = pump(agent_stdout, output, &a2c, chunk);
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
    let mut transcript_lock = None;
    let (transcript_path, recorder, source, marked) = match transcript {
        Some(Transcript {
            writer,
            reader,
            lock,
        }) => {
            transcript_lock = Some(lock);
            let path = writer.path().to_owned();
            let progress = Arc::new(Progress::default());
            let offset = writer.written();
            let thread = recorder::start(
                Arc::clone(&queue),
                writer,
                side_reads,
                Arc::clone(&progress),
                Arc::clone(&shared),
                tuning.warn_interval,
            );
            let source = Source::Transcript {
                reader: RecordReader::new(reader, offset, 2),
                progress,
            };
            match thread {
                Ok(thread) => (Some(path), Some(thread), source, Some(execution_id.clone())),
                Err(error) => {
                    // Without its writer the transcript stays as it is; capture takes
                    // the queue instead.
                    tracing::warn!("{error}; continuing without a transcript");
                    (None, None, queue_source(&queue), None)
                }
            }
        }
        None => (None, None, queue_source(&queue), None),
    };
    let (control, control_rx) = watch::channel(Control::Run);
    let mut follower = tokio::spawn(
        Follower {
            applier: Applier::new(capture, marked, 0, tuning.max_line_bytes),
            source,
            store: Arc::clone(&store),
            store_first_wait: tuning.store_first_wait,
        }
        .run(control_rx),
    );
    // Earlier runs' transcripts that are not wholly in this store: once it is open.
    // (This run's own is locked by this run, so catch-up leaves it alone.)
    let catching_up = transcript_path.as_ref().and_then(|path| {
        let dir = path.parent()?.to_owned();
        let store = Arc::clone(&store);
        let identity = store_identity.clone();
        Some(tokio::spawn(async move {
            store.connected().await;
            let done = catch_up_pending(store as Arc<dyn Store>, &dir, &identity).await;
            report_catch_up(&done);
            done
        }))
    });

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
    // then let capture finish what the run saw, so nothing already seen is lost.
    let settled = timeout(OUTPUT_SETTLE, &mut output_done).await.is_ok();
    end_group(process_group, tuning.kill_grace).await;
    if !settled && timeout(OUTPUT_CLOSE, &mut output_done).await.is_err() {
        tracing::warn!(
            "the agent's stdout is still held open by a process outside its group; not waiting for it"
        );
    }
    queue.close();
    let recorded = match recorder {
        Some(thread) => tokio::task::spawn_blocking(move || thread.join())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_else(|| {
                tracing::warn!("the transcript thread failed");
                RecorderReport::default()
            }),
        None => RecorderReport::default(),
    };
    control.send_replace(Control::Drain);
    let drain_until = Instant::now() + tuning.drain_timeout;
    let report = match tokio::time::timeout_at(drain_until, &mut follower).await {
        Ok(joined) => joined_report(joined),
        Err(_) => {
            control.send_replace(Control::Abandon);
            match timeout(tuning.drain_timeout, &mut follower).await {
                Ok(joined) => joined_report(joined),
                Err(_) => {
                    follower.abort();
                    tracing::warn!("capture could not be stopped in time");
                    FollowerReport::default()
                }
            }
        }
    };
    let caught_up = match catching_up {
        Some(mut task) => match tokio::time::timeout_at(drain_until, &mut task).await {
            Ok(Ok(done)) => done.lines_applied(),
            Ok(Err(_)) => 0,
            Err(_) => {
                // Rolled back where it was; the hints stay for the next run.
                task.abort();
                0
            }
        },
        None => 0,
    };
    if caught_up > 0 {
        metrics::counter!(metric_names::FRAMES_CAUGHT_UP).increment(caught_up);
    }
    connecting.abort();
    let store_connected = store.is_connected();
    store.close().await;
    let unprocessed = if report.complete {
        0
    } else {
        report.lines_left.max(1)
    };
    if unprocessed > 0 {
        metrics::counter!(metric_names::FRAMES_UNPROCESSED).increment(unprocessed);
    }
    if let Some(path) = &transcript_path
        && report.complete
        && recorded.errors == 0
        && let Err(error) = remove_pending_hint(path)
    {
        tracing::warn!(path = %path.display(), %error, "cannot remove the transcript's hint");
    }
    // From here on, the next run's catch-up may take what is left of it.
    drop(transcript_lock);

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
        frames_unprocessed: unprocessed,
        complete: report.complete && shared.dropped.load(Ordering::Relaxed) == 0,
        store_connected,
        store_errors: store.errors(),
        transcript_errors: recorded.errors,
        frames_caught_up: caught_up,
        counters: report.counters,
        capture: report.capture,
    })
}

/// After the agent exits, how long its remaining output may take to arrive before the
/// rest of its group is ended.
const OUTPUT_SETTLE: Duration = Duration::from_millis(250);
/// After the group is ended, how long to wait for the output pipe to close.
const OUTPUT_CLOSE: Duration = Duration::from_secs(1);

/// A new transcript: its writer, the handle capture reads it through (positioned after
/// the header), and the handle that holds its lock for the whole run (so no catch-up
/// of another process, nor this run's own, applies it while it is written).
struct Transcript {
    writer: TranscriptWriter,
    reader: File,
    lock: File,
}

/// Creates the run's transcript, its hint (not yet in `store_identity`), its lock and
/// the handle capture reads it through; `None` (with a WARN) when any of it fails.
fn open_transcript(
    dir: &Path,
    header: &TranscriptHeader,
    store_identity: &str,
) -> Option<Transcript> {
    let writer = match TranscriptWriter::create(dir, header) {
        Ok(writer) => writer,
        Err(error) => {
            tracing::warn!("{error}; continuing without a transcript");
            return None;
        }
    };
    let path = writer.path().to_owned();
    let opened = (|| {
        let lock = File::open(&path)?;
        if !try_lock(&lock)? {
            return Err(std::io::Error::other("it is locked by another process"));
        }
        let mut reader = File::open(&path)?;
        reader.seek(SeekFrom::Start(writer.written()))?;
        write_pending_hint(&path, store_identity)?;
        Ok((reader, lock))
    })();
    match opened {
        Ok((reader, lock)) => Some(Transcript {
            writer,
            reader,
            lock,
        }),
        Err(error) => {
            tracing::warn!(path = %path.display(), "cannot read back the transcript ({error}); continuing without one");
            drop(writer);
            let _ = std::fs::remove_file(&path);
            None
        }
    }
}

fn queue_source(queue: &Arc<ChunkQueue>) -> Source {
    Source::Queue {
        queue: Arc::clone(queue),
        entries: VecDeque::new(),
        position: 0,
    }
}

/// Says what catching up earlier transcripts did (nothing when there was nothing).
fn report_catch_up(done: &CatchUp) {
    if !done.files.is_empty() {
        tracing::info!(
            transcripts = done.files.len(),
            lines = done.lines_applied(),
            "caught up earlier runs' transcripts that were not wholly in the store"
        );
    }
    for failure in &done.failed {
        tracing::warn!(path = %failure.path.display(), "cannot catch up an earlier transcript: {}", failure.error);
    }
}

fn joined_report(joined: Result<FollowerReport, tokio::task::JoinError>) -> FollowerReport {
    joined.unwrap_or_else(|error| {
        tracing::warn!("the capture task failed: {error}");
        FollowerReport::default()
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
