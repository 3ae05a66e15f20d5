//! The continuous export (`--otlp-endpoint`, DESIGN 12): a task of its own that reads
//! the store, sends each span once it is ready ([`crate::PlannedSpan::ready`]: a turn
//! when it ends, an invocation when it settles, an unsettled one when its turn ends),
//! and remembers in the store (`otlp_exports`) what the receiver took, so a restart sends
//! nothing twice.
//!
//! Whoever runs it is never slowed: it has its own store connection (opened in the
//! background and tried again while the store is away) and reads committed rows, so
//! capture, forwarding or a watcher only spawn it, may [`ContinuousExporter::nudge`] it
//! (a non-blocking wake-up) and stop it. A receiver that is down or slow makes spans
//! wait, tried again with backoff; at most `max_waiting` wait in memory, the rest wait
//! in the store (read once there is room), and the counters say how many wait and how
//! many the receiver refused (dropped: not tried again by this run).

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fanout_store::{ExportKey, ExportMark, ExportScope, PriceTable, SqlStore, Timestamp};
use serde::Serialize;
use tokio::sync::{Notify, watch};

use crate::OtelError;
use crate::export::RetryPolicy;
use crate::mapping::{PlannedSpan, plan_session};
use crate::receiver::{Receiver, ReceiverConfig, SendError};

/// How the continuous export runs.
#[derive(Clone, Debug)]
pub struct ContinuousConfig {
    /// The store to read and to remember exports in (`sqlite://…`, `postgres://…`).
    pub database_url: String,
    /// Where the spans go.
    pub receiver: ReceiverConfig,
    /// The prices for `fanout.cost_usd`.
    pub prices: PriceTable,
    /// How often the store is looked at (sooner when nudged).
    pub poll: Duration,
    /// The backoff while the receiver does not take a batch (`give_up_after` unused).
    pub retry: RetryPolicy,
    /// Spans held in memory at most; the rest wait in the store.
    pub max_waiting: usize,
    /// Spans per request.
    pub batch_size: usize,
    /// How often a store that cannot be opened is tried again.
    pub store_retry: Duration,
}

impl ContinuousConfig {
    /// Defaults: a look every second, backoff from 0.5 s to 30 s, 4096 spans in memory,
    /// 256 a request, the store tried every 5 s.
    pub fn new(database_url: String, receiver: ReceiverConfig, prices: PriceTable) -> Self {
        ContinuousConfig {
            database_url,
            receiver,
            prices,
            poll: Duration::from_secs(1),
            retry: RetryPolicy {
                first: Duration::from_millis(500),
                max: Duration::from_secs(30),
                give_up_after: Duration::MAX,
            },
            max_waiting: 4096,
            batch_size: 256,
            store_retry: Duration::from_secs(5),
        }
    }
}

/// The export's counters, as they stand.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExportCounters {
    /// Spans the receiver took (and the store remembers).
    pub sent: u64,
    /// Spans ready and not yet taken: held in memory or waiting in the store.
    pub waiting: u64,
    /// Spans the receiver refused (a 4xx other than 408/429); not tried again by this
    /// run, not remembered, so the next run tries them again.
    pub dropped: u64,
    /// Requests that failed and were tried again.
    pub failed_attempts: u64,
    /// Whether the store is open.
    pub store_connected: bool,
}

#[derive(Default)]
struct Counters {
    sent: AtomicU64,
    waiting: AtomicU64,
    dropped: AtomicU64,
    failed_attempts: AtomicU64,
    store_connected: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> ExportCounters {
        ExportCounters {
            sent: self.sent.load(Ordering::Relaxed),
            waiting: self.waiting.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            failed_attempts: self.failed_attempts.load(Ordering::Relaxed),
            store_connected: self.store_connected.load(Ordering::Relaxed) == 1,
        }
    }
}

