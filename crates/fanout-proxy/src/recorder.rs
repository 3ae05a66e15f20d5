//! The recorder: one OS thread that takes the pumps' chunks off the queue and appends
//! them to the transcript, as they are, in the order they were read. It does nothing
//! else (no parsing, no store), so it keeps up with the pipes; capture reads the
//! transcript behind it ([`crate::follower`]).
//!
//! It flushes whenever the queue runs dry, so the file is never far behind what was
//! forwarded, and publishes how much is in the file ([`Progress`]) for the follower.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use fanout_acp::Direction;
use fanout_store::Timestamp;
use tokio::sync::Notify;

use crate::error::ProxyError;
use crate::metric_names;
use crate::queue::{ChunkQueue, Entry, count_lines};
use crate::ratelimit::RateLimit;
use crate::tap::TapShared;
use crate::transcript::{AppendError, TranscriptWriter};

/// What the recorder has put in the file, for the follower (and the exit report).
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// Bytes in the file (flushed).
    written: AtomicU64,
    /// Newlines recorded, both directions.
    lines: AtomicU64,
    /// When bytes were last flushed, microseconds since the epoch.
    last_flush: AtomicI64,
    /// The recorder is done: the file is complete.
    finished: AtomicBool,
    /// Woken on every flush and at the end.
    pub(crate) notify: Notify,
}

impl Progress {
    /// Bytes in the file.
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// Newlines recorded so far.
    pub(crate) fn lines(&self) -> u64 {
        self.lines.load(Ordering::Relaxed)
    }

    /// Whether the file is complete (every byte it will have is in it).
    pub(crate) fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Whether the recorder flushed within `quiet`: the pipes are busy.
    pub(crate) fn busy_within(&self, quiet: Duration) -> bool {
        let last = self.last_flush.load(Ordering::Relaxed);
        let quiet = i64::try_from(quiet.as_micros()).unwrap_or(i64::MAX);
        Timestamp::now().unix_micros().saturating_sub(last) < quiet
    }

    fn published(&self, written: u64) {
        self.written.store(written, Ordering::Release);
        self.last_flush
            .store(Timestamp::now().unix_micros(), Ordering::Relaxed);
        self.notify.notify_one();
    }

    fn finish(&self) {
        self.finished.store(true, Ordering::Release);
        self.notify.notify_one();
    }
}

/// How the recorder ended.
#[derive(Debug, Default)]
pub(crate) struct RecorderReport {
    /// Failed writes (after the first, the transcript is given up: its framing can no
    /// longer be trusted, so what follows is dropped and counted).
    pub errors: u64,
}

fn index(direction: Direction) -> usize {
    match direction {
        Direction::ClientToAgent => 0,
        Direction::AgentToClient => 1,
    }
}

