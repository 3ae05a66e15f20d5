//! The transcript writer (DESIGN 3.1): one version 2 transcript per agent execution,
//! `<executionId>.transcript`, mode 0600, in the format [`fanout_capture::transcript`]
//! defines. Line 1 is the JSON header `{"type":"fanout-transcript","version":2,
//! "executionId","taskId","agentCommand","startedAt","fanoutVersion"}`; then one record
//! per chunk the pumps read, its bytes written as they are (no parsing, no escaping),
//! so the transcript keeps up with the pipes.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use fanout_capture::transcript::{Record, TRANSCRIPT_EXTENSION, write_record};
use fanout_store::Timestamp;
use serde::Serialize;

use crate::error::ProxyError;
use fanout_types::{create_private_dir, private_open_options};

pub use fanout_capture::transcript::{TRANSCRIPT_TYPE, TRANSCRIPT_VERSION};

/// The write buffer: chunks are at most this size, so a chunk is one or two writes.
const BUFFER_BYTES: usize = 256 * 1024;

/// What line 1 says about the execution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptHeader {
    #[serde(rename = "type")]
    /// Always [`TRANSCRIPT_TYPE`], so import recognises the file.
    pub kind: &'static str,
    /// The format version, [`TRANSCRIPT_VERSION`].
    pub version: u32,
    /// The execution (one proxy run) the transcript records.
    pub execution_id: String,
    /// `--task`, when given.
    pub task_id: Option<String>,
    /// The agent's argv, as given.
    pub agent_command: Vec<String>,
    /// When the proxy started.
    pub started_at: Timestamp,
    /// The fanout that wrote it.
    pub fanout_version: String,
}

impl TranscriptHeader {
    /// The header of a transcript this build writes.
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

/// Appends records to one transcript. Writes are buffered: [`TranscriptWriter::flush`]
/// whenever there is nothing more to write right now, so the file is never far behind
/// what was forwarded (and readers of the file see it).
#[derive(Debug)]
pub struct TranscriptWriter {
    out: BufWriter<File>,
    path: PathBuf,
    /// Bytes handed to the writer so far (the file's length once flushed).
    written: u64,
}

impl TranscriptWriter {
    /// Creates `<dir>/<executionId>.transcript` (never overwriting) and writes the header.
    pub fn create(dir: &Path, header: &TranscriptHeader) -> Result<Self, ProxyError> {
        let fail = |cause| ProxyError::Transcript {
            dir: dir.to_owned(),
            cause,
        };
        create_private_dir(dir).map_err(fail)?;
        let path = dir.join(format!("{}.{TRANSCRIPT_EXTENSION}", header.execution_id));
        let file = private_open_options()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(fail)?;
        let mut line = serde_json::to_vec(header).map_err(|e| fail(io::Error::other(e)))?;
        line.push(b'\n');
        let mut writer = TranscriptWriter {
            out: BufWriter::with_capacity(BUFFER_BYTES, file),
            path,
            written: 0,
        };
        writer.out.write_all(&line).map_err(fail)?;
        writer.written = line.len() as u64;
        writer.flush().map_err(fail)?;
        Ok(writer)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record.
    pub fn append(&mut self, record: &Record<'_>) -> io::Result<()> {
        let mut counted = Counted {
            inner: &mut self.out,
            bytes: 0,
        };
        let result = write_record(&mut counted, record);
        self.written += counted.bytes;
        result
    }

    /// The file's length once flushed.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Hands what is buffered to the file.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Counts the bytes that go through it.
struct Counted<'a, W> {
    inner: &'a mut W,
    bytes: u64,
}

impl<W: Write> Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use fanout_acp::Direction;
    use fanout_capture::transcript::RecordReader;

    use super::*;

    #[test]
    fn header_then_records_verbatim_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let started = Timestamp::parse("2026-08-03T15:32:20Z").unwrap();
        let header = TranscriptHeader::new("exec-1", None, &["cat".to_owned()], started);
        let mut writer = TranscriptWriter::create(&dir.path().join("t"), &header).unwrap();
        let at = Timestamp::parse("2026-08-03T15:32:21.5Z").unwrap();
        let chunk = b"{\"jsonrpc\":\"2.0\",\"id\":1}\nbad \xff byte\ttab \"q\"";
        writer
            .append(&Record::Data {
                direction: Direction::ClientToAgent,
                at,
                bytes: chunk,
            })
            .unwrap();
        writer
            .append(&Record::End {
                direction: Direction::ClientToAgent,
                at,
            })
            .unwrap();
        writer.flush().unwrap();
        assert!(writer.path().ends_with("t/exec-1.transcript"));
        let bytes = std::fs::read(writer.path()).unwrap();
        assert_eq!(writer.written(), bytes.len() as u64);
        let header_line = format!(
            r#"{{"type":"fanout-transcript","version":2,"executionId":"exec-1","taskId":null,"agentCommand":["cat"],"startedAt":"2026-08-03T15:32:20.000000Z","fanoutVersion":"{}"}}"#,
            env!("CARGO_PKG_VERSION")
        );
        let (first, records) = bytes.split_at(header_line.len() + 1);
        assert_eq!(first, format!("{header_line}\n").as_bytes());
        let mut expected =
            format!("c2a 2026-08-03T15:32:21.500000Z {}\n", chunk.len()).into_bytes();
        expected.extend_from_slice(chunk);
        expected.extend_from_slice(b"\nc2a 2026-08-03T15:32:21.500000Z end\n");
        assert_eq!(
            records,
            expected.as_slice(),
            "the chunk's bytes are as read"
        );
        let mut reader = RecordReader::new(records, first.len() as u64, 2);
        let (record, end) = reader.next_record().unwrap().unwrap();
        assert_eq!(
            record,
            Record::Data {
                direction: Direction::ClientToAgent,
                at,
                bytes: chunk
            }
        );
        assert!(end > first.len() as u64);
        let mode = std::fs::metadata(writer.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // Never overwrites: the same execution id is a second file only by mistake.
        assert!(TranscriptWriter::create(&dir.path().join("t"), &header).is_err());
    }
}
