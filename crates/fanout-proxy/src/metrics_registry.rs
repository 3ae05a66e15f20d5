//! The live metrics registry: a small [`metrics::Recorder`] of atomic cells keyed by
//! name and labels, and the two renderings fanout serves: Prometheus text
//! ([`render_prometheus`]) and an expvar-style JSON document ([`render_expvar`]).
//!
//! Why our own: the exporter crates bring an HTTP stack, histograms with buckets and
//! upkeep threads; fanout needs counters, a few gauges and one page of text.
//! Histograms are kept as summaries (count and sum), which is all anyone reads here.
//!
//! Handles are registered once and then touched lock-free: callers on a hot path keep
//! the [`metrics::Counter`] they got instead of looking the name up per event.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use serde::{Deserialize, Serialize};

use fanout_capture::Outcome;
pub use fanout_capture::SUBAGENT_CONTEXT_METRIC;

/// The six outcomes of [`SUBAGENT_CONTEXT_METRIC`] (AC-26), always present in
/// `/debug/vars` (0 when never moved).
pub fn subagent_outcomes() -> [&'static str; 6] {
    Outcome::ALL.map(Outcome::as_str)
}
/// The expvar variable that carries the AC-26 map.
const SUBAGENT_EXPVAR: &str = "subagent_context_total";

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

/// A point-in-time copy of a registry (or a sum of several, see [`Snapshot::add`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub series: Vec<Series>,
    /// Help text by metric name.
    #[serde(default)]
    pub help: BTreeMap<String, String>,
}

/// One time series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub value: SeriesValue,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SeriesValue {
    Counter { value: u64 },
    Gauge { value: f64 },
    Summary { count: u64, sum: f64 },
}

impl Snapshot {
    /// Adds `other` series by series (same name and labels): counters and summaries
    /// add up; gauges add up too when `with_gauges` (a sum over live processes), and
    /// are left out otherwise (a finished process has no current value).
    pub fn add(&mut self, other: &Snapshot, with_gauges: bool) {
        let mut index: BTreeMap<(String, BTreeMap<String, String>), usize> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| ((s.name.clone(), s.labels.clone()), i))
            .collect();
        for series in &other.series {
            if matches!(series.value, SeriesValue::Gauge { .. }) && !with_gauges {
                continue;
            }
            let key = (series.name.clone(), series.labels.clone());
            match index.get(&key) {
                Some(&i) => {
                    let mine = &mut self.series[i].value;
                    *mine = match (*mine, series.value) {
                        (SeriesValue::Counter { value: a }, SeriesValue::Counter { value: b }) => {
                            SeriesValue::Counter {
                                value: a.saturating_add(b),
                            }
                        }
                        (SeriesValue::Gauge { value: a }, SeriesValue::Gauge { value: b }) => {
                            SeriesValue::Gauge { value: a + b }
                        }
                        (
                            SeriesValue::Summary { count: a, sum: x },
                            SeriesValue::Summary { count: b, sum: y },
                        ) => SeriesValue::Summary {
                            count: a.saturating_add(b),
                            sum: x + y,
                        },
                        // Kinds disagree (two fanout versions): keep what we had.
                        (kept, _) => kept,
                    };
                }
                None => {
                    index.insert(key, self.series.len());
                    self.series.push(series.clone());
                }
            }
        }
        for (name, text) in &other.help {
            self.help
                .entry(name.clone())
                .or_insert_with(|| text.clone());
        }
        self.series
            .sort_by(|a, b| (&a.name, &a.labels).cmp(&(&b.name, &b.labels)));
    }

    /// Sets (or adds) one gauge series.
    pub fn set_gauge(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        match self
            .series
            .iter_mut()
            .find(|s| s.name == name && s.labels == labels)
        {
            Some(series) => series.value = SeriesValue::Gauge { value },
            None => {
                self.series.push(Series {
                    name: name.to_owned(),
                    labels,
                    value: SeriesValue::Gauge { value },
                });
                self.series
                    .sort_by(|a, b| (&a.name, &a.labels).cmp(&(&b.name, &b.labels)));
            }
        }
    }

    /// The value of a counter series, 0 when absent.
    pub fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.series
            .iter()
            .find(|s| {
                s.name == name
                    && s.labels.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map_or(0, |s| match s.value {
                SeriesValue::Counter { value } => value,
                _ => 0,
            })
    }
}

/// A metric name as Prometheus accepts it (`[a-zA-Z_:][a-zA-Z0-9_:]*`).
fn prometheus_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

fn label_set(labels: &BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{}=\"{}\"", prometheus_name(k), escape_label_value(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_owned()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        format!("{value}")
    }
}

/// The Prometheus text exposition format (version 0.0.4).
pub fn render_prometheus(snapshot: &Snapshot) -> String {
    let mut out = String::new();
    let mut current: Option<&str> = None;
    for series in &snapshot.series {
        let name = prometheus_name(&series.name);
        if current != Some(series.name.as_str()) {
            current = Some(series.name.as_str());
            if let Some(help) = snapshot.help.get(&series.name) {
                let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
            }
            let kind = match series.value {
                SeriesValue::Counter { .. } => "counter",
                SeriesValue::Gauge { .. } => "gauge",
                SeriesValue::Summary { .. } => "summary",
            };
            let _ = writeln!(out, "# TYPE {name} {kind}");
        }
        let labels = label_set(&series.labels);
        match series.value {
            SeriesValue::Counter { value } => {
                let _ = writeln!(out, "{name}{labels} {value}");
            }
            SeriesValue::Gauge { value } => {
                let _ = writeln!(out, "{name}{labels} {}", number(value));
            }
            SeriesValue::Summary { count, sum } => {
                let _ = writeln!(out, "{name}_sum{labels} {}", number(sum));
                let _ = writeln!(out, "{name}_count{labels} {count}");
            }
        }
    }
    out
}

