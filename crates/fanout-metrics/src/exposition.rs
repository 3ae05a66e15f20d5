//! The two renderings fanout serves: Prometheus text ([`render_prometheus`]) and an
//! expvar-style JSON document ([`render_expvar`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::snapshot::{SeriesValue, Snapshot};

/// The `metrics` counter every subagent-writer outcome moves (AC-26), labelled
/// `outcome`; fanout-capture moves it, `/debug/vars` always shows it.
pub const SUBAGENT_CONTEXT_METRIC: &str = "fanout_subagent_context_total";
/// The `outcome` label values of [`SUBAGENT_CONTEXT_METRIC`], in AC-26's order; every
/// one is in `/debug/vars` (0 when never moved).
pub const SUBAGENT_OUTCOMES: [&str; 6] = [
    "attempted",
    "persisted",
    "skipped_no_identity",
    "anomalous_value",
    "failed",
    "unknown_execution",
];
/// The expvar variable that carries the AC-26 map.
const SUBAGENT_EXPVAR: &str = "subagent_context_total";

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
    let mut outcomes: Map<String, Value> = SUBAGENT_OUTCOMES
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
