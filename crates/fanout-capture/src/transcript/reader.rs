//! [`RecordReader`]: the records of a version 2 transcript from any byte source, a
//! finished file or one still being written.

use std::io::{self, Read};

use super::{FormatError, Record, parse_record};

/// How much is read from the source at a time (more when one record is larger).
const READ_BYTES: usize = 256 * 1024;

/// Why the next record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The source failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The bytes at `line` (1-based, counted in the whole file) are not a record.
    #[error("line {line}: {error}")]
    Format {
        /// The line the bad record starts on.
        line: u64,
        /// What is wrong with it.
        error: FormatError,
    },
}

/// Reads records one by one. When the source has no more bytes *for now*,
/// [`RecordReader::next_record`] returns `None`; a file that is still being written can
/// be asked again later, and a record cut short so far is completed by the next call.
pub struct RecordReader<R> {
    source: R,
    /// Read bytes are `buffer[start..end]`; the rest is room for the next read, kept
    /// initialised so a read does not zero it again (zeroing 256 KiB per read was
    /// 8% of the proxy's CPU when lines came one at a time).
    buffer: Vec<u8>,
    end: usize,
    /// Where the unread part of `buffer` starts.
    start: usize,
    /// The source offset of `buffer[start]`.
    offset: u64,
    /// The line `buffer[start]` is on.
    line: u64,
}

impl<R: Read> RecordReader<R> {
    /// Reads `source`, which is positioned at byte `offset` of the transcript, on line
    /// `line` (records start right after the header: its end, and line 2).
    pub fn new(source: R, offset: u64, line: u64) -> Self {
        RecordReader {
            source,
            buffer: Vec::new(),
            end: 0,
            start: 0,
            offset,
            line,
        }
    }

    /// The next complete record and the transcript offset just past it; `None` when the
    /// source has nothing more right now (see [`RecordReader::incomplete`]).
    pub fn next_record(&mut self) -> Result<Option<(Record<'_>, u64)>, ReadError> {
        let used = loop {
            match parse_record(&self.buffer[self.start..self.end]) {
                Ok(Some((_, used))) => break used,
                Ok(None) => {
                    if !self.fill()? {
                        return Ok(None);
                    }
                }
                Err(error) => {
                    return Err(ReadError::Format {
                        line: self.line,
                        error,
                    });
                }
            }
        };
        let bytes = &self.buffer[self.start..self.start + used];
        self.line += bytes.iter().filter(|b| **b == b'\n').count() as u64;
        self.offset += used as u64;
        let at = self.start;
        self.start += used;
        let end = self.offset;
        match parse_record(&self.buffer[at..at + used]) {
            Ok(Some((record, _))) => Ok(Some((record, end))),
            // Parsed a moment ago from the very same bytes.
            _ => Err(ReadError::Format {
                line: self.line,
                error: FormatError("a record changed while being read".to_owned()),
            }),
        }
    }

    /// Bytes read past the last complete record: a record still being written, or, at
    /// the end of a finished file, one cut short.
    pub fn incomplete(&self) -> usize {
        self.end - self.start
    }

    /// The transcript offset of the next record.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads more of the source into the buffer; false when it had nothing.
    fn fill(&mut self) -> io::Result<bool> {
        // What is left is less than one record: moving it to the front keeps the
        // buffer at one record and one read, where growing by doubling reached 1 MiB
        // under the proxy bench's flood (a third of the proxy's heap).
        if self.start > 0 {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buffer.len() < self.end + READ_BYTES {
            self.buffer
                .reserve_exact(self.end + READ_BYTES - self.buffer.len());
            self.buffer.resize(self.end + READ_BYTES, 0);
        }
        loop {
            match self.source.read(&mut self.buffer[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n > 0);
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use fanout_acp::Direction;
    use fanout_types::Timestamp;

    use super::super::write_record;
    use super::*;

    /// A source that hands out its bytes in small pieces, then says "nothing yet".
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(self.1).min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn reads_every_record_whatever_the_pieces_and_names_the_line_of_damage() {
        let at = Timestamp::now();
        let mut file = Vec::new();
        let big = vec![b'\n'; READ_BYTES + 10];
        for bytes in [&b"one\ntwo"[..], &big, b"x"] {
            write_record(
                &mut file,
                &Record::Data {
                    direction: Direction::AgentToClient,
                    at,
                    bytes,
                },
            )
            .unwrap();
        }
        let complete = file.len();
        file.extend_from_slice(b"a2c 2026-08-03T15:32:21Z 10\nabc");
        for piece in [1, 7, 4096, 1 << 20] {
            let mut reader = RecordReader::new(Trickle(&file, piece), 100, 2);
            let mut sizes = Vec::new();
            while let Some((record, _)) = reader.next_record().unwrap() {
                match record {
                    Record::Data { bytes, .. } => sizes.push(bytes.len()),
                    other => panic!("{other:?}"),
                }
            }
            assert_eq!(sizes, vec![7, READ_BYTES + 10, 1], "pieces of {piece}");
            assert_eq!(reader.offset(), 100 + complete as u64);
            assert_eq!(reader.incomplete(), file.len() - complete);
        }
        let mut damaged = file[..complete].to_vec();
        damaged.extend_from_slice(b"up 2026-08-03T15:32:21Z 1\nx\n");
        let mut reader = RecordReader::new(damaged.as_slice(), 0, 2);
        let error = loop {
            match reader.next_record() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("no error"),
                Err(error) => break error,
            }
        };
        // Records start on line 2; each moves on by the newlines it holds: its header's,
        // its bytes' and the one after them.
        let expected = 2 + 3 + (READ_BYTES as u64 + 12) + 2;
        assert!(
            error.to_string().starts_with(&format!("line {expected}: ")),
            "{error}"
        );
    }
}
