//! Source files and what an import knows of them (`import_files`, DESIGN 3.7): the
//! change test that decides, without reading a file's content, whether it is unchanged,
//! and otherwise whether it grew (read from the offset of its last complete line) or was
//! rewritten (read again from the start); and the line reader that reads a file once,
//! in large chunks, and says where each complete line ends.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use fanout_store::{ImportFileRecord, Timestamp};

use super::{FileSummary, ImportError, ImportProgress};
use sha2::{Digest, Sha256};

/// How many leading bytes the head hash covers.
pub(super) const HEAD_BYTES: usize = 4096;

/// What the store knows of the files earlier imports read, by path
/// (`SqlStore::import_files`).
#[derive(Clone, Debug, Default)]
pub struct KnownFiles {
    by_path: HashMap<PathBuf, ImportFileRecord>,
}

impl KnownFiles {
    /// From the stored `import_files` rows.
    pub fn new(records: impl IntoIterator<Item = ImportFileRecord>) -> Self {
        KnownFiles {
            by_path: records
                .into_iter()
                .map(|r| (PathBuf::from(&r.path), r))
                .collect(),
        }
    }

    pub(super) fn get(&self, path: &Path) -> Option<&ImportFileRecord> {
        self.by_path.get(path)
    }
}

/// A file's size and modification time, from one `stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stat {
    pub(super) size: u64,
    pub(super) mtime_ns: i64,
}

impl Stat {
    pub(super) fn of(path: &Path) -> io::Result<Stat> {
        let meta = std::fs::metadata(path)?;
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        Ok(Stat {
            size: meta.len(),
            mtime_ns,
        })
    }

    /// Unchanged since `known` was written: same size and modification time. Decided
    /// without opening the file.
    pub(super) fn unchanged_since(&self, known: &ImportFileRecord) -> bool {
        i64::try_from(self.size).is_ok_and(|size| size == known.size)
            && self.mtime_ns == known.mtime
    }
}

/// Where reading a file starts and which of its lines are new.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Resume {
    /// Never imported, or rewritten (its head hash differs or it shrank): every line is
    /// read and written.
    FromStart,
    /// It grew: every line is read (the earlier ones only for their context: open
    /// turns, calls in flight, links), but only the lines from `offset` on are written.
    After { offset: u64 },
}

impl Resume {
    /// Whether the line starting at byte `start` is new (its writes go to the store).
    pub(super) fn writes(&self, start: u64) -> bool {
        match self {
            Resume::FromStart => true,
            Resume::After { offset } => start >= *offset,
        }
    }
}

/// The change test for a file that is not [`Stat::unchanged_since`] its known state:
/// rewritten (head hash differs, or smaller than the offset) or appended.
pub(super) fn resume_point(
    path: &Path,
    stat: Stat,
    known: Option<&ImportFileRecord>,
) -> io::Result<Resume> {
    let Some(known) = known else {
        return Ok(Resume::FromStart);
    };
    let offset = u64::try_from(known.offset).unwrap_or(0);
    let known_size = u64::try_from(known.size).unwrap_or(u64::MAX);
    if stat.size < known_size || stat.size < offset {
        return Ok(Resume::FromStart);
    }
    // The same bytes as when it was hashed: the first 4 KiB, or the whole file as it was
    // when it was shorter (a small file that grew keeps its head).
    let hashed = usize::try_from(known_size)
        .unwrap_or(HEAD_BYTES)
        .min(HEAD_BYTES);
    if head_sha256_of(path, hashed)? != known.head_sha256 {
        return Ok(Resume::FromStart);
    }
    Ok(Resume::After { offset })
}

/// SHA-256 of the first [`HEAD_BYTES`] (the whole file when shorter), lowercase hex.
pub(super) fn head_sha256(path: &Path) -> io::Result<String> {
    head_sha256_of(path, HEAD_BYTES)
}

/// SHA-256 of the first `len` bytes (fewer when the file is shorter), lowercase hex.
fn head_sha256_of(path: &Path, len: usize) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut head = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        let n = file.read(&mut head[filled..])?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(hex(&Sha256::digest(&head[..filled])))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// One complete line: its 1-based number, the byte offset where it starts and the
/// bytes without the line break.
#[derive(Clone, Copy, Debug)]
pub(super) struct Line<'a> {
    pub(super) number: u64,
    pub(super) start: u64,
    pub(super) bytes: &'a [u8],
}

