//! Finding, grouping and recognising importable files, and the default history places.
//!
//! Files are grouped into units by their paths first (a Claude session log with its
//! subagent logs), then a unit whose files are all unchanged since the last import is
//! skipped without opening any of them (DESIGN 3.7). Every other unit is recognised by
//! the shape of its first line: a fanout transcript header, a Claude Code record, or a
//! Codex `session_meta`. Codex threads are grouped by their root thread, with the
//! ancestors of a changed thread read for context.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::lenient::{Object, Text};
use super::source::{KnownFiles, Stat};
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
    "ai-title",
    "last-prompt",
    "custom-title",
];

/// The `type` of a Codex rollout's first record.
const CODEX_SESSION_META: &str = "session_meta";

/// One unit of work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Planned {
    /// A fanout transcript.
    Transcript {
        /// The file.
        path: PathBuf,
        /// Its size, for progress.
        bytes: u64,
    },
    /// A Claude Code session log with its subagent logs (nested and workflow agents
    /// included).
    ClaudeSession {
        /// Its `<id>.jsonl`.
        log: PathBuf,
        /// Its `<id>/subagents/**/agent-*.jsonl`, read after it.
        subagent_logs: Vec<PathBuf>,
        /// The size of all of them, for progress.
        bytes: u64,
    },
    /// The rollout files of one Codex session (a root thread and its subagent threads)
    /// that changed, with the ancestors they need for context.
    CodexSession {
        /// The root thread's id (`session_meta.payload.session_id`).
        root_thread: String,
        /// The rollouts to read, the root thread's first.
        files: Vec<PathBuf>,
        /// The size of all of them, for progress.
        bytes: u64,
    },
}

impl Planned {
    /// The unit's main file (the session log, the transcript, the root rollout or the
    /// first file of the group).
    pub fn path(&self) -> &Path {
        match self {
            Planned::Transcript { path, .. } => path,
            Planned::ClaudeSession { log, .. } => log,
            Planned::CodexSession { files, .. } => files.first().map_or(Path::new(""), |p| p),
        }
    }

    /// Bytes of all of its files.
    pub fn bytes(&self) -> u64 {
        match self {
            Planned::Transcript { bytes, .. }
            | Planned::ClaudeSession { bytes, .. }
            | Planned::CodexSession { bytes, .. } => *bytes,
        }
    }
}

/// What discovery found: the units to import, the failures, the files passed over, and
/// how many units (and files) were unchanged and skipped unread.
#[derive(Debug, Default)]
pub struct Discovery {
    /// The units to import, in order.
    pub plan: Vec<Planned>,
    /// Files that could not even be looked at.
    pub failures: Vec<FileFailure>,
    /// Files of no known kind, passed over.
    pub skipped: Vec<SkippedFile>,
    /// Units none of whose files changed since the last import.
    pub unchanged_units: u64,
    /// The files of those units (never opened).
    pub unchanged_files: u64,
}

/// Expands `paths` (files, and directories walked recursively for `*.jsonl` and fanout's
/// `*.transcript`) into units
/// in a stable order, with nothing known of earlier imports.
pub fn discover(paths: &[PathBuf]) -> (Vec<Planned>, Vec<FileFailure>, Vec<SkippedFile>) {
    let found = discover_changed(paths, &KnownFiles::default());
    (found.plan, found.failures, found.skipped)
}

