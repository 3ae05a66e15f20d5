//! The consumer: the only reader of the tap queue, in two stages (two tasks) joined by
//! a second bounded queue, so the transcript never waits for the store.
//!
//! - The recorder drains the tap queue as fast as the disk takes lines: it appends each
//!   line to the transcript (the durable record) and then offers it to capture. When
//!   capture is behind (a slow or locked store), the capture queue fills and further
//!   lines go to the transcript only: counted as `transcript_only`, recoverable with
//!   `fanout import`. Only without a transcript (or when its write fails) is such a
//!   line dropped. The recorder flushes the transcript whenever the tap queue runs dry.
//! - The capturer feeds capture in batches (one group commit each) from the capture
//!   queue.
//!
//! Shutdown has two steps, driven by [`Control`]: `Drain` closes the tap queue to new
//! frames; both stages finish what is queued. `Abandon` (the drain took too long,
//! typically because the store hangs) stops feeding capture, even in the middle of a
//! write; what is left is counted unprocessed. Nothing that was queued is lost: it is in
//! the store or in the transcript, which `fanout import` can replay.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fanout_acp::Direction;
use fanout_capture::{Capture, CaptureStats, CounterSnapshot};
use tokio::sync::watch;

use crate::metric_names;
use crate::queue::{FrameReceiver, FrameSender, TapFrame, frame_queue};
use crate::ratelimit::RateLimit;
use crate::store::ResilientStore;
use crate::tap::TapShared;
use crate::transcript::TranscriptWriter;

/// At most this many queued frames go to capture as one batch.
const BATCH_FRAMES: usize = 128;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Control {
    Run,
    Drain,
    Abandon,
}

/// What the consumer did.
#[derive(Debug, Default)]
pub(crate) struct ConsumerReport {
    /// Lines in the transcript that capture was too far behind to take.
    pub transcript_only: u64,
    pub unprocessed: u64,
    pub transcript_errors: u64,
    pub counters: CounterSnapshot,
    pub capture: CaptureStats,
}

pub(crate) struct Consumer {
    pub queue: FrameReceiver,
    pub capture: Capture,
    pub transcript: Option<TranscriptWriter>,
    pub shared: Arc<TapShared>,
    pub store: Arc<ResilientStore>,
    /// How long the first frames may wait for the store's first open attempt.
    pub store_first_wait: Duration,
    pub warn_interval: Duration,
    /// Bounds of the queue between the transcript and capture (frames, bytes).
    pub capture_queue_frames: usize,
    pub capture_queue_bytes: usize,
}

/// Failed transcript writes: each is counted in the report and the metric, and WARNed
/// at most once per interval (the last flush always, as nothing follows it).
struct TranscriptFailures {
    metric: metrics::Counter,
    warn: RateLimit,
    count: u64,
}

impl TranscriptFailures {
    fn record(&mut self, path: &Path, error: &io::Error, last: bool) {
        self.count += 1;
        self.metric.increment(1);
        if last || self.warn.ready() {
            tracing::warn!(
                path = %path.display(),
                errors_so_far = self.count,
                "cannot write the transcript: {error}"
            );
        }
    }
}

