//! Scripts: the recorded model responses of each session of a scenario, in the
//! order live sessions will claim them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use fanout_sessionlog::{
    Backend, ReadError, RecordedResponse, SessionLog, Timestamp, creation_order, list_logs,
    read_log,
};

use crate::error::ReplayError;

/// The file name of the `index`-th session log of a scenario, primary first:
/// `session.jsonl`, then `session.1.jsonl`, `session.2.jsonl`, …
pub fn session_file_name(index: usize) -> String {
    if index == 0 {
        "session.jsonl".to_string()
    } else {
        format!("session.{index}.jsonl")
    }
}

/// The index encoded in a scenario session-log file name (the inverse of
/// [`session_file_name`]); `None` for any other name.
pub fn session_file_index(name: &str) -> Option<usize> {
    if name == "session.jsonl" {
        return Some(0);
    }
    let digits = name.strip_prefix("session.")?.strip_suffix(".jsonl")?;
    // `session.01.jsonl` would alias `session.1.jsonl`; only canonical spellings count.
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The scenario session logs in `dir` (`session.jsonl`, `session.N.jsonl`),
/// ordered by their index. Other files are not session logs and are ignored.
pub fn scenario_log_files(dir: &Path) -> Result<Vec<PathBuf>, ReplayError> {
    Ok(indexed_log_files(dir)?
        .into_iter()
        .map(|(_, path)| path)
        .collect())
}

/// [`scenario_log_files`] with each file's index (what [`session_file_index`]
/// reads from its name).
pub fn indexed_log_files(dir: &Path) -> Result<Vec<(usize, PathBuf)>, ReplayError> {
    let entries = std::fs::read_dir(dir).map_err(ReplayError::io(dir))?;
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(ReplayError::io(dir))?;
        let name = entry.file_name();
        if let Some(index) = name.to_str().and_then(session_file_index) {
            found.push((index, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// One recorded session's model responses: what replay serves to the live
/// session bound to it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionScript {
    /// Where it came from, for messages (the log's file name).
    pub label: String,
    /// The recorded session id (header `id`).
    pub recorded_id: String,
    /// Header `createdAt`: the script order.
    pub created_at: Timestamp,
    /// How the recorded session was started.
    pub backend: Backend,
    /// The session's own model responses in call order. A fork child's start at
    /// its seed boundary, so the copied parent prefix is never replayed as its own.
    pub responses: Vec<RecordedResponse>,
}

impl SessionScript {
    /// The script of one recorded session.
    pub fn from_log(log: &SessionLog) -> Self {
        let label = log
            .path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| log.path.display().to_string());
        Self {
            label,
            recorded_id: log.header.id.clone(),
            created_at: log.header.created_at,
            backend: log.header.backend,
            responses: log.recorded_responses(),
        }
    }

    /// `session.1.jsonl (recorded session <id>)`, for error messages.
    pub fn describe(&self) -> String {
        format!("{} (recorded session {})", self.label, self.recorded_id)
    }
}

/// Every script of a scenario, ordered by `createdAt`, then recorded id: the
/// parent is created before its children, so it comes first and is the
/// primary script.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioScripts {
    scripts: Vec<SessionScript>,
}

impl ScenarioScripts {
    /// Scripts from already-read logs. Two logs of the same session id are an
    /// error: one of them would never be replayed.
    pub fn from_logs(logs: &[SessionLog]) -> Result<Self, ReplayError> {
        let mut seen: HashMap<&str, &Path> = HashMap::new();
        for log in logs {
            if let Some(first) = seen.insert(&log.header.id, &log.path) {
                return Err(ReplayError::DuplicateSession {
                    id: log.header.id.clone(),
                    first: first.to_path_buf(),
                    second: log.path.clone(),
                });
            }
        }
        Ok(Self::from_scripts(
            logs.iter().map(SessionScript::from_log).collect(),
        ))
    }

    /// Scripts built directly (synthetic scenarios, benchmarks), put in claim
    /// order: `createdAt`, then recorded id.
    pub fn from_scripts(mut scripts: Vec<SessionScript>) -> Self {
        scripts.sort_by(|a, b| {
            creation_order(a.created_at, &a.recorded_id)
                .cmp(&creation_order(b.created_at, &b.recorded_id))
        });
        Self { scripts }
    }

    /// Loads every session log of a scenario directory (`session.jsonl`,
    /// `session.N.jsonl`). A directory without such files is read as a sessions
    /// root (cwd buckets of `*.jsonl`), so a live agent's logs replay too.
    /// A bad line anywhere is an error naming its file and line.
    pub fn load(dir: &Path) -> Result<Self, ReplayError> {
        let mut paths = scenario_log_files(dir)?;
        if paths.is_empty() {
            paths = list_logs(dir)?
                .into_iter()
                .map(|entry| entry.path)
                .collect();
        }
        if paths.is_empty() {
            return Err(ReplayError::NoSessionLogs {
                dir: dir.to_path_buf(),
            });
        }
        let logs = paths
            .iter()
            .map(|path| read_log(path))
            .collect::<Result<Vec<_>, ReadError>>()?;
        Self::from_logs(&logs)
    }

    /// The scripts in claim order.
    pub fn scripts(&self) -> &[SessionScript] {
        &self.scripts
    }

    /// How many recorded sessions there are.
    pub fn len(&self) -> usize {
        self.scripts.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.scripts.is_empty()
    }

    /// The model named by the primary script's first recorded request, if any:
    /// the model name a replaying agent should report to reproduce the logs.
    pub fn recorded_model(&self) -> Option<&str> {
        self.scripts
            .first()
            .and_then(|script| script.responses.first())
            .map(|response| response.model.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_round_trip() {
        for index in [0, 1, 2, 10, 123] {
            assert_eq!(session_file_index(&session_file_name(index)), Some(index));
        }
        for name in [
            "session.01.jsonl",
            "session..jsonl",
            "session.x.jsonl",
            "session.jsonl.bak",
            "sessions.jsonl",
            "transcript.txt",
        ] {
            assert_eq!(session_file_index(name), None, "{name}");
        }
    }
}
