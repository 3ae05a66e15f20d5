//! Transcripts (DESIGN 3.1): one JSONL file per agent execution, mode 0600. Line 1 is
//! the header `{"type":"fanout-transcript","version":1,"executionId","taskId",
//! "agentCommand","startedAt","fanoutVersion"}`; then one `{"ts","dir","line"}` per
//! complete line seen, `line` being the raw line as a JSON string. A line that is not
//! valid UTF-8 cannot be a JSON string verbatim: it is written lossily (U+FFFD for the
//! bad bytes) with `"lossy":true`, so a reader knows it is not the original.
//! `fanout import` reads these files back through the same capture.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use fanout_acp::Direction;
use fanout_store::Timestamp;
use serde::Serialize;

use crate::error::ProxyError;
use fanout_types::{create_private_dir, private_open_options};

pub use fanout_capture::import::{TRANSCRIPT_TYPE, TRANSCRIPT_VERSION};

/// What line 1 says about the execution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptHeader {
    #[serde(rename = "type")]
    /// Always [`TRANSCRIPT_TYPE`], so import recognises the file.
    pub kind: &'static str,
    /// [`TRANSCRIPT_VERSION`].
    pub version: u32,
    /// The run's execution id; import reuses it, so rows come out the same.
    pub execution_id: String,
    /// The run's `--task`, if any.
    pub task_id: Option<String>,
    /// The agent's argv, as given.
    pub agent_command: Vec<String>,
    /// When the run started.
    pub started_at: Timestamp,
    /// The fanout version that wrote it.
    pub fanout_version: String,
}

impl TranscriptHeader {
    /// The header of a transcript this fanout version writes.
    pub fn new(
        execution_id: &str,
        task_id: Option<&str>,
        agent_command: &[String],
        started_at: Timestamp,
    ) -> Self {
        TranscriptHeader {
            kind: TRANSCRIPT_TYPE,
            version: TRANSCRIPT_VERSION,
            execution_id: execution_id.to_owned(),
            task_id: task_id.map(str::to_owned),
            agent_command: agent_command.to_vec(),
            started_at,
            fanout_version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

#[derive(Serialize)]
struct FrameRecord<'a> {
    ts: Timestamp,
    dir: &'static str,
    line: Cow<'a, str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    lossy: bool,
}

/// Appends frames to one transcript. Writes are buffered: call [`TranscriptWriter::flush`]
/// when the queue runs dry so the file is never far behind what was forwarded.
#[derive(Debug)]
pub struct TranscriptWriter {
    out: BufWriter<File>,
    path: PathBuf,
}

impl TranscriptWriter {
    /// Creates `<dir>/<executionId>.jsonl` (never overwriting) and writes the header.
    pub fn create(dir: &Path, header: &TranscriptHeader) -> Result<Self, ProxyError> {
        let fail = |cause| ProxyError::Transcript {
            dir: dir.to_owned(),
            cause,
        };
        create_private_dir(dir).map_err(fail)?;
        let path = dir.join(format!("{}.jsonl", header.execution_id));
        let file = private_open_options()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(fail)?;
        let mut writer = TranscriptWriter {
            out: BufWriter::with_capacity(64 * 1024, file),
            path,
        };
        writer.write_json(header).map_err(fail)?;
        writer.flush().map_err(fail)?;
        Ok(writer)
    }

    /// The transcript file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one frame: the line without its newline, as observed at `at`.
    pub fn append(&mut self, at: Timestamp, direction: Direction, line: &[u8]) -> io::Result<()> {
        let (line, lossy) = match std::str::from_utf8(line) {
            Ok(text) => (Cow::Borrowed(text), false),
            Err(_) => (String::from_utf8_lossy(line), true),
        };
        self.write_json(&FrameRecord {
            ts: at,
            dir: direction.as_str(),
            line,
            lossy,
        })
    }

    /// Writes buffered frames to the file.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn write_json(&mut self, value: &impl Serialize) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, value).map_err(io::Error::other)?;
        self.out.write_all(b"\n")
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn header_then_frames_verbatim_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let started = Timestamp::parse("2026-08-03T15:32:20Z").unwrap();
        let header = TranscriptHeader::new("exec-1", None, &["cat".to_owned()], started);
        let mut writer = TranscriptWriter::create(&dir.path().join("t"), &header).unwrap();
        let at = Timestamp::parse("2026-08-03T15:32:21.5Z").unwrap();
        writer
            .append(at, Direction::ClientToAgent, br#"{"jsonrpc":"2.0","id":1}"#)
            .unwrap();
        writer
            .append(at, Direction::AgentToClient, b"bad \xff byte\ttab \"q\"")
            .unwrap();
        writer.flush().unwrap();
        let text = std::fs::read_to_string(writer.path()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            format!(
                r#"{{"type":"fanout-transcript","version":1,"executionId":"exec-1","taskId":null,"agentCommand":["cat"],"startedAt":"2026-08-03T15:32:20.000000Z","fanoutVersion":"{}"}}"#,
                env!("CARGO_PKG_VERSION")
            )
        );
        assert_eq!(
            lines[1],
            r#"{"ts":"2026-08-03T15:32:21.500000Z","dir":"c2a","line":"{\"jsonrpc\":\"2.0\",\"id\":1}"}"#
        );
        assert_eq!(
            lines[2],
            r#"{"ts":"2026-08-03T15:32:21.500000Z","dir":"a2c","line":"bad � byte\ttab \"q\"","lossy":true}"#
        );
        let mode = std::fs::metadata(writer.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // Never overwrites: the same execution id is a second file only by mistake.
        assert!(TranscriptWriter::create(&dir.path().join("t"), &header).is_err());
    }
}