/// Starts the recorder thread; it ends once `queue` is closed and empty. `sides`: the
/// read ends of the side pipes the pumps tee into, by direction ([`crate::splice`]).
pub(crate) fn start(
    queue: Arc<ChunkQueue>,
    mut writer: TranscriptWriter,
    sides: Option<[File; 2]>,
    progress: Arc<Progress>,
    shared: Arc<TapShared>,
    warn_interval: Duration,
) -> Result<std::thread::JoinHandle<RecorderReport>, ProxyError> {
    progress.published(writer.written());
    std::thread::Builder::new()
        .name("fanout-recorder".to_owned())
        .spawn(move || {
            let frames = [Direction::ClientToAgent, Direction::AgentToClient].map(|d| {
                metrics::counter!(metric_names::FRAMES, "direction" => d.as_str())
            });
            let dropped = [Direction::ClientToAgent, Direction::AgentToClient].map(|d| {
                metrics::counter!(metric_names::FRAMES_DROPPED, "direction" => d.as_str())
            });
            let error_metric = metrics::counter!(metric_names::TRANSCRIPT_ERRORS);
            let warn = RateLimit::new(warn_interval);
            let mut report = RecorderReport::default();
            let mut broken = false;
            let mut entries = VecDeque::new();
            let mut scratch = Vec::new();
            while queue.take_blocking(&mut entries) {
                for entry in entries.drain(..) {
                    let direction = entry.record().direction();
                    let appended = match (&entry, sides.as_ref()) {
                        (Entry::Piped { at, len, .. }, Some(sides)) => {
                            let side = &sides[index(direction)];
                            if broken {
                                // Still taken out of the side pipe, to be counted.
                                Err(read_out(side, *len, &mut scratch))
                            } else {
                                match writer.append_from(direction, *at, *len, side) {
                                    Ok(lines) => Ok(lines),
                                    Err(AppendError::Write { error, lines }) => {
                                        broken = true;
                                        failed(&writer, &error, &mut report, &error_metric);
                                        Err(lines)
                                    }
                                    Err(AppendError::Side(error)) => {
                                        tracing::warn!(%error, "cannot read a chunk back from its side pipe");
                                        Err(0)
                                    }
                                }
                            }
                        }
                        _ => {
                            let lines = match &entry {
                                Entry::Data { bytes, .. } => count_lines(bytes),
                                _ => 0,
                            };
                            if !broken && let Err(error) = writer.append(&entry.record()) {
                                broken = true;
                                failed(&writer, &error, &mut report, &error_metric);
                            }
                            if broken { Err(lines) } else { Ok(lines) }
                        }
                    };
                    // Lines of the entry that are not in the transcript.
                    let lost = match appended {
                        Ok(lines) => {
                            frames[index(direction)].increment(lines);
                            progress.lines.fetch_add(lines, Ordering::Relaxed);
                            0
                        }
                        Err(lines) => lines,
                    };
                    if lost > 0 {
                        shared.count_drop(
                            direction,
                            &dropped[index(direction)],
                            lost,
                            "the transcript cannot be written",
                        );
                    }
                }
                if queue.is_empty()
                    && !broken
                    && flush(&mut writer, &mut report, &error_metric, &warn)
                {
                    progress.published(writer.written());
                }
            }
            if !broken && flush(&mut writer, &mut report, &error_metric, &warn) {
                progress.published(writer.written());
            }
            if let Err(error) = writer.finish() {
                tracing::debug!(path = %writer.path().display(), %error, "cannot give back the transcript's reserved space");
            }
            progress.finish();
            report
        })
        .map_err(|cause| ProxyError::Setup {
            what: "transcript thread",
            cause,
        })
}

/// The first failed write: counted and WARNed; the transcript is given up.
fn failed(
    writer: &TranscriptWriter,
    error: &std::io::Error,
    report: &mut RecorderReport,
    metric: &metrics::Counter,
) {
    report.errors += 1;
    metric.increment(1);
    tracing::warn!(
        path = %writer.path().display(),
        "cannot write the transcript ({error}); what follows is neither in it nor captured"
    );
}

/// Reads `len` bytes out of `side` and throws them away; their newlines.
fn read_out(mut side: &File, mut len: usize, scratch: &mut Vec<u8>) -> u64 {
    scratch.resize(64 * 1024, 0);
    let mut lines = 0;
    while len > 0 {
        let piece = len.min(scratch.len());
        if side.read_exact(&mut scratch[..piece]).is_err() {
            break;
        }
        lines += count_lines(&scratch[..piece]);
        len -= piece;
    }
    lines
}

/// Flushes the writer; a failure is counted and WARNed (the buffer keeps what it could
/// not write, so the next flush tries again and the framing stays whole).
fn flush(
    writer: &mut TranscriptWriter,
    report: &mut RecorderReport,
    metric: &metrics::Counter,
    warn: &RateLimit,
) -> bool {
    match writer.flush() {
        Ok(()) => true,
        Err(error) => {
            report.errors += 1;
            metric.increment(1);
            if warn.ready() {
                tracing::warn!(path = %writer.path().display(), errors_so_far = report.errors, "cannot write the transcript: {error}");
            }
            false
        }
    }
}
