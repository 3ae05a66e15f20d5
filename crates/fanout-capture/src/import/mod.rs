//! `fanout import`'s logic: find the files, group and recognise them, feed each unit
//! through [`Capture`], and summarise per unit.
//!
//! Three kinds of history are read (DESIGN 3.7), each recognised by its first line:
//! - fanout transcripts (DESIGN 3.1): a header line, then `{ts, dir, line}` per frame;
//!   each frame goes through the same [`Capture::observe`](crate::Capture::observe) as
//!   live traffic, with the recorded `ts` as its observation time;
//! - Claude Code's native session folders (`claude`): `<id>.jsonl` with its subagent
//!   logs, mapped onto sessions, turns, tool-call messages, subagent rows and the usage
//!   ledger;
//! - Codex rollouts (`codex`): one file per thread, a root thread with its subagent
//!   threads, mapped the same way.
//!
//! Every id is deterministic and every write a merge, so importing twice changes
//! nothing. A bad line is reported as `file:line: reason`, counted, and the rest of the
//! file still imports; something passed over by design that deserves a mention (an
//! unknown record type, a usage figure that is not a number, an incomplete last line) is
//! a note, `file:line: note`, that fails nothing; a file that cannot be read at all is a
//! [`FileFailure`].
//!
//! Incremental (`import_files`, DESIGN 3.7): a unit whose files are all unchanged (size
//! and modification time) is skipped without opening them; a file that grew is written
//! from the offset of its last complete line (the lines before it read again only for
//! their context); a rewritten one (head hash differs, or shrank) is read again from the
//! start. A file's new state commits in the same transaction as the last rows read from
//! it, so a killed import resumes where its last committed unit ended. Parsing (the fast
//! path: borrowed serde structs, no JSON tree per record) of the next unit overlaps the
//! writes of the current one.

mod claude;
mod codex;
mod discover;
mod lenient;
mod lines;
mod source;
mod transcript;

use std::collections::VecDeque;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fanout_store::{ImportFileRecord, Store, Timestamp};
use serde::Serialize;

use crate::capture::{Capture, CaptureStats};
use crate::counters::CounterSnapshot;

pub use discover::{DefaultRoot, Discovery, Planned, default_roots, discover, discover_changed};
pub use source::KnownFiles;
pub use transcript::{CatchUp, TRANSCRIPT_TYPE, TRANSCRIPT_VERSION, catch_up_pending};

/// Which reader a file needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// A fanout transcript.
    Transcript,
    /// A Claude Code session folder.
    ClaudeNative,
    /// Codex rollout files.
    CodexRollout,
}

/// One bad line: reported, counted, and skipped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LineError {
    /// The file.
    pub path: PathBuf,
    /// 1-based.
    pub line: u64,
    /// What is wrong with it, or what was passed over.
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
    /// The file could not be opened or read.
    #[error("cannot read {}: {cause}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The file is of no kind the importer knows.
    #[error("{}: not a fanout transcript, a Claude Code session log or a Codex rollout ({reason})", path.display())]
    Unrecognised {
        /// The file.
        path: PathBuf,
        /// What its first line looked like.
        reason: String,
    },
    /// A transcript whose header line is wrong.
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
    /// Why it failed.
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

/// What importing one unit (a transcript, a Claude session with its subagent logs, or
/// a Codex session's rollouts) did.
#[derive(Clone, Debug, Serialize)]
pub struct FileSummary {
    /// The unit's main file.
    pub path: PathBuf,
    /// Which reader read it.
    pub kind: SourceKind,
    /// The unit's other files: a Claude session's subagent logs, a Codex session's other
    /// threads (empty for transcripts).
    pub subagent_logs: Vec<PathBuf>,
    /// New lines read (transcript header excluded; blank lines and lines read only for
    /// their context not counted).
    pub frames: u64,
    /// Lines skipped because they were bad (each one is in `errors`).
    pub skipped: u64,
    /// The bad lines, `file:line: reason`.
    pub errors: Vec<LineError>,
    /// Lines passed over by design that deserve a mention; they fail nothing.
    pub notes: Vec<LineError>,
    /// What capture wrote.
    pub capture: CaptureStats,
    /// The subagent writer's counters (AC-26).
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
            notes: Vec::new(),
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