/// What reading a file found, for its `import_files` state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ReadEnd {
    /// Bytes read in all (the file's size as read).
    pub(super) size: u64,
    /// Just past the last complete line.
    pub(super) offset: u64,
    /// The line number of an incomplete last line left for the next import (a file still
    /// being written), if any.
    pub(super) incomplete_line: Option<u64>,
    pub(super) head_sha256: String,
}

impl ReadEnd {
    /// The `import_files` row for the file as it was read.
    pub(super) fn record(&self, path: &Path, stat: Stat) -> ImportFileRecord {
        ImportFileRecord {
            path: path.to_string_lossy().into_owned(),
            size: i64::try_from(self.size).unwrap_or(i64::MAX),
            mtime: stat.mtime_ns,
            head_sha256: self.head_sha256.clone(),
            offset: i64::try_from(self.offset).unwrap_or(i64::MAX),
            imported_at: Timestamp::now(),
        }
    }
}

/// The `import_files` row of a file read whole (every byte of `stat.size` consumed).
pub(super) fn whole_file_record(path: &Path, stat: Stat, head_sha256: String) -> ImportFileRecord {
    ImportFileRecord {
        path: path.to_string_lossy().into_owned(),
        size: i64::try_from(stat.size).unwrap_or(i64::MAX),
        mtime: stat.mtime_ns,
        head_sha256,
        offset: i64::try_from(stat.size).unwrap_or(i64::MAX),
        imported_at: Timestamp::now(),
    }
}

/// What one line of a native log gave: `Ok(note)` (a note when something was passed
/// over that deserves a mention) or `Err(reason)`, a bad line.
pub(super) type LineOutcome = Result<Option<String>, String>;

