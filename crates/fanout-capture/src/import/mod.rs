//! `fanout import`'s logic: find the files, recognise each one, feed it through
//! [`Capture`](crate::Capture), and summarise per file.
//!
//! Two kinds of history are read:
//! - fanout transcripts (DESIGN 3.1): a header line, then `{ts, dir, line}` per frame;
//!   each frame goes through the same [`Capture::observe`](crate::Capture::observe) as
//!   live traffic, with the recorded `ts` as its observation time;
//! - Claude Code's native session folders: `<id>.jsonl` plus `<id>/subagents/agent-*.jsonl`,
//!   mapped onto the same sessions, turns, tool-call messages and subagent rows.
//!
//! Every id is deterministic and every write a merge, so importing twice changes
//! nothing. A bad line is reported as `file:line: reason`, counted, and the rest of the
//! file still imports; a file that cannot be read at all is a [`FileFailure`].

mod claude;
mod discover;
mod lines;
mod transcript;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fanout_store::Store;
use serde::Serialize;

use crate::capture::CaptureStats;
use crate::counters::CounterSnapshot;

pub use discover::{Planned, discover};
pub use transcript::{CatchUp, TRANSCRIPT_TYPE, TRANSCRIPT_VERSION, catch_up_pending};

/// Which reader a file needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// A transcript written by `fanout proxy`.
    Transcript,
    /// A Claude Code session log (with its subagent logs).
    ClaudeNative,
}

/// One bad line: reported, counted, and skipped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LineError {
    /// The file.
    pub path: PathBuf,
    /// 1-based.
    pub line: u64,
    /// What is wrong with the line.
    pub reason: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path.display(), self.line, self.reason)
    }
}

/// Why a whole file could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be read.
    #[error("cannot read {}: {cause}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// A file named explicitly that is neither kind.
    #[error("{}: not a fanout transcript or a Claude Code session log ({reason})", path.display())]
    Unrecognised {
        /// The file.
        path: PathBuf,
        /// What its first line looked like.
        reason: String,
    },
    /// A transcript whose header line is unusable.
    #[error("{}:1: bad transcript header: {reason}", path.display())]
    BadHeader {
        /// The file.
        path: PathBuf,
        /// What is wrong with the header.
        reason: String,
    },
    /// A transcript a running proxy still owns.
    #[error("{}: a running `fanout proxy` is writing or applying it (and records it itself)", path.display())]
    InUse {
        /// The file.
        path: PathBuf,
    },
    /// The store refused what the file holds.
    #[error("{}: the store did not take it: {reason}", path.display())]
    Store {
        /// The file.
        path: PathBuf,
        /// The store's error.
        reason: String,
    },
}

/// A file that could not be imported (nothing of it, or only a prefix, was recorded).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FileFailure {
    /// The file.
    pub path: PathBuf,
    /// Why, as one line ([`ImportError`]'s text).
    pub error: String,
}

/// A file met while walking a directory that is neither kind; not an error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkippedFile {
    /// The file.
    pub path: PathBuf,
    /// Why it was passed over.
    pub reason: String,
}

/// What importing one file (a transcript, or a Claude session with its subagent logs) did.
#[derive(Clone, Debug, Serialize)]
pub struct FileSummary {
    /// The transcript, or the Claude session's main log.
    pub path: PathBuf,
    /// Which reader it took.
    pub kind: SourceKind,
    /// Subagent logs read with a Claude session (empty for transcripts).
    pub subagent_logs: Vec<PathBuf>,
    /// Frame lines read (transcript header excluded; blank lines not counted).
    pub frames: u64,
    /// Lines skipped because they were bad (each one is in `errors`).
    pub skipped: u64,
    /// Every bad line, in file order.
    pub errors: Vec<LineError>,
    /// What its capture recorded.
    pub capture: CaptureStats,
    /// Its subagent writer's counters (AC-26).
    pub counters: CounterSnapshot,
}

impl FileSummary {
    fn new(path: &Path, kind: SourceKind) -> Self {
        Self {
            path: path.to_owned(),
            kind,
            subagent_logs: Vec::new(),
            frames: 0,
            skipped: 0,
            errors: Vec::new(),
            capture: CaptureStats::default(),
            counters: CounterSnapshot::default(),
        }
    }

    fn bad_line(&mut self, path: &Path, line: u64, reason: impl Into<String>) {
        self.skipped += 1;
        self.errors.push(LineError {
            path: path.to_owned(),
            line,
            reason: reason.into(),
        });
    }