    fn note(&mut self, path: &Path, line: u64, reason: impl Into<String>) {
        self.notes.push(LineError {
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

/// What was found in one place `fanout import` read (a default history place, or a
/// path given).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlaceSummary {
    /// `claude`, `codex`, or `path` for a path given on the command line.
    pub harness: String,
    /// The folder or file.
    pub path: PathBuf,
    /// How the place was chosen (`$CODEX_HOME`, `~/.claude`, `argument`).
    pub from: String,
    /// Whether it exists.
    pub exists: bool,
    /// Units (sessions, transcripts) read because they are new or changed.
    pub units: u64,
    /// Units skipped because none of their files changed since the last import.
    pub unchanged_units: u64,
    /// Files of the unchanged units (never opened).
    pub unchanged_files: u64,
}

/// What a whole import did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ImportSummary {
    /// Every unit read, in order.
    pub files: Vec<FileSummary>,
    /// Files that could not be imported.
    pub failed_files: Vec<FileFailure>,
    /// Files of no known kind.
    pub skipped_files: Vec<SkippedFile>,
    /// Per place read: what was found there.
    pub places: Vec<PlaceSummary>,
}

/// Totals over every file, for the one-line and JSON summaries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ImportTotals {
    /// Units imported (a Claude session with its subagent logs counts once).
    pub files: u64,
    /// Files that could not be imported.
    pub failed_files: u64,
    /// Units skipped unchanged.
    pub unchanged: u64,
    /// New lines read.
    pub frames: u64,
    /// Sessions written.
    pub sessions: u64,
    /// Turns written.
    pub turns: u64,
    /// Tool-call messages written.
    pub messages: u64,
    /// Subagent rows written.
    pub subagent_rows: u64,
    /// Usage-ledger rows (model responses) written.
    pub usage_rows: u64,
    /// Bad lines skipped.
    pub skipped: u64,
    /// Notes (lines passed over by design).
    pub notes: u64,
    /// Bad lines, failed files and failed writes.
    pub errors: u64,
    /// The subagent writer's counters over every unit.
    pub counters: CounterSnapshot,
}

impl ImportSummary {
    /// The totals over every unit.
    pub fn totals(&self) -> ImportTotals {
        let mut totals = ImportTotals {
            files: self.files.len() as u64,
            failed_files: self.failed_files.len() as u64,
            unchanged: self.places.iter().map(|p| p.unchanged_units).sum(),
            ..ImportTotals::default()
        };
        for file in &self.files {
            totals.frames += file.frames;
            totals.sessions += file.capture.sessions;
            totals.turns += file.capture.turns;
            totals.messages += file.capture.messages;
            totals.subagent_rows += file.capture.subagent_rows;
            totals.usage_rows += file.capture.usage_rows;
            totals.skipped += file.skipped;
            totals.notes += file.notes.len() as u64;
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
    /// A unit starts being read.
    fn file_started(&self, _path: &Path) {}
    /// Bytes of input consumed since the last call.
    fn advanced(&self, _bytes: u64) {}
    /// A unit is written.
    fn file_finished(&self, _path: &Path) {}
    /// A bad line, as it is found (the summary has them all too).
    fn line_error(&self, _error: &LineError) {}
}

/// A progress display that shows nothing.
pub struct NoProgress;

impl ImportProgress for NoProgress {}

/// Imports every file under `paths` (files or directories, walked recursively), each
/// read from its start (nothing known of earlier imports), and records what it read.
pub async fn import_paths(
    store: Arc<dyn Store>,
    paths: &[PathBuf],
    progress: &dyn ImportProgress,
) -> ImportSummary {
    import_paths_incremental(store, paths, &KnownFiles::default(), progress).await
}

/// Imports what changed under `paths` since the import that left `known`
/// (`SqlStore::import_files`): see the module doc.
pub async fn import_paths_incremental(
    store: Arc<dyn Store>,
    paths: &[PathBuf],
    known: &KnownFiles,
    progress: &dyn ImportProgress,
) -> ImportSummary {
    let found = discover_changed(paths, known);
    let place = PlaceSummary {
        harness: "path".to_owned(),
        path: paths.first().cloned().unwrap_or_default(),
        from: "argument".to_owned(),
        exists: true,
        units: found.plan.len() as u64,
        unchanged_units: found.unchanged_units,
        unchanged_files: found.unchanged_files,
    };
    let mut summary = ImportSummary {
        places: vec![place],
        ..ImportSummary::default()
    };
    run_plan(store, found, known, progress, &mut summary).await;
    summary
}

/// Imports what changed in each harness's default history place (`default_roots`),
/// saying per place what it found there; a place that does not exist is no error.
pub async fn import_default_histories(
    store: Arc<dyn Store>,
    roots: &[DefaultRoot],
    known: &KnownFiles,
    progress: &dyn ImportProgress,
) -> ImportSummary {
    let mut summary = ImportSummary::default();
    let mut all = Discovery::default();
    for root in roots {
        let exists = root.path.is_dir();
        let found = if exists {
            discover_changed(std::slice::from_ref(&root.path), known)
        } else {
            Discovery::default()
        };
        summary.places.push(PlaceSummary {
            harness: root.harness.to_owned(),
            path: root.path.clone(),
            from: root.from.clone(),
            exists,
            units: found.plan.len() as u64,
            unchanged_units: found.unchanged_units,
            unchanged_files: found.unchanged_files,
        });
        all.plan.extend(found.plan);
        all.failures.extend(found.failures);
        all.skipped.extend(found.skipped);
    }
    run_plan(store, all, known, progress, &mut summary).await;
    summary
}

/// A unit read and ready to be written.
enum ReadUnit {
    Claude(claude::ReadSession),
    Codex(codex::ReadSession),
}

/// Imports the units of a discovery in order. The native-history units are parsed on
/// this task and written by another ([`UnitWriter`]), so parsing runs ahead of the
/// store's writes (by at most [`READ_AHEAD_WRITES`] queued writes) and small units share a commit
/// ([`UnitGroup`]).
async fn run_plan(
    store: Arc<dyn Store>,
    found: Discovery,
    known: &KnownFiles,
    progress: &dyn ImportProgress,
    summary: &mut ImportSummary,
) {
    summary.failed_files.extend(found.failures);
    summary.skipped_files.extend(found.skipped);
    progress.planned(
        found.plan.len(),
        found.plan.iter().map(Planned::bytes).sum(),
    );
    let mut writer = UnitWriter::start();
    for unit in found.plan {
        progress.file_started(unit.path());
        let read = match &unit {
            Planned::Transcript { path, .. } => {
                // In order: what was queued before it is committed first.
                writer.commit(summary).await;
                let result = import_transcript(Arc::clone(&store), path, progress).await;
                progress.file_finished(path);
                match result {
                    Ok(file) => summary.files.push(file),
                    Err(error) => summary.failed_files.push(FileFailure {
                        path: path.clone(),
                        error: error.to_string(),
                    }),
                }
                continue;
            }
            Planned::ClaudeSession {
                log, subagent_logs, ..
            } => claude::read_claude_session(log, subagent_logs, known, progress)
                .map(ReadUnit::Claude),
            Planned::CodexSession {
                root_thread, files, ..
            } => {
                codex::read_codex_session(root_thread, files, known, progress).map(ReadUnit::Codex)
            }
        };
        match read {
            Ok(read) => {
                // Replayed here, committed there: the writer task only writes.
                let queued = match read {
                    ReadUnit::Claude(read) => {
                        claude::replay_claude_session(Arc::clone(&store), read).await
                    }
                    ReadUnit::Codex(read) => {
                        codex::replay_codex_session(Arc::clone(&store), read).await
                    }
                };
                writer.write(unit.path(), queued, summary).await;
            }
            Err(error) => summary.failed_files.push(FileFailure {
                path: unit.path().to_owned(),
                error: error.to_string(),
            }),
        }
        progress.file_finished(unit.path());
    }
    writer.finish(summary).await;
}

/// How many queued writes (the units' and the writer's group) may wait to be
/// committed: parsing runs ahead of a group commit instead of waiting for it, and the
/// writes held in memory stay bounded (a few MiB). Twice [`GROUP_COMMIT_WRITES`], and
/// a unit takes at most that many permits, so a unit always fits beside a group that
/// is not full yet.
const READ_AHEAD_WRITES: usize = 2 * GROUP_COMMIT_WRITES;

/// What [`run_plan`] asks of the writer task.
enum ToWriter {
    /// A replayed unit: queue its writes (committing when its group is full); the
    /// permits are its share of [`READ_AHEAD_WRITES`], given back once committed.
    Unit(Box<QueuedUnit>, tokio::sync::OwnedSemaphorePermit),
    /// Commit what is queued and answer with every summary committed since the last
    /// answer.
    Commit(tokio::sync::oneshot::Sender<Vec<FileSummary>>),
}

/// The task that writes the read units, in the order they were read.
struct UnitWriter {
    to: Option<tokio::sync::mpsc::UnboundedSender<ToWriter>>,
    /// [`READ_AHEAD_WRITES`] permits: what bounds the channel.
    ahead: Arc<tokio::sync::Semaphore>,
    /// Taken once joined.
    task: Option<tokio::task::JoinHandle<Vec<FileSummary>>>,
    /// The units handed over whose summaries have not come back: named should the
    /// task end early.
    handed: Vec<PathBuf>,
}

impl UnitWriter {
    fn start() -> Self {
        let (to, mut from) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut group = UnitGroup::default();
            let mut committed = Vec::new();
            while let Some(message) = from.recv().await {
                match message {
                    ToWriter::Unit(queued, permit) => {
                        group.add(*queued, permit);
                        if group.is_full() {
                            committed.extend(group.commit().await);
                        }
                    }
                    ToWriter::Commit(answer) => {
                        committed.extend(group.commit().await);
                        // The asker is waiting; if it is gone, so is the import.
                        let _ = answer.send(std::mem::take(&mut committed));
                    }
                }
            }
            committed.extend(group.commit().await);
            committed
        });
        UnitWriter {
            to: Some(to),
            ahead: Arc::new(tokio::sync::Semaphore::new(READ_AHEAD_WRITES)),
            task: Some(task),
            handed: Vec::new(),
        }
    }

