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

use fanout_types::{Timestamp, create_private_dir, default_data_dir, private_open_options};
use serde::{Deserialize, Serialize};

use crate::snapshot::Snapshot;

/// Proxies with a stats file, labelled `state` (`running`, `finished`, `stale`); a
/// gauge only [`StatsDir`] sums make.
pub const EXECUTIONS_METRIC: &str = "fanout_proxy_executions";

/// Where proxies write their stats files and `fanout serve` reads them unless told
/// otherwise: `stats` in the data directory ([`default_data_dir`]).
pub fn default_stats_dir() -> PathBuf {
    default_data_dir().join("stats")
}

/// One proxy's counters, as written to its stats file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatsFile {
    /// The proxy run's execution id; also the file's name.
    pub execution_id: String,
    /// The task the run was given (`--task`), if any.
    pub task_id: Option<String>,
    /// The agent command the proxy runs.
    pub agent_command: Vec<String>,
    /// The proxy's process id.
    pub pid: u32,
    /// When the proxy started.
    pub started_at: Timestamp,
    /// When this file was last written; a file that stops updating is stale.
    pub updated_at: Timestamp,
    /// Written once more at exit with `true`.
    pub finished: bool,
    /// The proxy's registry at `updated_at`.
    pub metrics: Snapshot,
}

impl StatsFile {
    /// Writes (or replaces) `<dir>/<executionId>.json`, creating `dir` if it is
    /// missing; readers never see half a file.
    pub fn write(&self, dir: &Path) -> io::Result<PathBuf> {
        let path = dir.join(format!("{}.json", self.execution_id));
        let partial = dir.join(format!(".{}.json.partial", self.execution_id));
        let open = || {
            private_open_options()
                .write(true)
                .create(true)
                .truncate(true)
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
            total.set_gauge(EXECUTIONS_METRIC, &[("state", state)], f64::from(count));
        }
        total.help.insert(
            EXECUTIONS_METRIC.to_owned(),
            "Proxies with a stats file, by state (stale: stopped updating without finishing)."
                .to_owned(),
        );
        total
    }
}