/// [`discover`], skipping every unit whose files are all unchanged since `known`.
pub fn discover_changed(paths: &[PathBuf], known: &KnownFiles) -> Discovery {
    let mut found = Discovery::default();
    // (path, named explicitly)
    let mut candidates: Vec<(PathBuf, bool)> = Vec::new();
    for path in paths {
        match fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                let mut files = Vec::new();
                walk(path, &mut files, &mut found.failures);
                files.sort();
                candidates.extend(files.into_iter().map(|p| (p, false)));
            }
            Ok(_) => candidates.push((path.clone(), true)),
            Err(cause) => found.failures.push(failure(ImportError::Read {
                path: path.clone(),
                cause,
            })),
        }
    }
    let rollouts: BTreeMap<String, PathBuf> = candidates
        .iter()
        .filter_map(|(p, _)| rollout_thread_id(p).map(|id| (id.to_owned(), p.clone())))
        .collect();

    let mut seen = HashSet::new();
    let mut codex = CodexGroups::default();
    for (path, explicit) in candidates {
        // A subagent log stands for its session, whose log reads it.
        let unit = match session_log_of(&path) {
            // Its session is planned already: no need to look for its log again.
            Some(log) if seen.contains(&log) => continue,
            Some(log) if log.is_file() => log,
            Some(missing) => {
                if seen.insert(path.clone()) {
                    found.skipped.push(SkippedFile {
                        path: path.clone(),
                        reason: format!(
                            "a Claude subagent log whose session log {} is missing: not imported (its spawning call cannot be known)",
                            missing.display()
                        ),
                    });
                }
                continue;
            }
            None => path,
        };
        if !seen.insert(unit.clone()) {
            continue;
        }
        let members = claude_members(&unit);
        let all: Vec<&PathBuf> = std::iter::once(&unit).chain(&members).collect();
        if all.iter().all(|p| unchanged(p, known)) {
            found.unchanged_units += 1;
            found.unchanged_files += all.len() as u64;
            continue;
        }
        match recognise(&unit) {
            Ok(Kind::Transcript { bytes }) => {
                found.plan.push(Planned::Transcript { path: unit, bytes });
            }
            Ok(Kind::Claude { bytes }) => {
                let child_bytes: u64 = members
                    .iter()
                    .filter_map(|p| fs::metadata(p).ok())
                    .map(|m| m.len())
                    .sum();
                found.plan.push(Planned::ClaudeSession {
                    log: unit,
                    subagent_logs: members,
                    bytes: bytes + child_bytes,
                });
            }
            Ok(Kind::Codex(meta)) => codex.add(unit, meta),
            Ok(Kind::Other) if explicit => {
                found.failures.push(failure(ImportError::Unrecognised {
                    path: unit,
                    reason: "its first line is JSON of another kind".to_owned(),
                }));
            }
            Ok(Kind::Other) => found.skipped.push(SkippedFile {
                path: unit,
                reason:
                    "neither a fanout transcript, a Claude Code session log nor a Codex rollout"
                        .to_owned(),
            }),
            Err(Recognise::Empty) => found.skipped.push(SkippedFile {
                path: unit,
                reason: "empty file".to_owned(),
            }),
            Err(Recognise::Failed(error)) => found.failures.push(failure(error)),
        }
    }
    codex.plan(&rollouts, &mut found);
    found
}

/// Whether `path` is known and unchanged (decided by `stat` alone).
fn unchanged(path: &Path, known: &KnownFiles) -> bool {
    known
        .get(path)
        .is_some_and(|state| Stat::of(path).is_ok_and(|stat| stat.unchanged_since(state)))
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

/// For a Claude subagent log (`<dir>/<id>/subagents/agent-*.jsonl`, or a workflow
/// agent's `<dir>/<id>/subagents/workflows/<wf>/agent-*.jsonl`): its session's log
/// `<dir>/<id>.jsonl`, which may not exist; `None` for any other file.
fn session_log_of(path: &Path) -> Option<PathBuf> {
    subagent_log_agent_id(path)?;
    let mut dir = path.parent()?;
    if dir.parent()?.file_name()? == "workflows" {
        dir = dir.parent()?.parent()?;
    }
    if dir.file_name()? != "subagents" {
        return None;
    }
    let session_dir = dir.parent()?;
    let session_id = session_dir.file_name()?.to_str()?;
    Some(session_dir.parent()?.join(format!("{session_id}.jsonl")))
}

/// The subagent logs of a Claude session log, sorted: `<id>/subagents/agent-*.jsonl`,
/// then `<id>/subagents/workflows/<wf>/agent-*.jsonl`. Empty for any other file.
fn claude_members(log: &Path) -> Vec<PathBuf> {
    let (Some(parent), Some(stem)) = (log.parent(), log.file_stem()) else {
        return Vec::new();
    };
    let dir = parent.join(stem).join("subagents");
    let mut logs = agent_logs_in(&dir);
    if let Ok(workflows) = fs::read_dir(dir.join("workflows")) {
        let mut folders: Vec<PathBuf> = workflows
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        folders.sort();
        for folder in folders {
            logs.extend(agent_logs_in(&folder));
        }
    }
    logs
}

fn agent_logs_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
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

/// The thread id of a Codex rollout from its file name
/// `rollout-<date>T<time>-<thread uuid>.jsonl`.
pub(super) fn rollout_thread_id(path: &Path) -> Option<&str> {
    let stem = path
        .file_name()?
        .to_str()?
        .strip_prefix("rollout-")?
        .strip_suffix(".jsonl")?;
    let id = stem.get(stem.len().checked_sub(36)?..)?;
    (id.len() == 36 && id.bytes().filter(|b| *b == b'-').count() == 4).then_some(id)
}

/// A Codex rollout's `session_meta` payload: the keys grouping reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct ThreadMeta {
    /// This thread (`payload.id`).
    pub(super) thread: String,
    /// The root thread (`payload.session_id`).
    pub(super) root: String,
    /// `payload.parent_thread_id` for a subagent thread.
    pub(super) parent: Option<String>,
}