    /// Hands a replayed unit to the writer (waiting while [`READ_AHEAD_WRITES`] writes
    /// are queued).
    async fn write(&mut self, path: &Path, unit: QueuedUnit, summary: &mut ImportSummary) {
        let share = unit.capture.queued_writes().clamp(1, GROUP_COMMIT_WRITES);
        let permit = Arc::clone(&self.ahead)
            .acquire_many_owned(u32::try_from(share).unwrap_or(u32::MAX))
            .await;
        let sent = match (&self.to, permit) {
            (Some(to), Ok(permit)) => to.send(ToWriter::Unit(Box::new(unit), permit)).is_ok(),
            _ => false,
        };
        if sent {
            self.handed.push(path.to_owned());
            return;
        }
        self.stopped(summary).await;
        summary.failed_files.push(FileFailure {
            path: path.to_owned(),
            error: "not written: the import stopped writing before this unit".to_owned(),
        });
    }

    /// Commits everything handed over so far; its summaries go to `summary`.
    async fn commit(&mut self, summary: &mut ImportSummary) {
        let Some(to) = &self.to else {
            return;
        };
        let (answer, answered) = tokio::sync::oneshot::channel();
        if to.send(ToWriter::Commit(answer)).is_ok()
            && let Ok(committed) = answered.await
        {
            summary.files.extend(committed);
            self.handed.clear();
            return;
        }
        self.stopped(summary).await;
    }

