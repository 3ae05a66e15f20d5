//! Numbered line reading shared by both readers.

use std::path::{Path, PathBuf};

use tokio::io::{AsyncBufReadExt, BufReader};

use super::ImportError;

/// Reads a file line by line (bytes, so invalid UTF-8 is a per-line problem), with
/// 1-based line numbers and the bytes each line consumed (for progress).
pub(super) struct NumberedLines {
    path: PathBuf,
    reader: BufReader<tokio::fs::File>,
    number: u64,
    buffer: Vec<u8>,
}

impl NumberedLines {
    pub(super) async fn open(path: &Path) -> Result<Self, ImportError> {
        let file = tokio::fs::File::open(path)
            .await
            .map_err(|cause| ImportError::Read {
                path: path.to_owned(),
                cause,
            })?;
        Ok(Self {
            path: path.to_owned(),
            reader: BufReader::new(file),
            number: 0,
            buffer: Vec::new(),
        })
    }

    /// The next line without its `\n` / `\r\n`: `(line number, bytes consumed, line)`.
    pub(super) async fn next_line(&mut self) -> Result<Option<(u64, u64, &[u8])>, ImportError> {
        self.buffer.clear();
        let consumed = self
            .reader
            .read_until(b'\n', &mut self.buffer)
            .await
            .map_err(|cause| ImportError::Read {
                path: self.path.clone(),
                cause,
            })?;
        if consumed == 0 {
            return Ok(None);
        }
        self.number += 1;
        let mut line = self.buffer.as_slice();
        if let Some(rest) = line.strip_suffix(b"\n") {
            line = rest;
        }
        if let Some(rest) = line.strip_suffix(b"\r") {
            line = rest;
        }
        Ok(Some((self.number, consumed as u64, line)))
    }
}