#[derive(Deserialize, Default)]
struct FirstRecord<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Text<'a>,
    #[serde(default, borrow)]
    payload: Object<MetaPayload<'a>>,
}

#[derive(Deserialize, Default)]
struct MetaPayload<'a> {
    #[serde(default, borrow)]
    id: Text<'a>,
    #[serde(default, borrow)]
    session_id: Text<'a>,
    #[serde(default, borrow)]
    parent_thread_id: Text<'a>,
}

/// The Codex files of one discovery, grouped by root thread.
#[derive(Default)]
struct CodexGroups {
    /// Root thread -> the changed files of the session, with their metas.
    changed: BTreeMap<String, Vec<(PathBuf, ThreadMeta)>>,
}

impl CodexGroups {
    fn add(&mut self, path: PathBuf, meta: ThreadMeta) {
        self.changed
            .entry(meta.root.clone())
            .or_default()
            .push((path, meta));
    }

    /// One unit per root: its changed files, and the ancestors (by `parent_thread_id`,
    /// found by the thread id in their file names) of each, for context.
    fn plan(self, rollouts: &BTreeMap<String, PathBuf>, found: &mut Discovery) {
        for (root, changed) in self.changed {
            let mut files: BTreeSet<PathBuf> = BTreeSet::new();
            for (path, meta) in &changed {
                files.insert(path.clone());
                let mut parent = meta.parent.clone();
                let mut hops = 0;
                while let Some(thread) = parent.take() {
                    hops += 1;
                    let Some(ancestor) = rollouts.get(&thread) else {
                        break;
                    };
                    if !files.insert(ancestor.clone()) || hops > 64 {
                        break;
                    }
                    parent = first_line_meta(ancestor).and_then(|m| m.parent);
                }
            }
            // The root thread's file first, then by path: parents before children in
            // the usual case, and a stable order in every case.
            let mut files: Vec<PathBuf> = files.into_iter().collect();
            files.sort_by_key(|p| (rollout_thread_id(p) != Some(root.as_str()), p.clone()));
            let bytes = files
                .iter()
                .filter_map(|p| fs::metadata(p).ok())
                .map(|m| m.len())
                .sum();
            found.plan.push(Planned::CodexSession {
                root_thread: root,
                files,
                bytes,
            });
        }
    }
}

fn first_line_meta(path: &Path) -> Option<ThreadMeta> {
    match recognise(path) {
        Ok(Kind::Codex(meta)) => Some(meta),
        _ => None,
    }
}

enum Kind {
    Transcript { bytes: u64 },
    Claude { bytes: u64 },
    Codex(ThreadMeta),
    Other,
}

enum Recognise {
    Empty,
    Failed(ImportError),
}

