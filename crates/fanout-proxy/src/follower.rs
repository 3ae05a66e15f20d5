//! The capture follower: the one task that feeds capture, reading what the pumps saw
//! from the transcript (or, without one, from the chunk queue) through
//! [`fanout_capture::transcript::Applier`].
//!
//! With a transcript, capture never loses a line to a slow or missing store: it reads
//! the file behind the recorder, so when the store is down, locked or slow it just
//! falls behind, holding the one batch the store could not take (its writes and mark,
//! [`fanout_capture::Capture::apply_batch`]) and trying it again until the store is
//! back, then reading on. Under a flood (the transcript growing faster than
//! [`DEFER_BYTES`] ahead of capture while the pipes are busy) it steps aside, so its
//! parsing never takes the CPU from forwarding, and catches up once the pipes are
//! quiet or the run ends. What it has not applied when the run ends (the drain ran out
//! of time) is left to the next proxy or import on the same store: the store's mark
//! says where to resume, and the transcript's hint says it is pending.
//!
//! Without a transcript, it takes the queue's chunks directly; while the store cannot
//! take a batch it takes nothing, the queue fills and the pumps drop (counted).
//!
//! Shutdown is driven by [`Control`]: `Drain` (the queue is closed; finish what there
//! is), then `Abandon` (stop now, even mid-write: an unfinished transaction rolls back,
//! with its mark, so nothing is half-applied).

use std::collections::VecDeque;
use std::fs::File;
use std::sync::Arc;
use std::time::Duration;

use fanout_acp::Direction;
use fanout_capture::transcript::{
    Applier, ApplyStats, DEFAULT_BATCH_LINES, ReadError, RecordReader,
};
use fanout_capture::{CaptureStats, CounterSnapshot};
use tokio::sync::watch;

use crate::metric_names;
use crate::queue::{ChunkQueue, Entry};
use crate::recorder::Progress;
use crate::store::ResilientStore;

/// How far capture may fall behind the transcript while the pipes are busy before it
/// steps aside until they are quiet.
pub(crate) const DEFER_BYTES: u64 = 1024 * 1024;
/// How long the pipes must be quiet (no transcript flush) for a deferred capture to
/// go on, and how long it waits before looking again.
const DEFER_QUIET: Duration = Duration::from_millis(20);
/// The first and the longest pause between two attempts at a held batch.
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Control {
    Run,
    Drain,
    Abandon,
}

/// Where the follower reads.
pub(crate) enum Source {
    /// The transcript, behind the recorder. `file` holds the transcript's lock.
    Transcript {
        reader: RecordReader<File>,
        progress: Arc<Progress>,
    },
    /// The pumps' queue (no transcript).
    Queue {
        queue: Arc<ChunkQueue>,
        entries: VecDeque<Entry>,
        /// Entries taken, as the position of the next one.
        position: u64,
    },
}

/// What the follower did.
#[derive(Debug, Default)]
pub(crate) struct FollowerReport {
    /// Everything the source had is in the store (nothing held, nothing left).
    pub complete: bool,
    /// Lines recorded but not in the store when it stopped (an estimate: the
    /// transcript's newlines not yet applied).
    pub lines_left: u64,
    pub capture: CaptureStats,
    pub counters: CounterSnapshot,
}

pub(crate) struct Follower {
    pub applier: Applier,
    pub source: Source,
    pub store: Arc<ResilientStore>,
    /// How long the first lines may wait for the store's first open attempt.
    pub store_first_wait: Duration,
}