    /// A bad line, a failed write, anything that makes the import not clean.
    pub fn has_failures(&self) -> bool {
        !self.errors.is_empty() || self.counters.failed > 0 || self.capture.store_errors > 0
    }
}

/// What a whole import did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ImportSummary {
    /// Every unit imported, in the order of [`discover`].
    pub files: Vec<FileSummary>,
    /// Units that could not be imported.
    pub failed_files: Vec<FileFailure>,
    /// Files met in directories that are neither kind.
    pub skipped_files: Vec<SkippedFile>,
}

/// Totals over every file, for the one-line and JSON summaries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ImportTotals {
    /// Files imported (a Claude session with its subagent logs counts once).
    pub files: u64,
    /// Units that could not be imported.
    pub failed_files: u64,
    /// Frame lines read.
    pub frames: u64,
    /// Distinct session rows written.
    pub sessions: u64,
    /// Turns started.
    pub turns: u64,
    /// Tool-call message rows created.
    pub messages: u64,
    /// Distinct subagent rows written.
    pub subagent_rows: u64,
    /// Bad lines skipped.
    pub skipped: u64,
    /// Bad lines, failed files and failed writes.
    pub errors: u64,
    /// The subagent writers' counters, summed.
    pub counters: CounterSnapshot,
}

impl ImportSummary {
    /// The totals over every file.
    pub fn totals(&self) -> ImportTotals {
        let mut totals = ImportTotals {
            files: self.files.len() as u64,
            failed_files: self.failed_files.len() as u64,
            ..ImportTotals::default()
        };
        for file in &self.files {
            totals.frames += file.frames;
            totals.sessions += file.capture.sessions;
            totals.turns += file.capture.turns;
            totals.messages += file.capture.messages;
            totals.subagent_rows += file.capture.subagent_rows;
            totals.skipped += file.skipped;
            totals.errors +=
                file.errors.len() as u64 + file.counters.failed + file.capture.store_errors;
            totals.counters.add(&file.counters);
        }
        totals.errors += totals.failed_files;
        totals
    }

    /// Whether anything failed: the exit status of `fanout import`.
    pub fn has_failures(&self) -> bool {
        !self.failed_files.is_empty() || self.files.iter().any(FileSummary::has_failures)
    }
}

/// Hooks for a progress display; every method has a no-op default.
pub trait ImportProgress {
    /// Before the first file: how many units and bytes there are.
    fn planned(&self, _units: usize, _bytes: u64) {}
    /// A unit starts (`path` as [`Planned::path`]).
    fn file_started(&self, _path: &Path) {}
    /// Bytes of input consumed since the last call.
    fn advanced(&self, _bytes: u64) {}
    /// A unit is done, imported or failed.
    fn file_finished(&self, _path: &Path) {}
    /// A bad line, as it is found (the summary has them all too).
    fn line_error(&self, _error: &LineError) {}
}

/// A progress display that shows nothing.
pub struct NoProgress;

impl ImportProgress for NoProgress {}

/// Imports every file under `paths` (files or directories, walked recursively).
pub async fn import_paths(
    store: Arc<dyn Store>,
    paths: &[PathBuf],
    progress: &dyn ImportProgress,
) -> ImportSummary {
    let (plan, failures, skipped) = discover(paths);
    let mut summary = ImportSummary {
        files: Vec::new(),
        failed_files: failures,
        skipped_files: skipped,
    };
    progress.planned(plan.len(), plan.iter().map(Planned::bytes).sum());
    for unit in plan {
        progress.file_started(unit.path());
        let result = import_planned(Arc::clone(&store), &unit, progress).await;
        progress.file_finished(unit.path());
        match result {
            Ok(file) => summary.files.push(file),
            Err(error) => summary.failed_files.push(FileFailure {
                path: unit.path().to_owned(),
                error: error.to_string(),
            }),
        }
    }
    summary
}

/// Imports one discovered unit.
pub async fn import_planned(
    store: Arc<dyn Store>,
    unit: &Planned,
    progress: &dyn ImportProgress,
) -> Result<FileSummary, ImportError> {
    match unit {
        Planned::Transcript { path, .. } => {
            transcript::import_transcript(store, path, progress).await
        }
        Planned::ClaudeSession {
            log, subagent_logs, ..
        } => claude::import_claude_session(store, log, subagent_logs, progress).await,
    }
}
