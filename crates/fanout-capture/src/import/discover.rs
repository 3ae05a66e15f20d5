//! Finding and recognising importable files.

use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{FileFailure, ImportError, SkippedFile};

/// `type` values of Claude Code session-log entries; a first line with one of these
/// marks a Claude session log.
const CLAUDE_ENTRY_TYPES: &[&str] = &[
    "user",
    "assistant",
    "system",
    "summary",
    "file-history-snapshot",
    "queue-operation",
    "progress",
    "attachment",
];

/// One unit of work: a transcript, or a Claude session log with its subagent logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Planned {
    /// A `fanout proxy` transcript.
    Transcript {
        /// The file.
        path: PathBuf,
        /// Its size, for progress.
        bytes: u64,
    },
    /// A Claude Code session.
    ClaudeSession {
        /// Its `<id>.jsonl`.
        log: PathBuf,
        /// Its `<id>/subagents/agent-*.jsonl`, read with it.
        subagent_logs: Vec<PathBuf>,
        /// The size of all of them, for progress.
        bytes: u64,
    },
}

impl Planned {
    /// The file that names the unit (the transcript, or the session's main log).
    pub fn path(&self) -> &Path {
        match self {
            Planned::Transcript { path, .. } => path,
            Planned::ClaudeSession { log, .. } => log,
        }
    }

    /// Bytes to read, for progress.
    pub fn bytes(&self) -> u64 {
        match self {
            Planned::Transcript { bytes, .. } | Planned::ClaudeSession { bytes, .. } => *bytes,
        }
    }
}

/// Expands `paths` (files, directories walked recursively for `*.jsonl` and fanout's
/// `*.transcript`) into units, in
/// a stable order. Subagent logs are read with their session's log, never on their own
/// unless that log is missing.
pub fn discover(paths: &[PathBuf]) -> (Vec<Planned>, Vec<FileFailure>, Vec<SkippedFile>) {
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    // (path, named explicitly)
    let mut candidates: Vec<(PathBuf, bool)> = Vec::new();
    for path in paths {
        match fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                let mut found = Vec::new();
                walk(path, &mut found, &mut failures);
                found.sort();
                candidates.extend(found.into_iter().map(|p| (p, false)));
            }
            Ok(_) => candidates.push((path.clone(), true)),
            Err(cause) => failures.push(failure(ImportError::Read {
                path: path.clone(),
                cause,
            })),
        }
    }

    let mut seen = BTreeSet::new();
    let mut plan = Vec::new();
    for (path, explicit) in candidates {
        // A subagent log stands for its session, whose log reads it.
        let path = parent_log_of(&path).unwrap_or(path);
        if !seen.insert(path.clone()) {
            continue;
        }
        match recognise(&path) {
            Ok(Some(unit)) => plan.push(unit),
            Ok(None) if explicit => failures.push(failure(ImportError::Unrecognised {
                path,
                reason: "its first line is JSON of another kind".to_owned(),
            })),
            Ok(None) => skipped.push(SkippedFile {
                path,
                reason: "neither a fanout transcript nor a Claude Code session log".to_owned(),
            }),
            Err(Recognise::Empty) => skipped.push(SkippedFile {
                path,
                reason: "empty file".to_owned(),
            }),
            Err(Recognise::Failed(error)) => failures.push(failure(error)),
        }
    }
    (plan, failures, skipped)
}

fn failure(error: ImportError) -> FileFailure {
    let path = match &error {
        ImportError::Read { path, .. }
        | ImportError::Unrecognised { path, .. }
        | ImportError::BadHeader { path, .. }
        | ImportError::InUse { path }
        | ImportError::Store { path, .. } => path.clone(),
    };
    FileFailure {
        path,
        error: error.to_string(),
    }
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>, failures: &mut Vec<FileFailure>) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(cause) => {
            failures.push(failure(ImportError::Read {
                path: dir.to_owned(),
                cause,
            }));
            return;
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(cause) => {
                failures.push(failure(ImportError::Read {
                    path: dir.to_owned(),
                    cause,
                }));
                continue;
            }
        };
        let path = entry.path();
        // Symlinks are not followed into directories: a link loop must not hang the walk.
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => walk(&path, found, failures),
            Ok(_)
                if path.extension().is_some_and(|e| {
                    e == "jsonl" || e == crate::transcript::TRANSCRIPT_EXTENSION
                }) =>
            {
                found.push(path);
            }
            Ok(_) => {}
            Err(cause) => failures.push(failure(ImportError::Read { path, cause })),
        }
    }
}

/// The agent id of a Claude subagent log, from its file name `agent-<id>.jsonl`;
/// `None` for any other file. The one place that file-name rule is written.
pub(super) fn subagent_log_agent_id(path: &Path) -> Option<&str> {
    path.file_name()?
        .to_str()?
        .strip_prefix("agent-")?
        .strip_suffix(".jsonl")
}

/// `<dir>/<id>/subagents/agent-*.jsonl` -> `<dir>/<id>.jsonl`, when that log exists.
fn parent_log_of(path: &Path) -> Option<PathBuf> {
    subagent_log_agent_id(path)?;
    let subagents = path.parent()?;
    if subagents.file_name()? != "subagents" {
        return None;
    }
    let session_dir = subagents.parent()?;
    let session_id = session_dir.file_name()?.to_str()?;
    let log = session_dir.parent()?.join(format!("{session_id}.jsonl"));
    log.is_file().then_some(log)
}

/// The subagent logs of a Claude session log, sorted.
fn subagent_logs_of(log: &Path) -> Vec<PathBuf> {
    let (Some(parent), Some(stem)) = (log.parent(), log.file_stem()) else {
        return Vec::new();
    };
    let dir = parent.join(stem).join("subagents");
    let Ok(entries) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut logs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| subagent_log_agent_id(p).is_some())
        .collect();
    logs.sort();
    logs
}

enum Recognise {
    Empty,
    Failed(ImportError),
}

/// Reads the first non-blank line and decides the kind.
fn recognise(path: &Path) -> Result<Option<Planned>, Recognise> {
    let read_err = |cause| {
        Recognise::Failed(ImportError::Read {
            path: path.to_owned(),
            cause,
        })
    };
    let file = fs::File::open(path).map_err(read_err)?;
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = BufReader::new(file);
    let mut first = Vec::new();
    loop {
        first.clear();
        if reader.read_until(b'\n', &mut first).map_err(read_err)? == 0 {
            return Err(Recognise::Empty);
        }
        if !first.trim_ascii().is_empty() {
            break;
        }
    }
    let value: Value = serde_json::from_slice(first.trim_ascii()).map_err(|e| {
        Recognise::Failed(ImportError::Unrecognised {
            path: path.to_owned(),
            reason: format!("its first line is not JSON: {e}"),
        })
    })?;
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if kind == super::TRANSCRIPT_TYPE {
        return Ok(Some(Planned::Transcript {
            path: path.to_owned(),
            bytes,
        }));
    }
    if CLAUDE_ENTRY_TYPES.contains(&kind) {
        let subagent_logs = subagent_logs_of(path);
        let child_bytes: u64 = subagent_logs
            .iter()
            .filter_map(|p| fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        return Ok(Some(Planned::ClaudeSession {
            log: path.to_owned(),
            subagent_logs,
            bytes: bytes + child_bytes,
        }));
    }
    Ok(None)
}
