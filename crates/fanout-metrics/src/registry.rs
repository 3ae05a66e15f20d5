//! The live registry: a small [`metrics::Recorder`] of atomic cells keyed by name and
//! labels, read as a [`Snapshot`].
//!
//! Why our own: the exporter crates bring an HTTP stack, histograms with buckets and
//! upkeep threads; fanout needs counters, a few gauges and one page of text.
//! Histograms are kept as summaries (count and sum), which is all anyone reads here.
//!
//! Handles are registered once and then touched lock-free: callers on a hot path keep
//! the [`metrics::Counter`] they got instead of looking the name up per event.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

use crate::snapshot::{Series, SeriesValue, Snapshot};

/// A histogram kept as count and sum.
#[derive(Debug, Default)]
struct SummaryCell {
    count: AtomicU64,
    sum_bits: AtomicU64,
}

impl HistogramFn for SummaryCell {
    fn record(&self, value: f64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut current = self.sum_bits.load(Ordering::Relaxed);
        loop {
            let next = (f64::from_bits(current) + value).to_bits();
            match self.sum_bits.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(seen) => current = seen,
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Cell {
    Counter(Arc<AtomicU64>),
    /// f64 bits, as [`metrics`] stores gauges in an `AtomicU64`.
    Gauge(Arc<AtomicU64>),
    Summary(Arc<SummaryCell>),
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SeriesKey {
    name: String,
    labels: BTreeMap<String, String>,
}

impl SeriesKey {
    fn of(key: &Key) -> Self {
        SeriesKey {
            name: key.name().to_owned(),
            labels: key
                .labels()
                .map(|label| (label.key().to_owned(), label.value().to_owned()))
                .collect(),
        }
    }
}

#[derive(Debug, Default)]
struct Cells {
    series: RwLock<BTreeMap<SeriesKey, Cell>>,
    help: RwLock<BTreeMap<String, String>>,
}

/// The registry. Clones share the same cells; install one with
/// [`Registry::install_global`] and read it with [`Registry::snapshot`].
#[derive(Clone, Debug, Default)]
pub struct Registry {
    cells: Arc<Cells>,
}

impl Registry {
    /// An empty registry (not installed anywhere yet).
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes this registry the process-wide `metrics` recorder. Fails when one is
    /// already installed (the earlier one stays).
    pub fn install_global(&self) -> Result<(), metrics::SetRecorderError<Registry>> {
        metrics::set_global_recorder(self.clone())
    }

    /// Every series with its current value, ordered by name then labels.
    pub fn snapshot(&self) -> Snapshot {
        let series = self
            .cells
            .series
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(key, cell)| Series {
                name: key.name.clone(),
                labels: key.labels.clone(),
                value: match cell {
                    Cell::Counter(value) => SeriesValue::Counter {
                        value: value.load(Ordering::Relaxed),
                    },
                    Cell::Gauge(bits) => SeriesValue::Gauge {
                        value: f64::from_bits(bits.load(Ordering::Relaxed)),
                    },
                    Cell::Summary(summary) => SeriesValue::Summary {
                        count: summary.count.load(Ordering::Relaxed),
                        sum: f64::from_bits(summary.sum_bits.load(Ordering::Relaxed)),
                    },
                },
            })
            .collect();
        let help = self
            .cells
            .help
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Snapshot { series, help }
    }

    fn describe(&self, key: KeyName, description: SharedString) {
        self.cells
            .help
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.as_str().to_owned(), description.into_owned());
    }

    /// The cell of `key`, created by `make` when new. A name registered before with
    /// another kind keeps its first kind: the caller gets `None` (and a no-op handle).
    fn cell(&self, key: &Key, make: impl FnOnce() -> Cell) -> Cell {
        let key = SeriesKey::of(key);
        if let Some(cell) = self
            .cells
            .series
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return cell.clone();
        }
        self.cells
            .series
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_insert_with(make)
            .clone()
    }
}

impl Recorder for Registry {
    fn describe_counter(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.describe(key, description);
    }

    fn describe_gauge(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.describe(key, description);
    }

    fn describe_histogram(&self, key: KeyName, _unit: Option<Unit>, description: SharedString) {
        self.describe(key, description);
    }

    fn register_counter(&self, key: &Key, _metadata: &Metadata<'_>) -> Counter {
        match self.cell(key, || Cell::Counter(Arc::default())) {
            Cell::Counter(cell) => Counter::from_arc(cell),
            _ => Counter::noop(),
        }
    }

    fn register_gauge(&self, key: &Key, _metadata: &Metadata<'_>) -> Gauge {
        match self.cell(key, || Cell::Gauge(Arc::default())) {
            Cell::Gauge(cell) => Gauge::from_arc(cell),
            _ => Gauge::noop(),
        }
    }

    fn register_histogram(&self, key: &Key, _metadata: &Metadata<'_>) -> Histogram {
        match self.cell(key, || Cell::Summary(Arc::default())) {
            Cell::Summary(cell) => Histogram::from_arc(cell),
            _ => Histogram::noop(),
        }
    }
}
