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
use std::time::{Duration, Instant};

use fanout_acp::Direction;
use fanout_store::Timestamp;
use tokio::sync::Notify;

use crate::error::ProxyError;
use crate::metric_names;
use crate::queue::{ChunkQueue, Entry, count_lines};
use crate::ratelimit::RateLimit;
use crate::tap::TapShared;
use crate::transcript::{AppendError, TranscriptWriter};

/// How long the recorder goes on gathering chunks after a flush before it waits to be
/// woken again: while chunks keep coming, the pumps need not wake it for each one.
const GATHER_AFTER_FLUSH: Duration = Duration::from_millis(2);
/// How long one gathering wait lasts: how far the transcript may lag the pipes while
/// they are busy with small chunks.
const BATCH_WAIT: Duration = Duration::from_millis(1);

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
    writer: TranscriptWriter,
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
            let warn = RateLimit::new(warn_interval);
            let mut recording = Recording {
                writer,
                sides,
                broken: false,
                report: RecorderReport::default(),
                error_metric: metrics::counter!(metric_names::TRANSCRIPT_ERRORS),
                scratch: Vec::new(),
            };
            let mut entries = VecDeque::new();
            // Until this long after its last flush, the recorder gathers what comes
            // in BATCH_WAIT steps rather than being woken for every chunk.
            let mut gathering_until = None;
            loop {
                let more = match gathering_until {
                    Some(until) if Instant::now() < until => {
                        queue.take_within(&mut entries, BATCH_WAIT)
                    }
                    _ => queue.take_blocking(&mut entries),
                };
                if !more {
                    break;
                }
                let entries_taken = !entries.is_empty();
                for entry in entries.drain(..) {
                    let direction = entry.record().direction();
                    match recording.append(&entry) {
                        Ok(lines) => {
                            frames[index(direction)].increment(lines);
                            progress.lines.fetch_add(lines, Ordering::Relaxed);
                        }
                        Err(0) => {}
                        Err(lost) => shared.count_drop(
                            direction,
                            &dropped[index(direction)],
                            lost,
                            "the transcript cannot be written",
                        ),
                    }
                }
                if !entries_taken {
                    continue;
                }
                if queue.is_empty() && recording.flush(&warn) {
                    progress.published(recording.writer.written());
                    gathering_until = Some(Instant::now() + GATHER_AFTER_FLUSH);
                }
            }
            if recording.flush(&warn) {
                progress.published(recording.writer.written());
            }
            let Recording { mut writer, report, .. } = recording;
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

/// The recorder's state from one entry to the next.
struct Recording {
    writer: TranscriptWriter,
    /// The side pipes' read ends, by direction.
    sides: Option<[File; 2]>,
    /// A write failed: the transcript is given up (its framing can no longer be
    /// trusted), and what follows is only counted.
    broken: bool,
    report: RecorderReport,
    error_metric: metrics::Counter,
    /// Where piped chunks are read out to be counted once the transcript is given up.
    scratch: Vec<u8>,
}

impl Recording {
    /// Appends `entry`: the newlines it put in the transcript, or (`Err`) those it
    /// could not.
    fn append(&mut self, entry: &Entry) -> Result<u64, u64> {
        if let (Entry::Piped { direction, at, len }, Some(sides)) = (entry, &self.sides) {
            let side = &sides[index(*direction)];
            if self.broken {
                // Still taken out of the side pipe, to be counted.
                return Err(read_out(side, *len, &mut self.scratch));
            }
            return self
                .writer
                .append_from(*direction, *at, *len, side)
                .map_err(|failure| {
                    let (error, lines) = match failure {
                        AppendError::Write { error, lines } => (error, lines),
                        // The record was taken back, so what is buffered is whole and
                        // goes out; but where the side pipe stands is unknown now.
                        AppendError::Side(error) => {
                            let _ = self.writer.flush();
                            (error, 0)
                        }
                    };
                    self.failed(&error);
                    lines
                });
        }
        let lines = match entry {
            Entry::Data { bytes, .. } => count_lines(bytes),
            Entry::Piped { .. } | Entry::End { .. } | Entry::Lost { .. } => 0,
        };
        if self.broken {
            return Err(lines);
        }
        match self.writer.append(&entry.record()) {
            Ok(()) => Ok(lines),
            Err(error) => {
                self.failed(&error);
                Err(lines)
            }
        }
    }

    /// The first failed write: counted and WARNed; the transcript is given up.
    fn failed(&mut self, error: &std::io::Error) {
        self.broken = true;
        self.report.errors += 1;
        self.error_metric.increment(1);
        tracing::warn!(
            path = %self.writer.path().display(),
            "cannot write the transcript ({error}); what follows is neither in it nor captured"
        );
    }

    /// Flushes the writer unless the transcript is given up; whether it is flushed. A
    /// failure is counted and WARNed (the buffer keeps what it could not write, so the
    /// next flush tries again and the framing stays whole).
    fn flush(&mut self, warn: &RateLimit) -> bool {
        if self.broken {
            return false;
        }
        match self.writer.flush() {
            Ok(()) => true,
            Err(error) => {
                self.report.errors += 1;
                self.error_metric.increment(1);
                if warn.ready() {
                    tracing::warn!(path = %self.writer.path().display(), errors_so_far = self.report.errors, "cannot write the transcript: {error}");
                }
                false
            }
        }
    }
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
