//! The one-shot export (`fanout export otlp`): every span of a scope, in batches, each
//! batch tried again with backoff while the receiver is down or slow, up to a window.
//! It changes nothing in the store; sending twice sends the same ids, so a receiver
//! that keys spans by id (Phoenix, Jaeger, Tempo) keeps one copy of each.

use std::time::{Duration, Instant};

use fanout_store::{ExportScope, PriceTable, SqlStore};
use opentelemetry_sdk::trace::SpanData;
use serde::Serialize;

use crate::OtelError;
use crate::mapping::plan_session;
use crate::receiver::{Receiver, SendError};

/// How a batch the receiver did not take is tried again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The first pause.
    pub first: Duration,
    /// Pauses double up to this.
    pub max: Duration,
    /// A batch not taken within this long stops the export (the one-shot one; the
    /// continuous export never gives up).
    pub give_up_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            first: Duration::from_millis(250),
            max: Duration::from_secs(10),
            give_up_after: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// The pause after `pause`.
    pub fn next(&self, pause: Duration) -> Duration {
        (pause * 2).min(self.max)
    }
}

/// What an export did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExportSummary {
    /// The receiver (its endpoint, credentials redacted).
    pub receiver: String,
    /// Sessions read.
    pub sessions: u64,
    /// Traces sent: one per turn, and one per session with invocations of no known turn.
    pub traces: u64,
    /// Of those, turns.
    pub turns: u64,
    /// Spans the receiver took.
    pub spans_sent: u64,
    /// Of those, of rows that had not settled (or turns that had not ended).
    pub unsettled_spans: u64,
    /// Requests that failed and were tried again.
    pub failed_attempts: u64,
}

/// What an export reports as it goes.
#[derive(Debug)]
pub enum ExportProgress<'a> {
    /// The scope holds this many sessions.
    Planned {
        /// Sessions to read.
        sessions: usize,
    },
    /// A batch was taken; the figures so far.
    Sent(&'a ExportSummary),
    /// A batch was not taken and is tried again after `pause`.
    Retrying {
        /// Why it was not taken.
        error: &'a SendError,
        /// The pause before the next try.
        pause: Duration,
    },
}

/// An export that stopped, with what it had done by then.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct ExportFailed {
    /// The figures up to the stop.
    pub summary: ExportSummary,
    /// Why it stopped.
    #[source]
    pub error: OtelError,
}

/// Sends every span of `scope` (turns started since its `since`, of its task) to
/// `receiver`, `batch_size` spans a request.
pub async fn export_once(
    store: &SqlStore,
    scope: &ExportScope,
    prices: &PriceTable,
    receiver: &Receiver,
    batch_size: usize,
    retry: &RetryPolicy,
    progress: &mut dyn FnMut(ExportProgress<'_>),
) -> Result<ExportSummary, ExportFailed> {
    let mut summary = ExportSummary {
        receiver: receiver.name().to_owned(),
        ..ExportSummary::default()
    };
    match send_scope(
        store,
        scope,
        prices,
        receiver,
        batch_size.max(1),
        retry,
        progress,
        &mut summary,
    )
    .await
    {
        Ok(()) => Ok(summary),
        Err(error) => Err(ExportFailed { summary, error }),
    }
}

#[allow(clippy::too_many_arguments)]
async fn send_scope(
    store: &SqlStore,
    scope: &ExportScope,
    prices: &PriceTable,
    receiver: &Receiver,
    batch_size: usize,
    retry: &RetryPolicy,
    progress: &mut dyn FnMut(ExportProgress<'_>),
    summary: &mut ExportSummary,
) -> Result<(), OtelError> {
    let scope = ExportScope {
        pending_for: None,
        ..scope.clone()
    };
    let ids = store.export_session_ids(&scope).await?;
    progress(ExportProgress::Planned {
        sessions: ids.len(),
    });
    let mut batch: Vec<(SpanData, bool)> = Vec::with_capacity(batch_size);
    for id in ids {
        let Some(part) = store.export_session(&id, &scope).await? else {
            continue;
        };
        summary.sessions += 1;
        for plan in plan_session(&part, prices, scope.since) {
            summary.traces += 1;
            summary.turns += u64::from(plan.turn_id.is_some());
            for span in plan.spans {
                batch.push((span.to_span_data(receiver.scope()), span.unsettled));
                if batch.len() >= batch_size {
                    send_batch(
                        receiver,
                        std::mem::take(&mut batch),
                        retry,
                        progress,
                        summary,
                    )
                    .await?;
                }
            }
        }
    }
    if !batch.is_empty() {
        send_batch(receiver, batch, retry, progress, summary).await?;
    }
    Ok(())
}

async fn send_batch(
    receiver: &Receiver,
    batch: Vec<(SpanData, bool)>,
    retry: &RetryPolicy,
    progress: &mut dyn FnMut(ExportProgress<'_>),
    summary: &mut ExportSummary,
) -> Result<(), OtelError> {
    let unsettled = batch.iter().filter(|(_, u)| *u).count() as u64;
    let spans: Vec<SpanData> = batch.into_iter().map(|(s, _)| s).collect();
    let count = spans.len() as u64;
    let started = Instant::now();
    let mut pause = retry.first;
    loop {
        match receiver.send(spans.clone()).await {
            Ok(()) => {
                summary.spans_sent += count;
                summary.unsettled_spans += unsettled;
                progress(ExportProgress::Sent(summary));
                return Ok(());
            }
            Err(error @ SendError::Refused { .. }) => {
                return Err(OtelError::Refused {
                    receiver: receiver.name().to_owned(),
                    error,
                });
            }
            Err(error) => {
                summary.failed_attempts += 1;
                if started.elapsed() + pause > retry.give_up_after {
                    return Err(OtelError::Unreachable {
                        receiver: receiver.name().to_owned(),
                        waited_secs: started.elapsed().as_secs(),
                        last_error: error.to_string(),
                    });
                }
                progress(ExportProgress::Retrying {
                    error: &error,
                    pause,
                });
                tokio::time::sleep(pause).await;
                pause = retry.next(pause);
            }
        }
    }
}