    /// Commits the rest and waits for the task.
    async fn finish(mut self, summary: &mut ImportSummary) {
        self.to = None;
        self.join(summary).await;
    }

    /// The task ended before it was told to: say so, once.
    async fn stopped(&mut self, summary: &mut ImportSummary) {
        if self.to.take().is_some() {
            self.join(summary).await;
        }
    }

    async fn join(&mut self, summary: &mut ImportSummary) {
        let Some(task) = self.task.take() else {
            return;
        };
        match task.await {
            Ok(committed) => summary.files.extend(committed),
            // It panicked: of the units whose summaries did not come back, none is
            // known to be written.
            Err(error) => {
                for path in &self.handed {
                    summary.failed_files.push(FileFailure {
                        path: path.clone(),
                        error: format!("the import stopped writing ({error}): this unit may be missing or incomplete"),
                    });
                }
            }
        }
        self.handed.clear();
    }
}

/// How many queued writes a group of small units gathers before it commits. One
/// commit per session was 0.4 s of a 1.4 s import of the 256 MiB bench history (180
/// sessions); by group size, that import took 0.71 s (512 writes), 0.60 s (1024),
/// 0.56 s (2048), 0.59 s (4096), 0.63 s (8192) and 0.77 s (32768): larger groups
/// outgrow SQLite's page cache and hold more in memory (23 MiB peak at 2048, 62 MiB at
/// 32768).
const GROUP_COMMIT_WRITES: usize = 2048;

/// Units whose writes are queued but not committed yet, committed together as one
/// transaction ([`Capture::commit_queued_together`]); each unit's import-file records
/// are in it, so a unit is in the store whole or not at all either way.
#[derive(Default)]
struct UnitGroup {
    units: Vec<QueuedUnit>,
    writes: usize,
    /// The units' shares of [`READ_AHEAD_WRITES`], given back by the commit.
    permits: Vec<tokio::sync::OwnedSemaphorePermit>,
}

impl UnitGroup {
    fn add(&mut self, unit: QueuedUnit, permit: tokio::sync::OwnedSemaphorePermit) {
        self.writes += unit.capture.queued_writes();
        self.units.push(unit);
        self.permits.push(permit);
    }

