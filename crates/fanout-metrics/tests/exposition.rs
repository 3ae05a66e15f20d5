//! The registry as a `metrics` recorder, its snapshots, and both renderings.

use fanout_metrics::{
    Registry, SUBAGENT_CONTEXT_METRIC, SUBAGENT_OUTCOMES, SeriesValue, Snapshot, render_expvar,
    render_prometheus,
};

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
    for outcome in SUBAGENT_OUTCOMES {
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