/// Resolves when `control` says `Abandon`; never when its sender is gone.
async fn abandoned(control: &mut watch::Receiver<Control>) {
    if control.wait_for(|c| *c == Control::Abandon).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Per-direction series, indexed by [`direction_index`].
fn per_direction(name: &'static str) -> [metrics::Counter; 2] {
    [Direction::ClientToAgent, Direction::AgentToClient]
        .map(|direction| metrics::counter!(name, "direction" => direction.as_str()))
}

fn direction_index(direction: Direction) -> usize {
    match direction {
        Direction::ClientToAgent => 0,
        Direction::AgentToClient => 1,
    }
}

impl Consumer {
    pub(crate) async fn run(self, control: watch::Receiver<Control>) -> ConsumerReport {
        let (to_capture, capture_queue) =
            frame_queue(self.capture_queue_frames, self.capture_queue_bytes);
        // Its own task, so the recorder runs in parallel while capture parses or waits
        // for the store; aborted with this future (the proxy's last resort).
        let capturer = AbortOnDrop(tokio::spawn(
            Capturer {
                queue: capture_queue,
                capture: self.capture,
                store: self.store,
                store_first_wait: self.store_first_wait,
            }
            .run(control.clone()),
        ));
        let recorded = Recorder {
            queue: self.queue,
            transcript: self.transcript,
            shared: self.shared,
            to_capture,
            failures: TranscriptFailures {
                metric: metrics::counter!(metric_names::TRANSCRIPT_ERRORS),
                warn: RateLimit::new(self.warn_interval),
                count: 0,
            },
            transcript_only_metric: per_direction(metric_names::FRAMES_TRANSCRIPT_ONLY),
            dropped_metric: per_direction(metric_names::FRAMES_DROPPED),
            behind_warn: RateLimit::new(self.warn_interval),
        }
        .run(control)
        .await;
        let captured = capturer.join().await.unwrap_or_else(|error| {
            tracing::warn!("the capture task failed: {error}");
            Captured::default()
        });
        ConsumerReport {
            transcript_only: recorded.transcript_only,
            unprocessed: captured.unprocessed,
            transcript_errors: recorded.transcript_errors,
            counters: captured.counters,
            capture: captured.capture,
        }
    }
}

/// A task that is aborted when its handle is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> AbortOnDrop<T> {
    async fn join(mut self) -> Result<T, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Stage one: tap queue -> transcript -> capture queue.
struct Recorder {
    queue: FrameReceiver,
    transcript: Option<TranscriptWriter>,
    shared: Arc<TapShared>,
    to_capture: FrameSender,
    failures: TranscriptFailures,
    transcript_only_metric: [metrics::Counter; 2],
    dropped_metric: [metrics::Counter; 2],
    behind_warn: RateLimit,
}

/// What the recorder did.
#[derive(Default)]
struct Recorded {
    transcript_only: u64,
    transcript_errors: u64,
}

impl Recorder {
    async fn run(mut self, mut control: watch::Receiver<Control>) -> Recorded {
        let mut recorded = Recorded::default();
        let mut closing = false;
        loop {
            let frame = tokio::select! {
                biased;
                changed = control.changed(), if !closing => {
                    let now = if changed.is_ok() { *control.borrow_and_update() } else {
                        // The proxy is gone without saying: finish what is queued.
                        Control::Drain
                    };
                    if now != Control::Run {
                        closing = true;
                        self.queue.close();
                    }
                    continue;
                }
                frame = self.queue.recv() => match frame {
                    Some(frame) => frame,
                    None => break,
                },
            };
            self.record(frame, &mut recorded);
            if self.queue.is_empty() {
                self.flush(false);
            }
        }
        self.flush(true);
        recorded.transcript_errors = self.failures.count;
        // Dropping `to_capture` (with self) lets the capturer finish its queue and stop.
        recorded
    }

    fn record(&mut self, frame: TapFrame, recorded: &mut Recorded) {
        let transcribed = match self.transcript.as_mut() {
            Some(writer) => match writer.append(frame.observed_at, frame.direction, &frame.line) {
                Ok(()) => true,
                Err(error) => {
                    let path = writer.path().to_owned();
                    self.failures.record(&path, &error, false);
                    false
                }
            },
            None => false,
        };
        let direction = frame.direction;
        // Closed: the capturer failed (it cannot stop before this sender is gone), so
        // it is as far behind as can be.
        if self.to_capture.try_send(frame).is_err() {
            self.behind(direction, transcribed, recorded);
        }
    }

    /// Capture is too far behind to take a line: it stays in the transcript only, or,
    /// without one, it is dropped.
    fn behind(&self, direction: Direction, transcribed: bool, recorded: &mut Recorded) {
        let index = direction_index(direction);
        if !transcribed {
            self.shared.count_drop(
                direction,
                &self.dropped_metric[index],
                "capture is behind and there is no transcript",
            );
            return;
        }
        recorded.transcript_only += 1;
        self.transcript_only_metric[index].increment(1);
        if self.behind_warn.ready() {
            tracing::warn!(
                direction = direction.as_str(),
                transcript_only_so_far = recorded.transcript_only,
                "capture is behind (slow store?): lines go to the transcript only; `fanout import` records them"
            );
        }
    }

    fn flush(&mut self, last: bool) {
        if let Some(writer) = self.transcript.as_mut()
            && let Err(error) = writer.flush()
        {
            let path = writer.path().to_owned();
            self.failures.record(&path, &error, last);
        }
    }
}

/// Stage two: capture queue -> capture, one group commit per batch.
struct Capturer {
    queue: FrameReceiver,
    capture: Capture,
    store: Arc<ResilientStore>,
    store_first_wait: Duration,
}

impl Capturer {
    async fn run(mut self, mut control: watch::Receiver<Control>) -> Captured {
        let mut report = Captured::default();
        let unprocessed = metrics::counter!(metric_names::FRAMES_UNPROCESSED);
        let mut abandon = false;
        tokio::select! {
            () = self.store.first_attempt_done(self.store_first_wait) => {}
            () = abandoned(&mut control) => abandon = true,
        }
        loop {
            let frame = tokio::select! {
                biased;
                () = abandoned(&mut control), if !abandon => {
                    abandon = true;
                    continue;
                }
                frame = self.queue.recv() => match frame {
                    Some(frame) => frame,
                    None => break,
                },
            };
            // Whatever else is already queued goes to capture with it, as one group
            // commit (Capture::observe_batch commits before it returns, so nothing
            // waits for more traffic; a lone frame is a batch of one).
            let mut batch = vec![frame];
            while batch.len() < BATCH_FRAMES
                && let Ok(frame) = self.queue.try_recv()
            {
                batch.push(frame);
            }
            if abandon {
                report.unprocessed += batch.len() as u64;
                unprocessed.increment(batch.len() as u64);
                continue;
            }
            let lines: Vec<_> = batch
                .iter()
                .map(|f| (f.direction, f.line.as_slice(), f.observed_at))
                .collect();
            tokio::select! {
                biased;
                () = self.capture.observe_batch(&lines) => {}
                // Dropped mid-write. The whole batch is counted unprocessed, though some
                // of its writes may have landed (a failed group commit is retried record
                // by record, and those commit one by one); it is in the transcript, and
                // importing it again is idempotent.
                () = abandoned(&mut control) => {
                    abandon = true;
                    report.unprocessed += batch.len() as u64;
                    unprocessed.increment(batch.len() as u64);
                }
            }
        }
        report.counters = self.capture.counters().snapshot();
        report.capture = self.capture.stats();
        report
    }
}

/// What the capturer did.
#[derive(Default)]
struct Captured {
    unprocessed: u64,
    counters: CounterSnapshot,
    capture: CaptureStats,
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use fanout_capture::CaptureConfig;
    use fanout_store::{Store, Timestamp};
    use sqlx::Connection;

    use super::*;
    use crate::transcript::TranscriptHeader;

    const LINES: usize = 200;
    const CAPTURE_QUEUE: usize = 4;

    /// ACP traffic whose first lines make capture write (a session row), then updates.
    fn traffic() -> Vec<(Direction, Vec<u8>)> {
        let mut lines = vec![
            (
                Direction::ClientToAgent,
                br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}"#.to_vec(),
            ),
            (
                Direction::AgentToClient,
                br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}"#.to_vec(),
            ),
        ];
        for i in lines.len()..LINES {
            let line = format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{i}"}}}}}}}}"#
            );
            lines.push((Direction::AgentToClient, line.into_bytes()));
        }
        lines
    }

    /// Runs the consumer over `traffic()` while another connection holds the SQLite
    /// store locked, so capture is stuck on its first write; returns the report, the
    /// shared tap state and the transcript's text.
    async fn run_behind_a_locked_store(
        transcript: bool,
    ) -> (ConsumerReport, Arc<TapShared>, Option<String>) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("fanout.db").display());
        let store = ResilientStore::new(&url, Duration::from_secs(60), Duration::from_secs(60));
        tokio::spawn(Arc::clone(&store).connect());
        store.first_attempt_done(Duration::from_secs(30)).await;
        assert!(store.is_connected());
        let mut locker = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query("BEGIN EXCLUSIVE")
            .execute(&mut locker)
            .await
            .unwrap();

        let (sender, queue) = frame_queue(LINES, 1 << 20);
        let shared = Arc::new(TapShared::new(Duration::from_secs(60)));
        let header =
            TranscriptHeader::new("exec-1", Some("task"), &["agent".into()], Timestamp::now());
        let writer = transcript.then(|| TranscriptWriter::create(dir.path(), &header).unwrap());
        let path = writer.as_ref().map(|w| w.path().to_owned());
        let (control, control_rx) = watch::channel(Control::Run);
        let consumer = tokio::spawn(
            Consumer {
                queue,
                capture: Capture::new(
                    Arc::clone(&store) as Arc<dyn Store>,
                    CaptureConfig {
                        agent_execution_id: Some("exec-1".into()),
                        task_id: Some("task".into()),
                        agent_command: None,
                    },
                ),
                transcript: writer,
                shared: Arc::clone(&shared),
                store: Arc::clone(&store),
                store_first_wait: Duration::from_secs(1),
                warn_interval: Duration::from_secs(60),
                capture_queue_frames: CAPTURE_QUEUE,
                capture_queue_bytes: 1 << 20,
            }
            .run(control_rx),
        );
        for (direction, line) in traffic() {
            sender
                .try_send(TapFrame {
                    direction,
                    observed_at: Timestamp::now(),
                    line,
                })
                .unwrap();
        }
        // The recorder has taken every line once the tap queue is empty again (this
        // test runs on one thread: a frame is recorded in the poll that receives it).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !sender.is_drained() {
            assert!(std::time::Instant::now() < deadline, "the recorder stalled");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // The store is still locked: the drain cannot finish, so give up on it.
        control.send_replace(Control::Abandon);
        drop(sender);
        let report = consumer.await.unwrap();
        assert!(
            report.unprocessed > 0,
            "capture was stuck on the locked store: {report:?}"
        );
        sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
        let text = path.map(|p| std::fs::read_to_string(p).unwrap());
        (report, shared, text)
    }

    #[tokio::test]
    async fn a_stuck_store_never_costs_the_transcript_a_line() {
        let (report, shared, text) = run_behind_a_locked_store(true).await;
        let text = text.unwrap();
        let recorded: Vec<String> = text
            .lines()
            .skip(1)
            .map(|line| {
                let frame: serde_json::Value = serde_json::from_str(line).unwrap();
                frame["line"].as_str().unwrap().to_owned()
            })
            .collect();
        let sent: Vec<String> = traffic()
            .into_iter()
            .map(|(_, line)| String::from_utf8(line).unwrap())
            .collect();
        assert_eq!(recorded, sent, "the transcript holds every line, in order");
        assert_eq!(shared.dropped.load(Ordering::Relaxed), 0, "nothing dropped");
        // Capture holds at most one batch in hand and a full capture queue; every
        // other line went to the transcript only.
        assert!(
            report.transcript_only >= (LINES - BATCH_FRAMES - CAPTURE_QUEUE) as u64,
            "{report:?}"
        );
        assert_eq!(report.transcript_errors, 0);
    }

    #[tokio::test]
    async fn without_a_transcript_lines_capture_cannot_take_are_dropped_and_counted() {
        let (report, shared, text) = run_behind_a_locked_store(false).await;
        assert!(text.is_none());
        assert_eq!(report.transcript_only, 0);
        let dropped = shared.dropped.load(Ordering::Relaxed);
        assert!(
            dropped >= (LINES - BATCH_FRAMES - CAPTURE_QUEUE) as u64,
            "{dropped} dropped; {report:?}"
        );
    }
}