/// Reads one native log for an import: decides from `known` which of its lines are new
/// (an unchanged file of a changed unit is read for its context only), hands each
/// non-blank line to `on_line` with whether it writes, records the bad lines and notes
/// of the new lines in `summary`, notes an incomplete last line, and pushes the file's
/// `import_files` state as read onto `files`. `what` names the file in that note.
pub(super) fn read_source_lines(
    path: &Path,
    what: &str,
    known: &KnownFiles,
    summary: &mut FileSummary,
    files: &mut Vec<ImportFileRecord>,
    progress: &dyn ImportProgress,
    mut on_line: impl FnMut(&Line<'_>, bool) -> LineOutcome,
) -> Result<(), ImportError> {
    let read_err = |cause| ImportError::Read {
        path: path.to_owned(),
        cause,
    };
    let stat = Stat::of(path).map_err(read_err)?;
    let resume = match known.get(path) {
        Some(state) if stat.unchanged_since(state) => Resume::After {
            offset: u64::try_from(state.offset).unwrap_or(0),
        },
        state => resume_point(path, stat, state).map_err(read_err)?,
    };
    let end = read_lines(path, |line| {
        progress.advanced(line.bytes.len() as u64 + 1);
        if line.bytes.trim_ascii().is_empty() {
            return;
        }
        let writes = resume.writes(line.start);
        if writes {
            summary.frames += 1;
        }
        match on_line(&line, writes) {
            Ok(Some(note)) if writes => summary.note(path, line.number, note),
            Err(reason) if writes => {
                summary.bad_line(path, line.number, reason);
                if let Some(error) = summary.errors.last() {
                    progress.line_error(error);
                }
            }
            _ => {}
        }
    })
    .map_err(read_err)?;
    if let Some(number) = end.incomplete_line {
        summary.note(
            path,
            number,
            format!("incomplete last line (the {what} is still being written?): left for the next import"),
        );
    }
    files.push(end.record(path, stat));
    Ok(())
}

/// How much is read at once.
const CHUNK: usize = 1 << 20;

/// Reads `path` from its start, calling `on_line` for every complete line (`\n`-ended;
/// a trailing `\r` is dropped) in order. The last line is complete only when it ends in
/// `\n`, or when it is valid JSON (a file that simply lacks its final newline); anything
/// else after the last `\n` is left for the next import. Memory stays at one chunk plus
/// the longest line.
pub(super) fn read_lines(path: &Path, mut on_line: impl FnMut(Line<'_>)) -> io::Result<ReadEnd> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut hashed = 0usize;
    let mut buffer: Vec<u8> = Vec::with_capacity(CHUNK);
    // `buffer[..pending]` is the start of a line whose end has not been read yet; it
    // begins at byte `pending_start` of the file.
    let mut pending_start = 0u64;
    let mut number = 0u64;
    let mut size = 0u64;
    loop {
        let filled = buffer.len();
        // Into the spare capacity, nothing zeroed first (most logs are far smaller
        // than a chunk).
        let n = (&mut file).take(CHUNK as u64).read_to_end(&mut buffer)?;
        if n == 0 {
            break;
        }
        if hashed < HEAD_BYTES {
            let take = (HEAD_BYTES - hashed).min(n);
            hasher.update(&buffer[filled..filled + take]);
            hashed += take;
        }
        size += n as u64;
        let mut line_start = 0usize;
        for end in memchr::memchr_iter(b'\n', &buffer[filled..]).map(|i| i + filled) {
            number += 1;
            let mut bytes = &buffer[line_start..end];
            if let Some(rest) = bytes.strip_suffix(b"\r") {
                bytes = rest;
            }
            on_line(Line {
                number,
                start: pending_start + line_start as u64,
                bytes,
            });
            line_start = end + 1;
        }
        pending_start += line_start as u64;
        buffer.drain(..line_start);
    }
    let mut offset = pending_start;
    let mut incomplete_line = None;
    if !buffer.trim_ascii().is_empty() {
        if serde_json::from_slice::<serde::de::IgnoredAny>(&buffer).is_ok() {
            number += 1;
            on_line(Line {
                number,
                start: pending_start,
                bytes: &buffer,
            });
            offset = size;
        } else {
            incomplete_line = Some(number + 1);
        }
    } else {
        offset = size;
    }
    Ok(ReadEnd {
        size,
        offset,
        incomplete_line,
        head_sha256: hex(&hasher.finalize()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(text: &[u8]) -> (Vec<(u64, u64, String)>, ReadEnd) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.jsonl");
        std::fs::write(&path, text).unwrap();
        let mut seen = Vec::new();
        let end = read_lines(&path, |l| {
            seen.push((
                l.number,
                l.start,
                String::from_utf8_lossy(l.bytes).into_owned(),
            ));
        })
        .unwrap();
        assert_eq!(end.head_sha256, head_sha256(&path).unwrap());
        (seen, end)
    }

    #[test]
    fn offsets_end_after_the_last_complete_line() {
        let (lines, end) = lines_of(b"{\"a\":1}\r\n\n{\"b\":2}\n{\"c\":");
        assert_eq!(
            lines,
            vec![
                (1, 0, "{\"a\":1}".to_owned()),
                (2, 9, String::new()),
                (3, 10, "{\"b\":2}".to_owned())
            ]
        );
        assert_eq!(
            (end.size, end.offset, end.incomplete_line),
            (23, 18, Some(4))
        );
    }

    #[test]
    fn a_complete_last_line_without_newline_counts() {
        let (lines, end) = lines_of(b"{\"a\":1}\n{\"b\":2}");
        assert_eq!(lines.len(), 2);
        assert_eq!((end.offset, end.incomplete_line), (15, None));
    }

    #[test]
    fn lines_longer_than_a_chunk_are_whole() {
        let long = format!("{{\"x\":\"{}\"}}\n{{}}\n", "y".repeat(CHUNK * 2 + 17));
        let (lines, end) = lines_of(long.as_bytes());
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].1 as usize, long.len() - 3);
        assert_eq!(end.offset as usize, long.len());
    }

    #[test]
    fn resume_reads_again_a_rewritten_or_shrunk_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.jsonl");
        std::fs::write(&path, b"{\"a\":1}\n").unwrap();
        let end = read_lines(&path, |_| {}).unwrap();
        let known = end.record(&path, Stat::of(&path).unwrap());
        std::fs::write(&path, b"{\"a\":1}\n{\"b\":2}\n").unwrap();
        let grown = Stat::of(&path).unwrap();
        assert_eq!(
            resume_point(&path, grown, Some(&known)).unwrap(),
            Resume::After { offset: 8 }
        );
        std::fs::write(&path, b"{\"z\":1}\n{\"b\":2}\n").unwrap();
        let rewritten = Stat::of(&path).unwrap();
        assert_eq!(
            resume_point(&path, rewritten, Some(&known)).unwrap(),
            Resume::FromStart
        );
        std::fs::write(&path, b"{}\n").unwrap();
        let shrunk = Stat::of(&path).unwrap();
        assert_eq!(
            resume_point(&path, shrunk, Some(&known)).unwrap(),
            Resume::FromStart
        );
        assert!(Resume::After { offset: 8 }.writes(8));
        assert!(!Resume::After { offset: 8 }.writes(7));
    }
}