/// Reads the first non-blank line and decides the kind.
fn recognise(path: &Path) -> Result<Kind, Recognise> {
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
    let record: FirstRecord<'_> =
        serde_json::from_slice::<Object<FirstRecord<'_>>>(first.trim_ascii())
            .map(|o| o.0)
            .map_err(|e| {
                Recognise::Failed(ImportError::Unrecognised {
                    path: path.to_owned(),
                    reason: format!("its first line is not JSON: {e}"),
                })
            })?;
    let kind = record.kind.get().unwrap_or_default();
    Ok(if kind == super::TRANSCRIPT_TYPE {
        Kind::Transcript { bytes }
    } else if kind == CODEX_SESSION_META {
        let payload = &record.payload.0;
        let thread = payload
            .id
            .owned()
            .or_else(|| rollout_thread_id(path).map(str::to_owned))
            .unwrap_or_default();
        Kind::Codex(ThreadMeta {
            root: payload.session_id.owned().unwrap_or_else(|| thread.clone()),
            parent: payload.parent_thread_id.owned(),
            thread,
        })
    } else if CLAUDE_ENTRY_TYPES.contains(&kind) {
        Kind::Claude { bytes }
    } else {
        Kind::Other
    })
}

/// A harness's default history place (DESIGN 3.7).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DefaultRoot {
    /// `claude` or `codex`.
    pub harness: &'static str,
    /// The history folder.
    pub path: PathBuf,
    /// How the place was chosen (`$CLAUDE_CONFIG_DIR`, `~/.claude`, …).
    pub from: String,
}

/// Where Claude Code and Codex keep their history: `$CLAUDE_CONFIG_DIR/projects` (each
/// of a comma-separated list) or `~/.claude/projects`; `$CODEX_HOME/sessions` or
/// `~/.codex/sessions`. `env` reads a variable (the process environment in the binary).
pub fn default_roots(env: impl Fn(&str) -> Option<String>) -> Vec<DefaultRoot> {
    let home = env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let mut roots = Vec::new();
    match env("CLAUDE_CONFIG_DIR").filter(|v| !v.trim().is_empty()) {
        Some(dirs) => roots.extend(
            dirs.split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(|dir| DefaultRoot {
                    harness: "claude",
                    path: PathBuf::from(dir).join("projects"),
                    from: "$CLAUDE_CONFIG_DIR".to_owned(),
                }),
        ),
        None => roots.extend(home.as_ref().map(|home| DefaultRoot {
            harness: "claude",
            path: home.join(".claude").join("projects"),
            from: "~/.claude".to_owned(),
        })),
    }
    match env("CODEX_HOME").filter(|v| !v.trim().is_empty()) {
        Some(dir) => roots.push(DefaultRoot {
            harness: "codex",
            path: PathBuf::from(dir.trim()).join("sessions"),
            from: "$CODEX_HOME".to_owned(),
        }),
        None => roots.extend(home.as_ref().map(|home| DefaultRoot {
            harness: "codex",
            path: home.join(".codex").join("sessions"),
            from: "~/.codex".to_owned(),
        })),
    }
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollout_names_carry_the_thread_id() {
        let path = Path::new(
            "/s/2026/12/01/rollout-2026-12-01T09-35-16-01a230f5-5cd9-7b10-9f15-111fd7d65211.jsonl",
        );
        assert_eq!(
            rollout_thread_id(path),
            Some("01a230f5-5cd9-7b10-9f15-111fd7d65211")
        );
        assert_eq!(rollout_thread_id(Path::new("/s/rollout-x.jsonl")), None);
        assert_eq!(rollout_thread_id(Path::new("/s/agent-x.jsonl")), None);
    }

    #[test]
    fn default_roots_follow_the_environment() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let roots = default_roots(env(&[("HOME", "/home/u")]));
        assert_eq!(
            roots.iter().map(|r| r.path.clone()).collect::<Vec<_>>(),
            vec![
                PathBuf::from("/home/u/.claude/projects"),
                PathBuf::from("/home/u/.codex/sessions")
            ]
        );
        let roots = default_roots(env(&[
            ("HOME", "/home/u"),
            ("CLAUDE_CONFIG_DIR", "/a, /b"),
            ("CODEX_HOME", "/c"),
        ]));
        assert_eq!(
            roots.iter().map(|r| r.path.clone()).collect::<Vec<_>>(),
            vec![
                PathBuf::from("/a/projects"),
                PathBuf::from("/b/projects"),
                PathBuf::from("/c/sessions")
            ]
        );
        assert_eq!(roots[0].from, "$CLAUDE_CONFIG_DIR");
    }
}
