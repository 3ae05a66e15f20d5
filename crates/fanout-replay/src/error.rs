//! Errors of loading scenarios and replaying them. Every error about a file
//! names the file, and every error about its content names the line.

use std::path::PathBuf;

use fanout_sessionlog::ReadError;

/// A scenario could not be loaded, replayed or compared.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A file or directory could not be read or written.
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
    /// A scenario file is invalid.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Scenario {
        /// The file.
        path: PathBuf,
        /// 1-based line, when the problem has one.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
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
    /// The agent under test could not be driven.
    #[error("{0}")]
    Drive(crate::acp::DriveError),
    /// The HTTP replay server could not listen or serve.
    #[error("replay server on {addr}: {error}")]
    Serve {
        /// The listen address.
        addr: String,
        /// The underlying error.
        error: std::io::Error,
    },
}

// Causes are part of each message (file:line included), so no variant exposes
// a `source()`: a `{:#}` chain would print every cause twice.
impl From<ReadError> for ReplayError {
    fn from(error: ReadError) -> Self {
        ReplayError::Log(error)
    }
}

impl From<crate::acp::DriveError> for ReplayError {
    fn from(error: crate::acp::DriveError) -> Self {
        ReplayError::Drive(error)
    }
}

impl ReplayError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |error| ReplayError::Io { path, error }
    }
}