    fn is_full(&self) -> bool {
        self.writes >= GROUP_COMMIT_WRITES
    }

    /// Commits every queued unit; their summaries, in order.
    async fn commit(&mut self) -> Vec<FileSummary> {
        let mut units = std::mem::take(&mut self.units);
        self.writes = 0;
        let mut captures: Vec<&mut Capture> = units.iter_mut().map(|u| &mut u.capture).collect();
        Capture::commit_queued_together(&mut captures).await;
        self.permits.clear();
        units.into_iter().map(QueuedUnit::into_summary).collect()
    }
}

/// A unit replayed into its capture, its writes (its import-file records last) queued.
struct QueuedUnit {
    capture: Capture,
    summary: FileSummary,
}

impl QueuedUnit {
    fn into_summary(self) -> FileSummary {
        let QueuedUnit {
            capture,
            mut summary,
        } = self;
        summary.capture = capture.stats();
        summary.counters = capture.counters().snapshot();
        summary
    }
}

/// A transcript is read whole whenever it changed (the ACP tracker's state is not kept
/// across imports); once it imported cleanly its state is recorded, so an unchanged one
/// is skipped next time.
async fn import_transcript(
    store: Arc<dyn Store>,
    path: &Path,
    progress: &dyn ImportProgress,
) -> Result<FileSummary, ImportError> {
    let read_err = |cause| ImportError::Read {
        path: path.to_owned(),
        cause,
    };
    let stat = source::Stat::of(path).map_err(read_err)?;
    let head = source::head_sha256(path).map_err(read_err)?;
    let mut file = transcript::import_transcript(Arc::clone(&store), path, progress).await?;
    if !file.has_failures() {
        let state = source::whole_file_record(path, stat, head);
        if let Err(error) = store.upsert_import_file(&state).await {
            file.capture.store_errors += 1;
            tracing::warn!(path = %path.display(), error = %error, "cannot record the import state of a transcript");
        }
    }
    Ok(file)
}

/// Pops the earliest head among a unit's streams (ties: the earlier stream, so the
/// session's own log or the root thread first); each stream keeps its own order.
fn next_in_time_order<K: Clone, E>(
    streams: &mut [(K, VecDeque<E>)],
    time: impl Fn(&E) -> Timestamp,
) -> Option<(K, E)> {
    let index = streams
        .iter()
        .enumerate()
        .filter_map(|(i, (_, entries))| entries.front().map(|e| (time(e), i)))
        .min()?
        .1;
    let (key, entries) = &mut streams[index];
    entries.pop_front().map(|e| (key.clone(), e))
}

/// Queues a replayed unit's import-file records behind its writes; the unit's group
/// commits them ([`UnitGroup`]).
fn queue_unit(
    mut capture: Capture,
    files: Vec<ImportFileRecord>,
    summary: FileSummary,
) -> QueuedUnit {
    for file in files {
        capture.queue_import_file(file);
    }
    QueuedUnit { capture, summary }
}