/// Resolves when `control` says `Abandon`; never when its sender is gone.
async fn abandoned(control: &mut watch::Receiver<Control>) {
    if control.wait_for(|c| *c == Control::Abandon).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// What [`Follower::next`] found.
enum Next {
    /// A record was pushed to the applier.
    Pushed,
    /// Nothing more right now.
    Waiting,
    /// Nothing more ever.
    Done,
}

impl Follower {
    pub(crate) async fn run(mut self, mut control: watch::Receiver<Control>) -> FollowerReport {
        let lines_metric = [Direction::ClientToAgent, Direction::AgentToClient]
            .map(|d| metrics::counter!(metric_names::FRAMES, "direction" => d.as_str()));
        let oversized_metric = [Direction::ClientToAgent, Direction::AgentToClient]
            .map(|d| metrics::counter!(metric_names::FRAMES_OVERSIZED, "direction" => d.as_str()));
        let backlog = metrics::gauge!(metric_names::CAPTURE_BACKLOG);
        let mut reported = ApplyStats::default();
        let mut abandon = false;
        tokio::select! {
            () = self.store.first_attempt_done(self.store_first_wait) => {}
            () = abandoned(&mut control) => abandon = true,
        }
        let mut pause = RETRY_FIRST;
        let mut done = false;
        while !abandon {
            if self.applier.is_held() {
                tokio::select! {
                    biased;
                    () = abandoned(&mut control) => { abandon = true; continue; }
                    () = tokio::time::sleep(pause) => {}
                }
                pause = match self.retry(&mut control).await {
                    Some(true) => RETRY_FIRST,
                    Some(false) => (pause * 2).min(RETRY_MAX),
                    None => {
                        abandon = true;
                        continue;
                    }
                };
                continue;
            }
            if self.should_defer(*control.borrow() == Control::Run) {
                backlog.set(self.backlog() as f64);
                tokio::select! {
                    biased;
                    () = abandoned(&mut control) => abandon = true,
                    () = tokio::time::sleep(DEFER_QUIET) => {}
                }
                continue;
            }
            let next = match self.next().await {
                Ok(next) => next,
                Err(error) => {
                    tracing::warn!(
                        "cannot read the transcript back for capture ({error}); capture stops here, the rest is left for catch-up"
                    );
                    break;
                }
            };
            self.report_metrics(&mut reported, &lines_metric, &oversized_metric);
            match next {
                Next::Pushed if self.applier.queued_lines() < DEFAULT_BATCH_LINES => continue,
                Next::Pushed => {}
                Next::Waiting | Next::Done => {}
            }
            if self.commit(&mut control).await.is_none() {
                abandon = true;
                continue;
            }
            match next {
                Next::Done if !self.applier.is_held() => {
                    done = true;
                    break;
                }
                Next::Waiting if !self.applier.is_held() => {
                    backlog.set(self.backlog() as f64);
                    if self.wait_for_more(&mut control).await.is_none() {
                        abandon = true;
                    }
                }
                _ => {}
            }
        }
        backlog.set(self.backlog() as f64);
        let stats = self.applier.stats();
        FollowerReport {
            complete: done,
            lines_left: self.lines_left(&stats),
            capture: self.applier.capture().stats(),
            counters: self.applier.capture().counters().snapshot(),
        }
    }

    /// Commits the queued lines; `None` when abandoned meanwhile.
    async fn commit(&mut self, control: &mut watch::Receiver<Control>) -> Option<()> {
        tokio::select! {
            biased;
            result = self.applier.commit() => {
                if let Err(held) = result {
                    tracing::debug!("{held}; capture waits for the store");
                }
                Some(())
            }
            () = abandoned(control) => None,
        }
    }

    /// One more attempt at the held batch: whether it went in; `None` when abandoned.
    async fn retry(&mut self, control: &mut watch::Receiver<Control>) -> Option<bool> {
        tokio::select! {
            biased;
            result = self.applier.retry() => Some(result.is_ok()),
            () = abandoned(control) => None,
        }
    }

    /// Takes the next record from the source into the applier.
    async fn next(&mut self) -> Result<Next, ReadError> {
        match &mut self.source {
            Source::Transcript { reader, progress } => {
                // Read before looking at the file: once finished, a read that finds
                // nothing means there is nothing more.
                let finished = progress.is_finished();
                match reader.next_record()? {
                    Some((record, end)) => {
                        self.applier.push(&record, end);
                        Ok(Next::Pushed)
                    }
                    None if finished => Ok(Next::Done),
                    None => Ok(Next::Waiting),
                }
            }
            Source::Queue {
                queue,
                entries,
                position,
            } => {
                if entries.is_empty() {
                    match queue.try_take(entries) {
                        Some(true) => {}
                        Some(false) => return Ok(Next::Done),
                        None => return Ok(Next::Waiting),
                    }
                }
                if let Some(entry) = entries.pop_front() {
                    *position += 1;
                    self.applier.push(&entry.record(), *position);
                }
                Ok(Next::Pushed)
            }
        }
    }

    /// Waits until the source may have more; `None` when abandoned.
    async fn wait_for_more(&mut self, control: &mut watch::Receiver<Control>) -> Option<()> {
        match &mut self.source {
            Source::Transcript { progress, .. } => {
                let progress = Arc::clone(progress);
                let more = progress.notify.notified();
                if progress.written() > self.position() || progress.is_finished() {
                    return Some(());
                }
                tokio::select! {
                    biased;
                    () = abandoned(control) => None,
                    () = more => Some(()),
                }
            }
            Source::Queue { queue, entries, .. } => {
                let queue = Arc::clone(queue);
                tokio::select! {
                    biased;
                    () = abandoned(control) => None,
                    _ = queue.take(entries) => Some(()),
                }
            }
        }
    }

    /// Under a flood, capture waits: far behind the transcript while the pipes are busy
    /// (never once the run is draining, nor without a transcript).
    fn should_defer(&self, running: bool) -> bool {
        match &self.source {
            Source::Transcript { progress, .. } => {
                running && self.backlog() > DEFER_BYTES && progress.busy_within(DEFER_QUIET)
            }
            Source::Queue { .. } => false,
        }
    }

    /// Where the follower is in its source.
    fn position(&self) -> u64 {
        match &self.source {
            Source::Transcript { reader, .. } => reader.offset(),
            Source::Queue { position, .. } => *position,
        }
    }

    /// Transcript bytes not read yet.
    fn backlog(&self) -> u64 {
        match &self.source {
            Source::Transcript { progress, reader } => {
                progress.written().saturating_sub(reader.offset())
            }
            Source::Queue { .. } => 0,
        }
    }

    fn lines_left(&self, stats: &ApplyStats) -> u64 {
        let taken = stats.applied + stats.oversized.iter().sum::<u64>();
        match &self.source {
            Source::Transcript { progress, .. } => progress.lines().saturating_sub(taken),
            Source::Queue { queue, entries, .. } => {
                let queued: u64 = entries
                    .iter()
                    .map(|e| match e {
                        Entry::Data { bytes, .. } => crate::queue::count_lines(bytes),
                        _ => 0,
                    })
                    .sum();
                queue.queued_lines() + queued + stats.held + self.applier.queued_lines() as u64
            }
        }
    }

    /// Lines framed (without a transcript the recorder does not count them).
    fn report_metrics(
        &self,
        reported: &mut ApplyStats,
        lines: &[metrics::Counter; 2],
        oversized: &[metrics::Counter; 2],
    ) {
        let now = self.applier.stats();
        for i in 0..2 {
            if matches!(self.source, Source::Queue { .. }) {
                lines[i].increment(now.lines[i] - reported.lines[i]);
            }
            oversized[i].increment(now.oversized[i] - reported.oversized[i]);
        }
        *reported = now;
    }
}
