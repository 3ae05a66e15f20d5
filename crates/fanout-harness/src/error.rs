//! Errors of running the harness: loading scenarios, driving agents, serving
//! replays, comparing snapshots. Every error about a file names the file, and
//! every error about its content names the line.

use std::path::PathBuf;

use fanout_replay::ReplayError;
use fanout_sessionlog::ReadError;

use crate::acp::DriveError;

/// A scenario could not be loaded, replayed, served or compared.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A file or directory could not be read or written.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// The scenario's session logs could not be loaded into scripts.
    #[error("{0}")]
    Replay(ReplayError),
    /// A session log the agent wrote is invalid (the message is `file:line: why`).
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
    /// A cassette file is missing or invalid.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Cassette {
        /// The file.
        path: PathBuf,
        /// 1-based line, when the problem has one.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// The agent under test could not be driven.
    #[error("{0}")]
    Drive(DriveError),
    /// `replay record` was asked to write where a cassette already is.
    #[error("{}: already holds a cassette ({file}); pass --force to replace it", dir.display())]
    CassetteExists {
        /// The output directory.
        dir: PathBuf,
        /// A cassette file found there.
        file: String,
    },
    /// The upstream URL of `replay record` is unusable.
    #[error("upstream {url:?}: {message}")]
    Upstream {
        /// The URL given.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// A scenario's agent installer failed.
    #[error("installer {}: {message}", script.display())]
    Install {
        /// The installer script.
        script: PathBuf,
        /// What went wrong (its stderr's end).
        message: String,
    },
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
impl From<ReplayError> for HarnessError {
    fn from(error: ReplayError) -> Self {
        HarnessError::Replay(error)
    }
}

impl From<ReadError> for HarnessError {
    fn from(error: ReadError) -> Self {
        HarnessError::Log(error)
    }
}

impl From<DriveError> for HarnessError {
    fn from(error: DriveError) -> Self {
        HarnessError::Drive(error)
    }
}

impl HarnessError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |error| HarnessError::Io { path, error }
    }
}
