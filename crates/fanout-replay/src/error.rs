//! Errors of loading a scenario's session logs into scripts. Every error about
//! a file names the file, and every error about its content names the line.

use std::path::PathBuf;

use fanout_sessionlog::ReadError;

/// A scenario's session logs could not be loaded into scripts.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A file or directory could not be read.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// A session log is invalid (the message is `file:line: why`).
    #[error("{0}")]
    Log(ReadError),
    /// A scenario directory has no session logs to replay.
    #[error(
        "{}: no session logs to replay (expected session.jsonl, session.1.jsonl, … or a sessions root)",
        dir.display()
    )]
    NoSessionLogs {
        /// The directory.
        dir: PathBuf,
    },
    /// Two logs record the same session id.
    #[error("{}: session {id} is also recorded in {}", second.display(), first.display())]
    DuplicateSession {
        /// The session id.
        id: String,
        /// The first log with it.
        first: PathBuf,
        /// The second log with it.
        second: PathBuf,
    },
}

// Causes are part of each message (file:line included), so no variant exposes
// a `source()`: a `{:#}` chain would print every cause twice.
impl From<ReadError> for ReplayError {
    fn from(error: ReadError) -> Self {
        ReplayError::Log(error)
    }
}

impl ReplayError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |error| ReplayError::Io { path, error }
    }
}
