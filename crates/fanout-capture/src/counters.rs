//! The writer-health counters of AC-26, per writer and through the `metrics` facade.

use std::sync::atomic::{AtomicU64, Ordering};

use fanout_metrics::SUBAGENT_OUTCOMES;
use serde::Serialize;

/// The `metrics` counter every writer outcome moves, labelled `outcome`; its name and
/// label values are fanout-metrics' (its `/debug/vars` always lists them).
pub use fanout_metrics::SUBAGENT_CONTEXT_METRIC;
/// Lines offered to capture (any content, either direction).
pub const FRAMES_SEEN_METRIC: &str = "fanout_capture_frames_total";
/// Lines that were not JSON-RPC (still forwarded by the proxy, never recorded).
pub const FRAMES_NOT_UNDERSTOOD_METRIC: &str = "fanout_capture_frames_not_understood_total";
/// Frames a dialect could not place (a lone state for a child never announced, a cycle
/// going idle twice, a hand-back from an unknown session, a status for an unknown call:
/// `fanout_acp::IgnoredReason::is_anomaly`), labelled `reason`. No row is invented.
pub const DIALECT_ANOMALIES_METRIC: &str = "fanout_capture_dialect_anomalies_total";
/// Lines that would have been recorded but had no task id (DESIGN 3.2).
pub const FRAMES_WITHOUT_TASK_METRIC: &str = "fanout_capture_frames_without_task_total";
/// Failed session, turn and message writes, labelled `table`. Subagent write failures
/// are the `failed` outcome of [`SUBAGENT_CONTEXT_METRIC`].
pub const STORE_ERRORS_METRIC: &str = "fanout_capture_store_errors_total";

/// One counter of AC-26. The label value of [`SUBAGENT_CONTEXT_METRIC`] is [`Outcome::as_str`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A subagent frame reached the writer.
    Attempted,
    /// Its row was written.
    Persisted,
    /// It had no session, task or tool_call_id, so no row (AC-2).
    SkippedNoIdentity,
    /// It carried a negative metric, stored as NULL (AC-9; once per frame).
    AnomalousValue,
    /// Its write failed (AC-27).
    Failed,
    /// It was written without an execution id, as `'unknown'` (AC-31).
    UnknownExecution,
}

impl Outcome {
    /// Every outcome, in declaration order (`Outcome as usize` indexes it).
    pub const ALL: [Outcome; 6] = [
        Outcome::Attempted,
        Outcome::Persisted,
        Outcome::SkippedNoIdentity,
        Outcome::AnomalousValue,
        Outcome::Failed,
        Outcome::UnknownExecution,
    ];

    /// The `outcome` label value: [`SUBAGENT_OUTCOMES`] lists them in the same order.
    pub fn as_str(self) -> &'static str {
        SUBAGENT_OUTCOMES[self as usize]
    }
}

/// One writer's own counters. Every move also goes to the process-wide `metrics`
/// recorder (if one is installed), so tests read these and operators read that.
///
/// Invariant (AC-26): `attempted = skipped_no_identity + persisted + failed`;
/// `anomalous_value` and `unknown_execution` qualify frames and overlap the others.
#[derive(Debug)]
pub struct WriterCounters {
    /// By `Outcome as usize` (the order of [`Outcome::ALL`]).
    cells: [AtomicU64; 6],
    /// The recorder's handles, looked up once rather than on every frame.
    facade: [metrics::Counter; 6],
}

impl Default for WriterCounters {
    fn default() -> Self {
        Self {
            cells: Default::default(),
            facade: Outcome::ALL.map(
                |outcome| metrics::counter!(SUBAGENT_CONTEXT_METRIC, "outcome" => outcome.as_str()),
            ),
        }
    }
}

/// A consistent-enough copy of [`WriterCounters`] (each field read once, relaxed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CounterSnapshot {
    /// [`Outcome::Attempted`].
    pub attempted: u64,
    /// [`Outcome::Persisted`].
    pub persisted: u64,
    /// [`Outcome::SkippedNoIdentity`].
    pub skipped_no_identity: u64,
    /// [`Outcome::AnomalousValue`].
    pub anomalous_value: u64,
    /// [`Outcome::Failed`].
    pub failed: u64,
    /// [`Outcome::UnknownExecution`].
    pub unknown_execution: u64,
}

impl WriterCounters {
    /// Counters at zero, bound to the installed `metrics` recorder (if any).
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn bump(&self, outcome: Outcome) {
        self.cells[outcome as usize].fetch_add(1, Ordering::Relaxed);
        self.facade[outcome as usize].increment(1);
    }

    /// The counts now.
    pub fn snapshot(&self) -> CounterSnapshot {
        let read = |outcome: Outcome| self.cells[outcome as usize].load(Ordering::Relaxed);
        CounterSnapshot {
            attempted: read(Outcome::Attempted),
            persisted: read(Outcome::Persisted),
            skipped_no_identity: read(Outcome::SkippedNoIdentity),
            anomalous_value: read(Outcome::AnomalousValue),
            failed: read(Outcome::Failed),
            unknown_execution: read(Outcome::UnknownExecution),
        }
    }
}

impl CounterSnapshot {
    /// Field-wise sum, for totals over several writers (one per imported file).
    pub fn add(&mut self, other: &CounterSnapshot) {
        self.attempted += other.attempted;
        self.persisted += other.persisted;
        self.skipped_no_identity += other.skipped_no_identity;
        self.anomalous_value += other.anomalous_value;
        self.failed += other.failed;
        self.unknown_execution += other.unknown_execution;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The label each outcome moves is the name the writer's own snapshot gives it, so
    /// `/debug/vars` and the writer's counters speak of the same thing.
    #[test]
    fn each_outcome_moves_the_series_of_its_own_name() {
        let registry = fanout_metrics::Registry::new();
        let counters = metrics::with_local_recorder(&registry, WriterCounters::new);
        for (times, outcome) in (1..).zip(Outcome::ALL) {
            for _ in 0..times {
                counters.bump(outcome);
            }
        }
        let own = serde_json::to_value(counters.snapshot()).unwrap();
        let own = own.as_object().unwrap();
        assert_eq!(own.len(), Outcome::ALL.len());
        let facade = registry.snapshot();
        for (name, value) in own {
            assert_eq!(
                facade.counter(SUBAGENT_CONTEXT_METRIC, &[("outcome", name)]),
                value.as_u64().unwrap(),
                "{name}"
            );
        }
    }
}
