//! The append-only writer. Each line is written with a single `write_all` and
//! no buffering, so a crash leaves at most one partial line and every event
//! already appended is on disk for readers.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use fanout_types::{create_private_dir, private_open_options};
use serde::Serialize;

use crate::error::WriteError;
use crate::layout::log_path;
use crate::types::{Backend, Event, Header};

/// Writes one session's log.
#[derive(Debug)]
pub struct SessionLogWriter {
    path: PathBuf,
    file: File,
    events_written: usize,
}

#[derive(Serialize)]
struct HeaderLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    header: &'a Header,
}

impl SessionLogWriter {
    /// Creates `<root>/<bucket of cwd>/<id>.jsonl` (directories 0700, file 0600,
    /// never overwriting an existing log) and writes the header.
    pub fn create(root: &Path, header: &Header) -> Result<Self, WriteError> {
        if header.backend == Backend::Fork {
            return Err(WriteError::InvalidHeader {
                id: header.id.clone(),
                message: "a fork child must be created with create_fork".into(),
            });
        }
        Self::open(root, header)
    }

    /// Creates a fork child's log: the header (whose `seedBoundary` must equal
    /// `prefix.len()`), then the copied parent history `prefix`.
    pub fn create_fork(root: &Path, header: &Header, prefix: &[Event]) -> Result<Self, WriteError> {
        if header.backend != Backend::Fork || header.seed_boundary != Some(prefix.len()) {
            return Err(WriteError::InvalidHeader {
                id: header.id.clone(),
                message: format!(
                    "a fork child needs backend fork and seedBoundary {} (the copied prefix length)",
                    prefix.len()
                ),
            });
        }
        let mut writer = Self::open(root, header)?;
        for event in prefix {
            writer.append(event)?;
        }
        Ok(writer)
    }

    fn open(root: &Path, header: &Header) -> Result<Self, WriteError> {
        if header.id.is_empty() || header.id.contains(['/', '\\']) || header.id.starts_with('.') {
            return Err(WriteError::InvalidHeader {
                id: header.id.clone(),
                message: "a session id must be a plain file name".into(),
            });
        }
        let path = log_path(root, &header.cwd, &header.id);
        if let Some(dir) = path.parent() {
            create_private_dir(dir).map_err(|error| WriteError::Io {
                path: dir.to_path_buf(),
                error,
            })?;
        }
        let file = private_open_options()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|error| WriteError::Io {
                path: path.clone(),
                error,
            })?;
        let mut writer = Self {
            path,
            file,
            events_written: 0,
        };
        writer.write_line(&HeaderLine {
            kind: "header",
            header,
        })?;
        Ok(writer)
    }

    /// Appends one event as one line, written through to the file.
    pub fn append(&mut self, event: &Event) -> Result<(), WriteError> {
        self.write_line(event)?;
        self.events_written += 1;
        Ok(())
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Events appended so far (a fork child's copied prefix included); the
    /// index the next event will have.
    pub fn events_written(&self) -> usize {
        self.events_written
    }

    fn write_line<T: Serialize>(&mut self, value: &T) -> Result<(), WriteError> {
        let mut line = serde_json::to_vec(value).map_err(|error| WriteError::Encode {
            path: self.path.clone(),
            error,
        })?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .and_then(|()| self.file.flush())
            .map_err(|error| WriteError::Io {
                path: self.path.clone(),
                error,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::list_logs;
    use crate::reader::read_log;
    use crate::types::{Chunk, ModelStopReason, Usage};
    use fanout_types::Timestamp;

    fn header(id: &str, backend: Backend, parent: Option<&str>, seed: Option<usize>) -> Header {
        let cwd = "/home/dev/proj";
        match parent {
            Some(parent) => Header::child(id, cwd, parent, "call-1", backend, seed),
            None => Header::root(id, cwd),
        }
    }

    #[test]
    fn round_trip_with_fork_prefix_and_listing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sessions");
        let mut parent =
            SessionLogWriter::create(&root, &header("p", Backend::Root, None, None)).unwrap();
        let events = vec![
            Event::UserMessage {
                ts: Timestamp::now(),
                text: "hi".into(),
            },
            Event::ModelRequest {
                ts: Timestamp::now(),
                ordinal: 0,
                model: "m".into(),
            },
            Event::AssistantChunk {
                ts: Timestamp::now(),
                chunk: Chunk::Stop {
                    stop_reason: ModelStopReason::EndTurn,
                    usage: Usage::default(),
                },
            },
        ];
        for e in &events {
            parent.append(e).unwrap();
        }
        assert_eq!(parent.events_written(), 3);
        let mut child = SessionLogWriter::create_fork(
            &root,
            &header("c", Backend::Fork, Some("p"), Some(1)),
            &events[..1],
        )
        .unwrap();
        child
            .append(&Event::TurnEnd {
                ts: Timestamp::now(),
                stop_reason: "end_turn".into(),
            })
            .unwrap();

        let log = read_log(parent.path()).unwrap();
        assert_eq!(log.events, events);
        let child_log = read_log(child.path()).unwrap();
        assert_eq!(child_log.seeded_events(), &events[..1]);
        assert_eq!(child_log.own_events().len(), 1);
        assert_eq!(parent.path().parent(), child.path().parent());

        let listed = list_logs(&root).unwrap();
        let ids: Vec<_> = listed.iter().map(|e| e.header.id.as_str()).collect();
        assert_eq!(ids, ["p", "c"]);

        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(parent.path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Never overwrites.
        assert!(SessionLogWriter::create(&root, &header("p", Backend::Root, None, None)).is_err());
    }

    #[test]
    fn inconsistent_headers_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fork = header("f", Backend::Fork, Some("p"), Some(2));
        assert!(SessionLogWriter::create(dir.path(), &fork).is_err());
        assert!(SessionLogWriter::create_fork(dir.path(), &fork, &[]).is_err());
        let bad_id = header("../x", Backend::Root, None, None);
        assert!(SessionLogWriter::create(dir.path(), &bad_id).is_err());
        assert!(list_logs(&dir.path().join("missing")).unwrap().is_empty());
    }
}
