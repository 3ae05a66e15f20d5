//! A point-in-time copy of a registry, and the arithmetic that sums the copies of
//! several processes (fanout-specific, hence not an exporter crate's job).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A point-in-time copy of a registry (or a sum of several, see [`Snapshot::add`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Every series, in the registry's order.
    pub series: Vec<Series>,
    /// Help text by metric name.
    #[serde(default)]
    pub help: BTreeMap<String, String>,
}

/// One time series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// The metric name (`fanout_proxy_lines_total`, …).
    pub name: String,
    /// Its labels; a series is one (name, labels) pair.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Its value at the time of the snapshot.
    pub value: SeriesValue,
}

/// What a series holds, by kind of metric.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SeriesValue {
    /// A count that only grows.
    Counter {
        /// The count.
        value: u64,
    },
    /// A current level.
    Gauge {
        /// The level.
        value: f64,
    },
    /// A histogram reduced to what Prometheus summaries without quantiles carry.
    Summary {
        /// How many values were recorded.
        count: u64,
        /// Their sum.
        sum: f64,
    },
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
