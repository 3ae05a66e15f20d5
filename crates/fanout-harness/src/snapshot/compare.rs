//! Comparing a run with a scenario's expected files, and writing them.

use std::path::{Path, PathBuf};

use fanout_replay::{indexed_log_files, session_file_name};

use super::Snapshot;
use crate::error::HarnessError;

/// How one expected file compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileCheck {
    /// Byte-identical.
    Same {
        /// The file name.
        name: String,
    },
    /// Both exist and differ.
    Differs {
        /// The file name.
        name: String,
        /// Unified diff, expected -> actual.
        diff: String,
    },
    /// The run produced it but there is no expected file (e.g. an extra session log).
    MissingExpected {
        /// The file name.
        name: String,
        /// Unified diff from nothing.
        diff: String,
    },
    /// The expected file exists but the run did not produce it (a missing session log).
    NotProduced {
        /// The file name.
        name: String,
    },
}

impl FileCheck {
    /// Whether this is a match.
    pub fn is_same(&self) -> bool {
        matches!(self, FileCheck::Same { .. })
    }

    /// The file name.
    pub fn name(&self) -> &str {
        match self {
            FileCheck::Same { name }
            | FileCheck::Differs { name, .. }
            | FileCheck::MissingExpected { name, .. }
            | FileCheck::NotProduced { name } => name,
        }
    }
}

/// Compares a run with the expected files in `dir`: the transcript, and every
/// session log either side has.
pub fn compare(dir: &Path, snapshot: &Snapshot) -> Result<Vec<FileCheck>, HarnessError> {
    let mut checks = Vec::new();
    let produced = snapshot.files();
    for (name, actual) in &produced {
        let path = dir.join(name);
        let expected = match std::fs::read(&path) {
            Ok(bytes) => Some(bytes),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => return Err(HarnessError::Io { path, error }),
        };
        checks.push(match expected {
            None => FileCheck::MissingExpected {
                name: name.clone(),
                diff: unified_diff(name, "", actual),
            },
            Some(bytes) if bytes == actual.as_bytes() => FileCheck::Same { name: name.clone() },
            Some(bytes) => FileCheck::Differs {
                name: name.clone(),
                diff: unified_diff(name, &String::from_utf8_lossy(&bytes), actual),
            },
        });
    }
    for (index, _) in stale_logs(dir, snapshot)? {
        checks.push(FileCheck::NotProduced {
            name: session_file_name(index),
        });
    }
    Ok(checks)
}

/// The expected session logs in `dir` that `snapshot` did not produce (index, path).
fn stale_logs(dir: &Path, snapshot: &Snapshot) -> Result<Vec<(usize, PathBuf)>, HarnessError> {
    let mut logs = indexed_log_files(dir)?;
    logs.retain(|(index, _)| *index >= snapshot.session_logs.len());
    Ok(logs)
}

/// A unified diff with file headers, three lines of context.
pub fn unified_diff(name: &str, expected: &str, actual: &str) -> String {
    similar::TextDiff::from_lines(expected, actual)
        .unified_diff()
        .context_radius(3)
        .missing_newline_hint(true)
        .header(&format!("expected/{name}"), &format!("actual/{name}"))
        .to_string()
}

/// Writes a run's outputs as the expected files of `dir`, removing expected
/// session logs the run no longer produces. Returns the names written.
pub fn write_expected(dir: &Path, snapshot: &Snapshot) -> Result<Vec<String>, HarnessError> {
    let mut written = Vec::new();
    for (name, content) in snapshot.files() {
        let path = dir.join(&name);
        crate::private_file::write(&path, content.as_bytes()).map_err(HarnessError::io(&path))?;
        written.push(name);
    }
    for (_, path) in stale_logs(dir, snapshot)? {
        std::fs::remove_file(&path).map_err(HarnessError::io(&path))?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(logs: &[&str]) -> Snapshot {
        Snapshot {
            transcript: "# t\n-> a\n".into(),
            session_logs: logs.iter().map(ToString::to_string).collect(),
            misses: Vec::new(),
        }
    }

    fn names(checks: &[FileCheck], same: bool) -> Vec<&str> {
        checks
            .iter()
            .filter(|c| c.is_same() == same)
            .map(FileCheck::name)
            .collect()
    }

    #[test]
    fn compare_sees_changes_extra_and_missing_logs() {
        let dir = tempfile::tempdir().unwrap();
        let run = snapshot(&["p\n", "c1\n"]);
        assert_eq!(
            write_expected(dir.path(), &run).unwrap(),
            ["transcript.txt", "session.jsonl", "session.1.jsonl"]
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("session.jsonl"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let checks = compare(dir.path(), &run).unwrap();
        assert_eq!(names(&checks, false), Vec::<&str>::new());

        let changed = snapshot(&["p\n", "c1 changed\n", "c2\n"]);
        let checks = compare(dir.path(), &changed).unwrap();
        assert_eq!(
            names(&checks, false),
            ["session.1.jsonl", "session.2.jsonl"]
        );
        let FileCheck::Differs { diff, .. } = &checks[2] else {
            panic!("{checks:?}")
        };
        assert!(diff.contains("--- expected/session.1.jsonl\n+++ actual/session.1.jsonl"));
        assert!(diff.contains("-c1\n+c1 changed\n"), "{diff}");
        assert!(matches!(checks[3], FileCheck::MissingExpected { .. }));

        let fewer = snapshot(&["p\n"]);
        let checks = compare(dir.path(), &fewer).unwrap();
        assert_eq!(
            checks.last(),
            Some(&FileCheck::NotProduced {
                name: "session.1.jsonl".into()
            })
        );
        // Writing the smaller run removes the stale expected log.
        write_expected(dir.path(), &fewer).unwrap();
        assert!(!dir.path().join("session.1.jsonl").exists());
        assert!(
            compare(dir.path(), &fewer)
                .unwrap()
                .iter()
                .all(FileCheck::is_same)
        );
    }
}
