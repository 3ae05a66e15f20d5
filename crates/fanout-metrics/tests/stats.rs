//! Stats files on disk: written privately and atomically, summed across processes.

use std::time::Duration;

use fanout_metrics::{EXECUTIONS_METRIC, Series, SeriesValue, Snapshot, StatsDir, StatsFile};
use fanout_types::Timestamp;

fn file(id: &str, finished: bool, updated_at: &str, frames: u64) -> StatsFile {
    StatsFile {
        execution_id: id.to_owned(),
        task_id: None,
        agent_command: vec!["cat".to_owned()],
        pid: 1,
        started_at: "2026-08-03T15:00:00Z".parse::<Timestamp>().unwrap(),
        updated_at: updated_at.parse::<Timestamp>().unwrap(),
        finished,
        metrics: Snapshot {
            series: vec![
                Series {
                    name: "fanout_proxy_frames_total".to_owned(),
                    labels: [("direction".to_owned(), "a2c".to_owned())].into(),
                    value: SeriesValue::Counter { value: frames },
                },
                Series {
                    name: "fanout_proxy_store_available".to_owned(),
                    labels: Default::default(),
                    value: SeriesValue::Gauge { value: 1.0 },
                },
            ],
            help: Default::default(),
        },
    }
}

#[test]
fn sums_counters_of_all_and_gauges_of_the_live() {
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("stats");
    file("a", true, "2026-08-03T15:00:10Z", 5)
        .write(&stats)
        .unwrap();
    file("b", false, "2026-08-03T15:00:59Z", 7)
        .write(&stats)
        .unwrap();
    file("c", false, "2026-08-03T14:00:00Z", 1)
        .write(&stats)
        .unwrap();
    std::fs::write(stats.join("junk.json"), b"{").unwrap();
    let snapshot = StatsDir::new(&stats, Duration::from_secs(30))
        .snapshot_at("2026-08-03T15:01:00Z".parse::<Timestamp>().unwrap());
    assert_eq!(
        snapshot.counter("fanout_proxy_frames_total", &[("direction", "a2c")]),
        13
    );
    let gauge = |name: &str, labels: &[(&str, &str)]| {
        snapshot
            .series
            .iter()
            .find(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
    };
    assert_eq!(
        gauge("fanout_proxy_store_available", &[]),
        Some(SeriesValue::Gauge { value: 1.0 })
    );
    for (state, count) in [("running", 1.0), ("finished", 1.0), ("stale", 1.0)] {
        assert_eq!(
            gauge(EXECUTIONS_METRIC, &[("state", state)]),
            Some(SeriesValue::Gauge { value: count }),
            "{state}"
        );
    }
}

#[test]
fn a_removed_dir_is_made_again() {
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("stats");
    let stats_file = file("a", false, "2026-08-03T15:00:10Z", 5);
    stats_file.write(&stats).unwrap();
    std::fs::remove_dir_all(&stats).unwrap();
    let path = stats_file.write(&stats).unwrap();
    assert_eq!(
        StatsDir::new(&stats, Duration::from_secs(1)).files(),
        vec![stats_file]
    );
    assert!(path.starts_with(&stats));
}

#[test]
fn files_are_private_and_a_missing_dir_is_empty() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = file("a", true, "2026-08-03T15:00:10Z", 5)
        .write(dir.path())
        .unwrap();
    let mode = std::fs::metadata(path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(
        StatsDir::new(dir.path().join("none"), Duration::from_secs(1))
            .files()
            .is_empty()
    );
}
