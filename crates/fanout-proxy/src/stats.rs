//! Stats files: how `fanout serve` knows the counters of every proxy on the machine.
//!
//! Counters live in each proxy's memory and die with it; a separate `fanout serve`
//! process cannot see them. So each proxy writes its registry snapshot to
//! `<stats dir>/<executionId>.json` (0600) every few seconds and once more when it
//! stops (`finished: true`), replacing the file atomically (write, then rename).
//! [`StatsDir`] sums every file: counters and summaries over all executions (so they
//! only ever grow, as Prometheus expects), gauges over the live ones only, plus
//! `fanout_proxy_executions{state}` for running, finished and stale (stopped updating
//! without finishing: killed) proxies.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use fanout_store::Timestamp;
use serde::{Deserialize, Serialize};

use crate::http::MetricsSource;
use crate::metric_names;
use crate::metrics_registry::Snapshot;
use crate::paths::create_private_dir;

/// One proxy's counters, as written to its stats file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatsFile {
    pub execution_id: String,
    pub task_id: Option<String>,
    pub agent_command: Vec<String>,
    pub pid: u32,
    pub started_at: Timestamp,
    pub updated_at: Timestamp,
    pub finished: bool,
    pub metrics: Snapshot,
}

impl StatsFile {
    /// Writes (or replaces) `<dir>/<executionId>.json`, creating `dir` if it is
    /// missing; readers never see half a file.
    pub fn write(&self, dir: &Path) -> io::Result<PathBuf> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = dir.join(format!("{}.json", self.execution_id));
        let partial = dir.join(format!(".{}.json.partial", self.execution_id));
        let open = || {
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&partial)
        };
        // The directory is made only when it is missing (the first write, or after
        // someone removed it), not on every rewrite every few seconds.
        let mut file = match open() {
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                create_private_dir(dir)?;
                open()?
            }
            opened => opened?,
        };
        serde_json::to_writer(&mut file, self).map_err(io::Error::other)?;
        file.write_all(b"\n")?;
        std::fs::rename(&partial, &path)?;
        Ok(path)
    }
}

/// Every stats file of a directory, summed; the source behind `fanout serve`.
#[derive(Clone, Debug)]
pub struct StatsDir {
    dir: PathBuf,
    stale_after: Duration,
}

impl StatsDir {
    /// `stale_after`: an unfinished file not updated for this long belongs to a proxy
    /// that died without saying so.
    pub fn new(dir: impl Into<PathBuf>, stale_after: Duration) -> Self {
        StatsDir {
            dir: dir.into(),
            stale_after,
        }
    }

    /// Every readable stats file (unreadable or foreign files are skipped).
    pub fn files(&self) -> Vec<StatsFile> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut files: Vec<StatsFile> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| {
                path.extension().is_some_and(|ext| ext == "json")
                    && !path
                        .file_name()
                        .is_some_and(|name| name.to_string_lossy().starts_with('.'))
            })
            .filter_map(|path| match std::fs::read(&path) {
                Ok(bytes) => match serde_json::from_slice::<StatsFile>(&bytes) {
                    Ok(file) => Some(file),
                    Err(error) => {
                        tracing::debug!(path = %path.display(), %error, "not a stats file");
                        None
                    }
                },
                Err(error) => {
                    tracing::debug!(path = %path.display(), %error, "cannot read a stats file");
                    None
                }
            })
            .collect();
        files.sort_by(|a, b| a.execution_id.cmp(&b.execution_id));
        files
    }

    /// The sum of every file, as of `now`.
    pub fn snapshot_at(&self, now: Timestamp) -> Snapshot {
        let stale_micros = i64::try_from(self.stale_after.as_micros()).unwrap_or(i64::MAX);
        let mut total = Snapshot::default();
        let (mut running, mut finished, mut stale) = (0u32, 0u32, 0u32);
        for file in self.files() {
            let live =
                !file.finished && now.unix_micros() - file.updated_at.unix_micros() <= stale_micros;
            match (file.finished, live) {
                (true, _) => finished += 1,
                (false, true) => running += 1,
                (false, false) => stale += 1,
            }
            total.add(&file.metrics, live);
        }
        for (state, count) in [
            ("running", running),
            ("finished", finished),
            ("stale", stale),
        ] {
            total.set_gauge(
                metric_names::EXECUTIONS,
                &[("state", state)],
                f64::from(count),
            );
        }
        total.help.insert(
            metric_names::EXECUTIONS.to_owned(),
            "Proxies with a stats file, by state (stale: stopped updating without finishing)."
                .to_owned(),
        );
        total
    }
}

impl MetricsSource for StatsDir {
    fn snapshot(&self) -> Snapshot {
        self.snapshot_at(Timestamp::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics_registry::{Series, SeriesValue};

    fn file(id: &str, finished: bool, updated_at: &str, frames: u64) -> StatsFile {
        StatsFile {
            execution_id: id.to_owned(),
            task_id: None,
            agent_command: vec!["cat".to_owned()],
            pid: 1,
            started_at: Timestamp::parse("2026-08-03T15:00:00Z").unwrap(),
            updated_at: Timestamp::parse(updated_at).unwrap(),
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
            .snapshot_at(Timestamp::parse("2026-08-03T15:01:00Z").unwrap());
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
                gauge(metric_names::EXECUTIONS, &[("state", state)]),
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
}
