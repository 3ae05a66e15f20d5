//! Errors of reading and writing logs. Every read error names the file, and
//! every error about content names the 1-based line.

use std::path::PathBuf;

/// A log (or a sessions root) could not be read, or a line is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file or directory could not be read.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// A line is not a valid header or event.
    #[error("{}:{line}: {message}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
}

impl ReadError {
    /// The 1-based line number, for content errors.
    pub fn line(&self) -> Option<usize> {
        match self {
            ReadError::Io { .. } => None,
            ReadError::Line { line, .. } => Some(*line),
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            ReadError::Io { path, .. } | ReadError::Line { path, .. } => path,
        }
    }
}

/// A log could not be created or appended to.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Filesystem failure.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// The value could not be encoded as JSON.
    #[error("{}: cannot encode line: {error}", path.display())]
    Encode {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        error: serde_json::Error,
    },
    /// The header is inconsistent (e.g. a fork child without a seed boundary).
    #[error("invalid header for session {id}: {message}")]
    InvalidHeader {
        /// The session id.
        id: String,
        /// What is wrong.
        message: String,
    },
}
