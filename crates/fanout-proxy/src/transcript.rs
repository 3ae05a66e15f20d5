//! The transcript writer (DESIGN 3.1): one version 2 transcript per agent execution,
//! `<executionId>.transcript`, mode 0600, in the format [`fanout_capture::transcript`]
//! defines. Line 1 is the JSON header `{"type":"fanout-transcript","version":2,
//! "executionId","taskId","agentCommand","startedAt","fanoutVersion"}`; then one record
//! per chunk the pumps read, its bytes written as they are (no parsing, no escaping),
//! so the transcript keeps up with the pipes.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use fanout_acp::Direction;

use fanout_capture::transcript::{Record, TRANSCRIPT_EXTENSION, write_record};
use fanout_store::Timestamp;
use serde::Serialize;

use crate::error::ProxyError;
use crate::queue::count_lines;
use fanout_types::{create_private_dir, private_open_options};

pub use fanout_capture::transcript::{TRANSCRIPT_TYPE, TRANSCRIPT_VERSION};

/// The write buffer: chunks are at most this size, so a chunk is one or two writes.
const BUFFER_BYTES: usize = 256 * 1024;
/// Disk space is reserved ahead of the writes in steps of this size, beyond the end
/// of the file (its length stays what was written). Measured on ext4: writing 256 MiB
/// into reserved space takes 35 ms of CPU, into unreserved space 52 ms (delayed
/// allocation does its work per page). What is left over is given back at the end.
const RESERVE_BYTES: u64 = 8 * 1024 * 1024;

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
    file: File,
    /// Records not yet written to the file (at most about [`BUFFER_BYTES`]).
    pending: Vec<u8>,
    path: PathBuf,
    /// Bytes handed to the writer so far (the file's length once flushed).
    written: u64,
    /// Bytes of the file reserved so far; `None` once the file system said it cannot.
    reserved: Option<u64>,
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
        let mut pending = Vec::with_capacity(BUFFER_BYTES + 64 * 1024);
        serde_json::to_writer(&mut pending, header).map_err(|e| fail(io::Error::other(e)))?;
        pending.push(b'\n');
        let mut writer = TranscriptWriter {
            file,
            written: pending.len() as u64,
            pending,
            path,
            reserved: Some(0),
        };
        writer.flush().map_err(fail)?;
        Ok(writer)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record.
    pub fn append(&mut self, record: &Record<'_>) -> io::Result<()> {
        if let Record::Data { bytes, .. } = record {
            self.reserve(bytes.len());
        }
        let before = self.pending.len();
        write_record(&mut self.pending, record)?;
        self.appended(before)
    }

    /// Appends a data record whose `len` bytes wait in `side`, the direction's side
    /// pipe ([`crate::splice`]): they are read straight into the write buffer. Returns
    /// the newlines in them. Reading the side pipe failing leaves the transcript as it
    /// was (the record is not appended).
    pub(crate) fn append_from(
        &mut self,
        direction: Direction,
        at: Timestamp,
        len: usize,
        mut side: &File,
    ) -> Result<u64, AppendError> {
        self.reserve(len);
        let (before, written_before) = (self.pending.len(), self.written);
        // Cannot fail: writing to a Vec.
        let _ = writeln!(
            self.pending,
            "{} {} {len}",
            direction.as_str(),
            at.canonical()
        );
        self.written += (self.pending.len() - before) as u64;
        // A chunk larger than the buffer is read into it piece by piece, each piece
        // written out before the next is read.
        let mut lines = 0;
        let mut left = len;
        let mut all_buffered = true;
        while left > 0 {
            if self.pending.len() >= BUFFER_BYTES {
                self.flush()
                    .map_err(|error| AppendError::Write { error, lines })?;
                all_buffered = false;
            }
            let start = self.pending.len();
            let piece = left.min(BUFFER_BYTES.saturating_sub(start).max(1));
            self.pending.resize(start + piece, 0);
            if let Err(error) = side.read_exact(&mut self.pending[start..]) {
                if all_buffered {
                    self.pending.truncate(before);
                    self.written = written_before;
                    return Err(AppendError::Side(error));
                }
                // Part of the record is in the file already: its framing is broken.
                self.pending.truncate(start);
                return Err(AppendError::Write { error, lines });
            }
            lines += count_lines(&self.pending[start..]);
            self.written += piece as u64;
            left -= piece;
        }
        self.pending.push(b'\n');
        self.appended(self.pending.len() - 1)
            .map_err(|error| AppendError::Write { error, lines })?;
        Ok(lines)
    }

    /// After appending from `before` on: counts it, and writes the buffer out when full.
    fn appended(&mut self, before: usize) -> io::Result<()> {
        self.written += (self.pending.len() - before) as u64;
        if self.pending.len() >= BUFFER_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Reserves disk space ahead of a record of about `len` bytes (best effort: a
    /// file system that cannot is simply written).
    fn reserve(&mut self, len: usize) {
        let Some(reserved) = self.reserved else {
            return;
        };
        // The framing line is under 64 bytes.
        let end = self.written + len as u64 + 64;
        if end <= reserved {
            return;
        }
        let grow = (end - reserved).max(RESERVE_BYTES);
        self.reserved = rustix::fs::fallocate(
            &self.file,
            rustix::fs::FallocateFlags::KEEP_SIZE,
            reserved,
            grow,
        )
        .ok()
        .map(|()| reserved + grow);
    }

    /// Flushes what is buffered and gives back the disk space reserved beyond it.
    pub fn finish(&mut self) -> io::Result<()> {
        self.flush()?;
        if self.reserved.take().is_some_and(|r| r > self.written) {
            self.file.set_len(self.written)?;
        }
        Ok(())
    }

    /// The file's length once flushed.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Hands what is buffered to the file. On failure what was not written stays
    /// buffered, so the next flush tries again and the framing stays whole.
    pub fn flush(&mut self) -> io::Result<()> {
        let mut done = 0;
        let result = loop {
            if done == self.pending.len() {
                break Ok(());
            }
            match self.file.write(&self.pending[done..]) {
                Ok(0) => break Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        self.pending.drain(..done);
        result
    }
}

/// Why [`TranscriptWriter::append_from`] failed.
#[derive(Debug)]
pub(crate) enum AppendError {
    /// The side pipe could not be read: the transcript is as it was.
    Side(io::Error),
    /// The transcript could not be written; the chunk held `lines` newlines.
    Write { error: io::Error, lines: u64 },
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

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

    #[test]
    fn chunks_from_a_side_pipe_are_framed_like_copied_ones_and_space_is_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let started = Timestamp::parse("2026-08-03T15:32:20Z").unwrap();
        let header = TranscriptHeader::new("exec-2", None, &["cat".to_owned()], started);
        let mut writer = TranscriptWriter::create(dir.path(), &header).unwrap();
        let side = crate::splice::SidePipe::new().unwrap();
        let (side_read, mut side_write) = (File::from(side.read), File::from(side.write));
        // Larger than the write buffer, so it goes in pieces.
        let big: Vec<u8> = (0..(BUFFER_BYTES + 70_000))
            .map(|i| {
                if i % 100 == 99 {
                    b'\n'
                } else {
                    b'a' + (i % 26) as u8
                }
            })
            .collect();
        let small = b"{\"id\":1}\n".to_vec();
        let to_send = [small.clone(), big.clone()].concat();
        let feeder = std::thread::spawn(move || side_write.write_all(&to_send).unwrap());
        let at = Timestamp::parse("2026-08-03T15:32:21Z").unwrap();
        let lines = writer
            .append_from(Direction::AgentToClient, at, small.len(), &side_read)
            .unwrap();
        assert_eq!(lines, 1);
        let lines = writer
            .append_from(Direction::ClientToAgent, at, big.len(), &side_read)
            .unwrap();
        assert_eq!(lines, count_lines(&big));
        feeder.join().unwrap();
        writer
            .append(&Record::End {
                direction: Direction::ClientToAgent,
                at,
            })
            .unwrap();
        writer.finish().unwrap();
        let bytes = std::fs::read(writer.path()).unwrap();
        assert_eq!(writer.written(), bytes.len() as u64);
        let header_end = bytes.iter().position(|b| *b == b'\n').unwrap() + 1;
        let mut reader = RecordReader::new(&bytes[header_end..], header_end as u64, 2);
        let mut records = Vec::new();
        while let Some((record, _)) = reader.next_record().unwrap() {
            records.push(format!("{record:?}"));
        }
        let expected = [
            Record::Data {
                direction: Direction::AgentToClient,
                at,
                bytes: &small,
            },
            Record::Data {
                direction: Direction::ClientToAgent,
                at,
                bytes: &big,
            },
            Record::End {
                direction: Direction::ClientToAgent,
                at,
            },
        ]
        .map(|r| format!("{r:?}"));
        assert_eq!(records, expected);
        // The space reserved ahead of the writes is given back: the file holds what
        // was written, give or take a block.
        use std::os::unix::fs::MetadataExt;
        let allocated = std::fs::metadata(writer.path()).unwrap().blocks() * 512;
        assert!(
            allocated < bytes.len() as u64 + 64 * 1024,
            "{allocated} bytes allocated for {}",
            bytes.len()
        );
    }
}