/// A running continuous export; see the module doc.
pub struct ContinuousExporter {
    task: tokio::task::JoinHandle<()>,
    stop: watch::Sender<bool>,
    wake: Arc<Notify>,
    counters: Arc<Counters>,
}

impl ContinuousExporter {
    /// Starts it on the current tokio runtime. Fails only on an unusable endpoint; a
    /// store or receiver that is away is waited for.
    pub fn spawn(config: ContinuousConfig) -> Result<ContinuousExporter, OtelError> {
        let receiver = Receiver::new(&config.receiver)?;
        let (stop, stopping) = watch::channel(false);
        let wake = Arc::new(Notify::new());
        let counters = Arc::new(Counters::default());
        let worker = Worker {
            config,
            receiver,
            counters: Arc::clone(&counters),
            wake: Arc::clone(&wake),
            stopping,
            queue: VecDeque::new(),
            queued: HashSet::new(),
            refused: HashSet::new(),
            unwritten_marks: Vec::new(),
            deferred: 0,
        };
        let task = tokio::spawn(worker.run());
        Ok(ContinuousExporter {
            task,
            stop,
            wake,
            counters,
        })
    }

    /// The counters now.
    pub fn counters(&self) -> ExportCounters {
        self.counters.snapshot()
    }

    /// Something was written: look at the store now rather than at the next poll.
    /// Never blocks.
    pub fn nudge(&self) {
        self.wake.notify_one();
    }

    /// Sends what is ready for up to `drain`, then stops; what is left waits in the
    /// store for the next run. Returns the counters at the stop.
    pub async fn stop(self, drain: Duration) -> ExportCounters {
        let _ = self.stop.send(true);
        self.wake.notify_one();
        let mut task = self.task;
        if tokio::time::timeout(drain, &mut task).await.is_err() {
            task.abort();
            let _ = task.await;
        }
        self.counters.snapshot()
    }
}

type SpanKey = (String, ExportKey);

struct Worker {
    config: ContinuousConfig,
    receiver: Receiver,
    counters: Arc<Counters>,
    wake: Arc<Notify>,
    stopping: watch::Receiver<bool>,
    /// Ready spans not yet taken, oldest first, with their session.
    queue: VecDeque<(String, PlannedSpan)>,
    queued: HashSet<SpanKey>,
    /// Refused by the receiver: not tried again by this run.
    refused: HashSet<SpanKey>,
    /// Taken by the receiver, not yet written to the store.
    unwritten_marks: Vec<ExportMark>,
    /// Ready spans left in the store at the last read (no room in memory).
    deferred: u64,
}

impl Worker {
    async fn run(mut self) {
        let Some(store) = self.open_store().await else {
            return;
        };
        let mut marker: Option<String> = None;
        loop {
            let stopping = *self.stopping.borrow();
            let changed = match store.change_marker().await {
                Ok(now) => {
                    let changed = marker.as_ref() != Some(&now);
                    marker = Some(now);
                    changed
                }
                Err(_) => true,
            };
            if (changed || self.deferred > 0 || stopping)
                && let Err(err) = self.refill(&store).await
            {
                tracing::warn!(error = %err, "OTLP export: reading the store failed");
            }
            let delivered = self.deliver(&store).await;
            self.write_marks(&store).await;
            if stopping && (self.queue.is_empty() || !delivered) {
                break;
            }
            if delivered {
                self.pause(self.config.poll).await;
            }
        }
        store.close().await;
    }

    async fn open_store(&mut self) -> Option<SqlStore> {
        loop {
            match SqlStore::open(&self.config.database_url).await {
                Ok(store) => {
                    self.counters.store_connected.store(1, Ordering::Relaxed);
                    return Some(store);
                }
                Err(err) => {
                    tracing::warn!(error = %err, "OTLP export: the store is not available yet");
                    if *self.stopping.borrow() {
                        return None;
                    }
                    self.pause(self.config.store_retry).await;
                }
            }
        }
    }

