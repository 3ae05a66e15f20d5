//! Transcripts that are not yet wholly in their store, and who may apply one.
//!
//! A proxy writes `<execution id>.pending` beside its transcript when it starts, naming
//! the store the transcript is for ([`fanout_store::store_identity`]), and removes it
//! once every line is in that store. A hint left behind (the store was away at the end,
//! the drain ran out of time, the proxy was killed) is what the next proxy or import on
//! the same store looks for to catch up ([`crate::import::catch_up_pending`]); the
//! store's mark ([`fanout_store::TranscriptMark`]) says where to resume.
//!
//! Whoever writes or applies a transcript holds an exclusive `flock` on it for as long
//! ([`try_lock`]): a transcript whose lock is taken is still being written or applied,
//! and is left alone. The kernel drops the lock with its holder, killed or not.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::TRANSCRIPT_EXTENSION;

/// The extension of the hint beside a transcript that is not yet wholly in its store.
pub const PENDING_EXTENSION: &str = "pending";

/// What a hint file holds.
#[derive(Debug, Serialize, Deserialize)]
struct Hint {
    /// The store the transcript is for, as [`fanout_store::store_identity`] spells it.
    store: String,
}

/// `<dir>/<id>.transcript` -> `<dir>/<id>.pending`.
pub fn pending_hint_path(transcript: &Path) -> PathBuf {
    transcript.with_extension(PENDING_EXTENSION)
}

/// Writes (or rewrites) the hint that `transcript` is not yet wholly in the store
/// `store_identity`; the file is private (0600), as is the transcript.
pub fn write_pending_hint(transcript: &Path, store_identity: &str) -> io::Result<()> {
    let hint = serde_json::to_vec(&Hint {
        store: store_identity.to_owned(),
    })
    .map_err(io::Error::other)?;
    let mut file = fanout_types::private_open_options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(pending_hint_path(transcript))?;
    file.write_all(&hint)?;
    file.write_all(b"\n")
}

/// Removes the hint of `transcript`; a missing one is fine.
pub fn remove_pending_hint(transcript: &Path) -> io::Result<()> {
    match std::fs::remove_file(pending_hint_path(transcript)) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// The transcripts in `dir` whose hints name the store `store_identity`, oldest name
/// first (execution ids are UUID v7: their order is their start order). A hint whose
/// transcript is gone is removed; an unreadable one is skipped.
pub fn pending_transcripts(dir: &Path, store_identity: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == PENDING_EXTENSION))
        .filter_map(|hint| {
            let text = std::fs::read(&hint).ok()?;
            let parsed: Hint = serde_json::from_slice(&text).ok()?;
            if parsed.store != store_identity {
                return None;
            }
            let transcript = hint.with_extension(TRANSCRIPT_EXTENSION);
            if transcript.is_file() {
                Some(transcript)
            } else {
                let _ = std::fs::remove_file(&hint);
                None
            }
        })
        .collect();
    found.sort();
    found
}

/// Takes the exclusive lock on a transcript without waiting: `Ok(false)` when another
/// process (or handle) holds it, i.e. the transcript is being written or applied.
// std's File::try_lock is newer than the workspace's MSRV (1.88), hence flock here.
#[allow(unsafe_code)]
pub fn try_lock(file: &File) -> io::Result<bool> {
    // SAFETY: flock only reads the descriptor, which `file` keeps open for the call.
    let done = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if done == 0 {
        return Ok(true);
    }
    let error = io::Error::last_os_error();
    if error.kind() == io::ErrorKind::WouldBlock {
        Ok(false)
    } else {
        Err(error)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn hints_name_their_store_and_locks_exclude() {
        let dir = tempfile::tempdir().unwrap();
        let mine = dir.path().join("0001.transcript");
        let other = dir.path().join("0002.transcript");
        let orphan = dir.path().join("0003.transcript");
        for path in [&mine, &other, &orphan] {
            std::fs::write(path, b"{}\n").unwrap();
        }
        write_pending_hint(&mine, "sqlite:///a.db").unwrap();
        write_pending_hint(&other, "sqlite:///b.db").unwrap();
        write_pending_hint(&orphan, "sqlite:///a.db").unwrap();
        std::fs::remove_file(&orphan).unwrap();
        let mode = std::fs::metadata(pending_hint_path(&mine))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            pending_transcripts(dir.path(), "sqlite:///a.db"),
            vec![mine.clone()]
        );
        assert!(
            !pending_hint_path(&orphan).exists(),
            "the orphan hint is gone"
        );
        remove_pending_hint(&mine).unwrap();
        remove_pending_hint(&mine).unwrap();
        assert!(pending_transcripts(dir.path(), "sqlite:///a.db").is_empty());

        let first = File::open(&other).unwrap();
        let second = File::open(&other).unwrap();
        assert!(try_lock(&first).unwrap());
        assert!(!try_lock(&second).unwrap(), "held by the first handle");
        drop(first);
        assert!(try_lock(&second).unwrap(), "released with its holder");
    }
}