/// An expvar-style document (Go's `/debug/vars` convention: one JSON object, a key per
/// variable, maps for labelled counters). It always has `subagent_context_total`, the
/// six AC-26 counters with 0 for any not moved yet; every other series is under its
/// metric name, a number when unlabelled, else a map keyed by the label value (or
/// `k=v,k=v` when there are several labels).
pub fn render_expvar(snapshot: &Snapshot) -> serde_json::Value {
    use serde_json::{Map, Value, json};
    let mut vars = Map::new();
    let mut outcomes: Map<String, Value> = subagent_outcomes()
        .iter()
        .map(|o| ((*o).to_owned(), json!(0)))
        .collect();
    for series in &snapshot.series {
        if series.name == SUBAGENT_CONTEXT_METRIC
            && let (Some(outcome), SeriesValue::Counter { value }) =
                (series.labels.get("outcome"), series.value)
        {
            outcomes.insert(outcome.clone(), json!(value));
        }
        let value = match series.value {
            SeriesValue::Counter { value } => json!(value),
            SeriesValue::Gauge { value } => json!(value),
            SeriesValue::Summary { count, sum } => json!({ "count": count, "sum": sum }),
        };
        if series.labels.is_empty() {
            vars.insert(series.name.clone(), value);
            continue;
        }
        let label_key = if series.labels.len() == 1 {
            series.labels.values().next().cloned().unwrap_or_default()
        } else {
            series
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let entry = vars
            .entry(series.name.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(map) = entry {
            map.insert(label_key, value);
        }
    }
    vars.insert(SUBAGENT_EXPVAR.to_owned(), Value::Object(outcomes));
    Value::Object(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry_with_samples() -> Registry {
        let registry = Registry::new();
        metrics::with_local_recorder(&registry, || {
            metrics::describe_counter!("fanout_proxy_frames_total", "Lines seen.\nBoth ways.");
            metrics::counter!("fanout_proxy_frames_total", "direction" => "a2c").increment(3);
            metrics::counter!("fanout_proxy_frames_total", "direction" => "c2a").increment(2);
            metrics::counter!(SUBAGENT_CONTEXT_METRIC, "outcome" => "persisted").increment(4);
            metrics::gauge!("fanout_proxy_store_available").set(1.0);
            metrics::histogram!("fanout_proxy_line_bytes").record(10.0);
            metrics::histogram!("fanout_proxy_line_bytes").record(5.5);
            metrics::counter!("odd.name", "k" => "quote\"back\\slash\nnl", "z" => "2").increment(1);
        });
        registry
    }

    #[test]
    fn prometheus_text_has_types_help_and_escaped_labels() {
        let text = render_prometheus(&registry_with_samples().snapshot());
        let expected = [
            "# HELP fanout_proxy_frames_total Lines seen.\\nBoth ways.",
            "# TYPE fanout_proxy_frames_total counter",
            "fanout_proxy_frames_total{direction=\"a2c\"} 3",
            "fanout_proxy_frames_total{direction=\"c2a\"} 2",
            "# TYPE fanout_proxy_store_available gauge",
            "fanout_proxy_store_available 1",
            "# TYPE fanout_proxy_line_bytes summary",
            "fanout_proxy_line_bytes_sum 15.5",
            "fanout_proxy_line_bytes_count 2",
            "fanout_subagent_context_total{outcome=\"persisted\"} 4",
            "odd_name{k=\"quote\\\"back\\\\slash\\nnl\",z=\"2\"} 1",
        ];
        for line in expected {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert_eq!(text.matches("# TYPE fanout_proxy_frames_total").count(), 1);
    }

    #[test]
    fn expvar_always_has_the_six_outcomes() {
        let vars = render_expvar(&registry_with_samples().snapshot());
        let map = &vars["subagent_context_total"];
        for outcome in subagent_outcomes() {
            assert!(map[outcome].is_u64(), "{outcome} in {vars}");
        }
        assert_eq!(map["persisted"], 4);
        assert_eq!(map["failed"], 0);
        assert_eq!(vars["fanout_proxy_frames_total"]["a2c"], 3);
        assert_eq!(vars["fanout_proxy_store_available"], 1.0);
        assert_eq!(vars["fanout_proxy_line_bytes"]["count"], 2);
        assert_eq!(vars["odd.name"]["k=quote\"back\\slash\nnl,z=2"], 1);
    }

    #[test]
    fn a_name_keeps_its_first_kind() {
        let registry = Registry::new();
        metrics::with_local_recorder(&registry, || {
            metrics::counter!("x").increment(2);
            metrics::gauge!("x").set(9.0);
        });
        assert_eq!(registry.snapshot().counter("x", &[]), 2);
    }

    #[test]
    fn snapshots_add_up_and_gauges_only_when_asked() {
        let one = registry_with_samples().snapshot();
        let mut total = one.clone();
        total.add(&one, false);
        assert_eq!(
            total.counter("fanout_proxy_frames_total", &[("direction", "a2c")]),
            6
        );
        let gauge = |s: &Snapshot| {
            s.series
                .iter()
                .find(|s| s.name == "fanout_proxy_store_available")
                .map(|s| s.value)
        };
        assert_eq!(gauge(&total), Some(SeriesValue::Gauge { value: 1.0 }));
        total.add(&one, true);
        assert_eq!(gauge(&total), Some(SeriesValue::Gauge { value: 2.0 }));
        let round_trip: Snapshot =
            serde_json::from_str(&serde_json::to_string(&total).unwrap()).unwrap();
        assert_eq!(round_trip, total);
    }
}