    /// Waits `pause`, or less when nudged or stopped.
    async fn pause(&mut self, pause: Duration) {
        if *self.stopping.borrow() {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = self.wake.notified() => {}
            _ = self.stopping.changed() => {}
        }
    }

    /// Reads the ready spans the receiver has not taken into the queue, up to its bound.
    async fn refill(&mut self, store: &SqlStore) -> Result<(), OtelError> {
        let scope = ExportScope {
            pending_for: Some(self.receiver.name().to_owned()),
            ..ExportScope::default()
        };
        let mut deferred = 0;
        for id in store.export_session_ids(&scope).await? {
            let Some(part) = store.export_session(&id, &scope).await? else {
                continue;
            };
            for span in plan_session(&part, &self.config.prices, None)
                .into_iter()
                .flat_map(|plan| plan.spans)
            {
                let key = (id.clone(), span.key.clone());
                if !span.ready
                    || part.exported.contains(&span.key)
                    || self.queued.contains(&key)
                    || self.refused.contains(&key)
                {
                    continue;
                }
                if self.queue.len() >= self.config.max_waiting {
                    deferred += 1;
                    continue;
                }
                self.queued.insert(key);
                self.queue.push_back((id.clone(), span));
            }
        }
        self.deferred = deferred;
        self.update_waiting();
        Ok(())
    }

    fn update_waiting(&self) {
        let waiting = self.queue.len() as u64 + self.deferred;
        self.counters.waiting.store(waiting, Ordering::Relaxed);
    }

    /// Sends the queue batch by batch; on a failure waits with backoff and tries again
    /// (until stopped). Returns whether everything queued was delivered or dropped.
    async fn deliver(&mut self, store: &SqlStore) -> bool {
        let mut pause = self.config.retry.first;
        while !self.queue.is_empty() {
            let take = self.queue.len().min(self.config.batch_size.max(1));
            let batch: Vec<(String, PlannedSpan)> = self.queue.drain(..take).collect();
            let data = batch
                .iter()
                .map(|(_, span)| span.to_span_data(self.receiver.scope()))
                .collect();
            match self.receiver.send(data).await {
                Ok(()) => {
                    let now = Timestamp::now();
                    for (session, span) in &batch {
                        self.queued.remove(&(session.clone(), span.key.clone()));
                        let mark = span.mark(self.receiver.name(), session, now);
                        self.unwritten_marks.push(mark);
                    }
                    self.counters
                        .sent
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                    self.write_marks(store).await;
                    pause = self.config.retry.first;
                }
                Err(error @ SendError::Refused { .. }) => {
                    tracing::warn!(spans = batch.len(), %error, "OTLP export: spans dropped");
                    self.counters
                        .dropped
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                    for (session, span) in batch {
                        let key = (session, span.key);
                        self.queued.remove(&key);
                        self.refused.insert(key);
                    }
                }
                Err(error) => {
                    self.counters
                        .failed_attempts
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(%error, ?pause, "OTLP export: the receiver did not take a batch");
                    for item in batch.into_iter().rev() {
                        self.queue.push_front(item);
                    }
                    self.update_waiting();
                    if *self.stopping.borrow() {
                        return false;
                    }
                    self.pause(pause).await;
                    pause = self.config.retry.next(pause);
                    if *self.stopping.borrow() {
                        return false;
                    }
                }
            }
            self.update_waiting();
        }
        true
    }

    /// Remembers what was taken; a store that refuses keeps them for the next try (a
    /// restart before that sends them again, under the same ids).
    async fn write_marks(&mut self, store: &SqlStore) {
        if self.unwritten_marks.is_empty() {
            return;
        }
        match store.record_exports(&self.unwritten_marks).await {
            Ok(_) => self.unwritten_marks.clear(),
            Err(err) => {
                tracing::warn!(error = %err, "OTLP export: remembering the sent spans failed");
            }
        }
    }
}
