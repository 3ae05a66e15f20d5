//! Version 2 transcripts into a store, from where the store says they stopped, and the
//! catch-up of every transcript a proxy left not wholly applied.
//!
//! A version 2 transcript carries no record of what was applied; its store does (its
//! mark, [`fanout_store::TranscriptMark`], committed with the writes it covers). So
//! importing one applies exactly what its store lacks: the records up to the mark are
//! replayed (capture follows them, writing nothing), the rest is applied and marked.
//! Importing into another store applies all of it. Whoever applies a transcript holds
//! its lock; one that a running proxy holds is left to that proxy.

use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fanout_acp::DEFAULT_MAX_LINE_BYTES;
use fanout_store::Store;
use serde::Serialize;

use super::super::{FileFailure, FileSummary, ImportError, ImportProgress, NoProgress, SourceKind};
use crate::capture::{Capture, CaptureConfig};
use crate::transcript::{
    Applier, ReadError, RecordReader, pending_transcripts, remove_pending_hint, try_lock,
};

/// How long in all an import waits for a store that cannot take its writes now (locked
/// by another writer, restarting) before it gives up on the file.
const STORE_PATIENCE: Duration = Duration::from_secs(120);
/// The longest pause between two attempts.
const MAX_PAUSE: Duration = Duration::from_secs(5);
/// Lines per group commit during import.
const IMPORT_BATCH_LINES: usize = 256;

/// Where a transcript's records start.
#[derive(Clone, Copy, Debug)]
pub(in crate::import) struct Records {
    /// Just past the header line.
    pub offset: u64,
    /// The line the first record is on.
    pub line: u64,
}

pub(in crate::import) async fn import_v2<P: ImportProgress + ?Sized>(
    store: Arc<dyn Store>,
    path: &Path,
    records: Records,
    config: CaptureConfig,
    progress: &P,
) -> Result<FileSummary, ImportError> {
    let read_err = |cause| ImportError::Read {
        path: path.to_owned(),
        cause,
    };
    let mut file = std::fs::File::open(path).map_err(read_err)?;
    if !try_lock(&file).map_err(read_err)? {
        return Err(ImportError::InUse {
            path: path.to_owned(),
        });
    }
    file.seek(SeekFrom::Start(records.offset))
        .map_err(read_err)?;
    let execution = config.agent_execution_id.clone();
    let mark = match &execution {
        Some(id) => store
            .transcript_applied(id)
            .await
            .map_err(|error| ImportError::Store {
                path: path.to_owned(),
                reason: format!("cannot read how far it is applied: {error}"),
            })?,
        None => None,
    };
    let mut summary = FileSummary::new(path, SourceKind::Transcript);
    let capture = Capture::new(store, config);
    let mut applier = Applier::new(
        capture,
        execution,
        mark.unwrap_or(0),
        DEFAULT_MAX_LINE_BYTES,
    );
    // The lock is held by `file`'s descriptor, which the reader owns until the end.
    let mut reader = RecordReader::new(file, records.offset, records.line);
    let mut reported = records.offset;
    loop {
        match reader.next_record() {
            Ok(Some((record, end))) => {
                applier.push(&record, end);
                progress.advanced(end - reported);
                reported = end;
            }
            Ok(None) => break,
            Err(ReadError::Io(cause)) => return Err(read_err(cause)),
            Err(ReadError::Format { line, error }) => {
                // Nothing after damage can be trusted to be framed right: stop there.
                summary.bad_line(
                    path,
                    line,
                    format!("{} (the rest of the file is not read)", error.0),
                );
                if let Some(error) = summary.errors.last() {
                    progress.line_error(error);
                }
                break;
            }
        }
        if applier.queued_lines() >= IMPORT_BATCH_LINES {
            commit(&mut applier, path).await?;
        }
    }
    commit(&mut applier, path).await?;
    if reader.incomplete() > 0 {
        tracing::warn!(
            path = %path.display(),
            bytes = reader.incomplete(),
            "the last record is cut short (its writer was killed while writing it); everything before it is imported"
        );
    }
    let stats = applier.stats();
    summary.frames = stats.lines.iter().sum();
    summary.capture = applier.capture().stats();
    summary.counters = applier.capture().counters().snapshot();
    Ok(summary)
}

/// Commits what the applier has queued, waiting (with growing pauses, at most
/// [`STORE_PATIENCE`] in all) while the store cannot take it.
async fn commit(applier: &mut Applier, path: &Path) -> Result<(), ImportError> {
    let mut waited = Duration::ZERO;
    let mut pause = Duration::from_millis(50);
    loop {
        match applier.commit().await {
            Ok(()) => return Ok(()),
            Err(held) if waited < STORE_PATIENCE => {
                tracing::debug!(path = %path.display(), "{held}; trying again in {pause:?}");
                tokio::time::sleep(pause).await;
                waited += pause;
                pause = (pause * 2).min(MAX_PAUSE);
            }
            Err(held) => {
                return Err(ImportError::Store {
                    path: path.to_owned(),
                    reason: format!(
                        "{held}; gave up after {STORE_PATIENCE:?} (what was written is marked: importing it again resumes there)"
                    ),
                });
            }
        }
    }
}

/// What [`catch_up_pending`] did.
#[derive(Debug, Default, Serialize)]
pub struct CatchUp {
    /// Transcripts applied to the end (their hints are gone).
    pub files: Vec<FileSummary>,
    /// Transcripts that could not be applied now (their hints stay for the next time).
    pub failed: Vec<FileFailure>,
    /// Transcripts a running proxy is still writing or applying.
    pub in_use: Vec<PathBuf>,
}

impl CatchUp {
    /// Lines applied to the store (those already in it not counted).
    pub fn lines_applied(&self) -> u64 {
        self.files.iter().map(|f| f.capture.frames_seen).sum()
    }
}

/// Applies to `store` what is missing from it of every transcript in `dir` that a proxy
/// left not wholly in it (a hint naming `store_identity`, [`crate::transcript`]'s
/// pending module): the writes after each one's mark, in order, then removes its hint.
/// A transcript in use by a running proxy is left to it; one that fails keeps its hint.
pub async fn catch_up_pending(store: Arc<dyn Store>, dir: &Path, store_identity: &str) -> CatchUp {
    let mut done = CatchUp::default();
    for transcript in pending_transcripts(dir, store_identity) {
        match super::import_transcript(Arc::clone(&store), &transcript, &NoProgress).await {
            Ok(summary) => {
                if let Err(error) = remove_pending_hint(&transcript) {
                    tracing::warn!(path = %transcript.display(), %error, "cannot remove the hint of a transcript now applied");
                }
                done.files.push(summary);
            }
            Err(ImportError::InUse { path }) => done.in_use.push(path),
            Err(error) => done.failed.push(FileFailure {
                path: transcript.clone(),
                error: error.to_string(),
            }),
        }
    }
    done
}
