//! The consumer task: the only reader of the tap queue. Per frame it writes the
//! transcript line first (cheap, local, and the durable record) and then hands the line
//! to capture. It flushes the transcript whenever the queue runs dry, so the file lags
//! what was forwarded by at most what is still queued.
//!
//! Shutdown has two steps, driven by [`Control`]: `Drain` closes the queue to new
//! frames and processes every frame already in it; `Abandon` (the drain took too
//! long, typically because the store hangs) stops feeding capture — even in the middle
//! of a write — and only writes the rest to the transcript, counting those frames as
//! unprocessed. Nothing that was queued is lost: it is in the store or in the
//! transcript, which `fanout import` can replay.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fanout_capture::{Capture, CaptureStats, CounterSnapshot};
use tokio::sync::{mpsc, watch};

use crate::metric_names;
use crate::ratelimit::RateLimit;
use crate::store::ResilientStore;
use crate::tap::{TapFrame, TapShared};
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
    pub frames: u64,
    pub unprocessed: u64,
    pub transcript_errors: u64,
    pub counters: CounterSnapshot,
    pub capture: CaptureStats,
}

pub(crate) struct Consumer {
    pub queue: mpsc::Receiver<TapFrame>,
    pub capture: Capture,
    pub transcript: Option<TranscriptWriter>,
    pub shared: Arc<TapShared>,
    pub store: Arc<ResilientStore>,
    /// How long the first frames may wait for the store's first open attempt.
    pub store_first_wait: Duration,
    pub warn_interval: Duration,
}

/// Failed transcript writes: each is counted in the report and the metric, and WARNed
/// at most once per interval (the last flush always, as nothing follows it).
struct TranscriptFailures {
    metric: metrics::Counter,
    warn: RateLimit,
}

impl TranscriptFailures {
    fn record(&self, report: &mut ConsumerReport, path: &Path, error: &io::Error, last: bool) {
        report.transcript_errors += 1;
        self.metric.increment(1);
        if last || self.warn.ready() {
            tracing::warn!(
                path = %path.display(),
                errors_so_far = report.transcript_errors,
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

impl Consumer {
    pub(crate) async fn run(mut self, mut control: watch::Receiver<Control>) -> ConsumerReport {
        let mut report = ConsumerReport::default();
        let failures = TranscriptFailures {
            metric: metrics::counter!(metric_names::TRANSCRIPT_ERRORS),
            warn: RateLimit::new(self.warn_interval),
        };
        let unprocessed = metrics::counter!(metric_names::FRAMES_UNPROCESSED);
        let mut control_open = true;
        let mut closing = false;
        let mut abandon = false;

        tokio::select! {
            () = self.store.first_attempt_done(self.store_first_wait) => {}
            () = abandoned(&mut control) => abandon = true,
        }

        loop {
            let frame = tokio::select! {
                biased;
                changed = control.changed(), if control_open && !abandon => {
                    let now = if changed.is_ok() { *control.borrow_and_update() } else {
                        // The proxy is gone without saying: finish what is queued.
                        control_open = false;
                        Control::Drain
                    };
                    if now != Control::Run && !closing {
                        closing = true;
                        self.queue.close();
                    }
                    abandon |= now == Control::Abandon;
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
            for frame in &batch {
                self.shared.budget.give_back(frame.line.len());
                report.frames += 1;
                if let Some(writer) = self.transcript.as_mut()
                    && let Err(error) =
                        writer.append(frame.observed_at, frame.direction, &frame.line)
                {
                    failures.record(&mut report, writer.path(), &error, false);
                }
            }
            if abandon {
                report.unprocessed += batch.len() as u64;
                unprocessed.increment(batch.len() as u64);
            } else {
                let lines: Vec<_> = batch
                    .iter()
                    .map(|f| (f.direction, f.line.as_slice(), f.observed_at))
                    .collect();
                tokio::select! {
                    biased;
                    () = self.capture.observe_batch(&lines) => {}
                    // Dropped mid-write: an uncommitted group commit rolls back; the
                    // whole batch is counted unprocessed and is in the transcript.
                    () = abandoned(&mut control) => {
                        abandon = true;
                        report.unprocessed += batch.len() as u64;
                        unprocessed.increment(batch.len() as u64);
                    }
                }
            }
            if self.queue.is_empty()
                && let Some(writer) = self.transcript.as_mut()
                && let Err(error) = writer.flush()
            {
                failures.record(&mut report, writer.path(), &error, false);
            }
        }
        if let Some(writer) = self.transcript.as_mut()
            && let Err(error) = writer.flush()
        {
            failures.record(&mut report, writer.path(), &error, true);
        }
        report.counters = self.capture.counters().snapshot();
        report.capture = self.capture.stats();
        report
    }
}
