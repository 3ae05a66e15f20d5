//! fanout transcripts (DESIGN 3.1): the file format the proxy writes and import reads,
//! and [`Applier`], which turns a transcript's records into capture's lines, batches and
//! applied marks. The live proxy, `fanout import` and catch-up all apply transcripts
//! through it, so the three write the same rows.
//!
//! Version 2, the one this build writes, is framed so the writer never escapes or
//! parses a byte:
//!
//! ```text
//! {"type":"fanout-transcript","version":2,"executionId",…}\n   header: one JSON line
//! c2a 2026-08-03T15:32:21.500000Z 87\n<87 raw bytes>\n            bytes read from one direction
//! a2c 2026-08-03T15:32:21.500113Z end\n                          that direction ended (EOF)
//! a2c 2026-08-03T15:32:21.600000Z lost 65536 80 0\n              bytes forwarded, not recorded
//! ```
//!
//! A data record holds one chunk exactly as the proxy read and forwarded it, with the
//! instant it was read: lines may span records, and a reader frames each direction's
//! bytes into lines exactly as the proxy's tap would (a line's observation time is the
//! time of the record its newline arrived in; at `end` an unterminated last line is
//! still a line). `lost <bytes> <lines> <ends_line>` says that many bytes (holding that
//! many newlines) were forwarded but could not be recorded; a reader drops the line
//! they cut, and, unless they ended a line (`1`), the bytes up to the next newline. A
//! record cut short at the end of the file (the writer was killed while writing it) is
//! not a record; everything before it is.
//!
//! Version 1 (still read): the header, then one JSON object `{ts, dir, line}` per line.

mod apply;
mod pending;
mod reader;

use std::io::{self, Write};

use fanout_acp::Direction;
use fanout_types::Timestamp;

pub use apply::{Applier, ApplyStats, DEFAULT_BATCH_LINES, LineSplitter, SplitLine};
pub use pending::{
    PENDING_EXTENSION, pending_hint_path, pending_transcripts, remove_pending_hint, try_lock,
    write_pending_hint,
};
pub use reader::{ReadError, RecordReader};

/// Line 1's `type` in a fanout transcript.
pub const TRANSCRIPT_TYPE: &str = "fanout-transcript";
/// The transcript version this build writes (fanout-proxy).
pub const TRANSCRIPT_VERSION: u32 = 2;
/// The JSON-lines version: read by import, no longer written.
pub const TRANSCRIPT_VERSION_1: u32 = 1;
/// The file name extension of a version 2 transcript (`<execution id>.transcript`);
/// version 1 files are `.jsonl`.
pub const TRANSCRIPT_EXTENSION: &str = "transcript";

/// One record of a version 2 transcript, borrowing its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// Bytes read from `direction` at `at`, verbatim (never empty).
    Data {
        /// Which way the bytes went.
        direction: Direction,
        /// When they were read.
        at: Timestamp,
        /// The bytes as forwarded.
        bytes: &'a [u8],
    },
    /// `direction` reached its end at `at`.
    End {
        /// The direction that ended.
        direction: Direction,
        /// When it ended.
        at: Timestamp,
    },
    /// `bytes` bytes of `direction`, holding `lines` newlines, were forwarded but not
    /// recorded; `ends_line`: they ended with a newline.
    Lost {
        /// Which way the bytes went.
        direction: Direction,
        /// When the loss was noted.
        at: Timestamp,
        /// How many bytes were not recorded.
        bytes: u64,
        /// How many newlines they held.
        lines: u64,
        /// Whether they ended with a newline.
        ends_line: bool,
    },
}

impl Record<'_> {
    /// The direction the record is about.
    pub fn direction(&self) -> Direction {
        match self {
            Record::Data { direction, .. }
            | Record::End { direction, .. }
            | Record::Lost { direction, .. } => *direction,
        }
    }
}

/// Writes one record: its header line, then for data its bytes and a newline. The bytes
/// go out as they are, without a copy or an escape.
pub fn write_record(out: &mut impl Write, record: &Record<'_>) -> io::Result<()> {
    match record {
        Record::Data {
            direction,
            at,
            bytes,
        } => {
            writeln!(
                out,
                "{} {} {}",
                direction.as_str(),
                at.canonical(),
                bytes.len()
            )?;
            out.write_all(bytes)?;
            out.write_all(b"\n")
        }
        Record::End { direction, at } => {
            writeln!(out, "{} {} end", direction.as_str(), at.canonical())
        }
        Record::Lost {
            direction,
            at,
            bytes,
            lines,
            ends_line,
        } => writeln!(
            out,
            "{} {} lost {bytes} {lines} {}",
            direction.as_str(),
            at.canonical(),
            u8::from(*ends_line)
        ),
    }
}

/// Every line of a version 2 transcript's records (the bytes after its header line),
/// framed as the proxy's tap saw them; for tests, benchmarks and tools. A record cut
/// short at the end is left out, as a reader of the file would.
pub fn split_records(records: &[u8], max_line_bytes: usize) -> Result<Vec<SplitLine>, ReadError> {
    let mut reader = RecordReader::new(records, 0, 2);
    let mut splitter = LineSplitter::new(max_line_bytes);
    let mut lines = Vec::new();
    while let Some((record, _)) = reader.next_record()? {
        lines.extend(splitter.push(&record));
    }
    Ok(lines)
}

/// The longest record header line a reader accepts (a direction, a timestamp, a word
/// and three numbers fit in well under this); a longer one is not a record.
const MAX_HEADER_LINE: usize = 128;

/// Why bytes are not a version 2 record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a transcript record: {0}")]
pub struct FormatError(pub String);

/// Reads the record at the start of `buffer`: the record and the bytes it takes, or
/// `None` when `buffer` ends before the record does (more bytes may follow).
pub fn parse_record(buffer: &[u8]) -> Result<Option<(Record<'_>, usize)>, FormatError> {
    let search = &buffer[..buffer.len().min(MAX_HEADER_LINE + 1)];
    let Some(newline) = search.iter().position(|b| *b == b'\n') else {
        if search.len() > MAX_HEADER_LINE {
            return Err(FormatError(format!(
                "no record header within {MAX_HEADER_LINE} bytes"
            )));
        }
        return Ok(None);
    };
    let header = std::str::from_utf8(&buffer[..newline])
        .map_err(|_| FormatError("the record header is not text".to_owned()))?;
    let mut fields = header.split(' ');
    let mut field = |what: &str| {
        fields
            .next()
            .filter(|f| !f.is_empty())
            .ok_or_else(|| FormatError(format!("the record header {header:?} has no {what}")))
    };
    let tag = field("direction")?;
    let direction = Direction::from_tag(tag)
        .ok_or_else(|| FormatError(format!("bad direction {tag:?} (expected c2a or a2c)")))?;
    let ts = field("timestamp")?;
    let at = Timestamp::parse(ts).map_err(|e| FormatError(e.to_string()))?;
    let kind = field("length")?;
    let number = |text: &str| {
        text.parse::<u64>()
            .map_err(|_| FormatError(format!("bad number {text:?} in {header:?}")))
    };
    let after_header = newline + 1;
    let record = match kind {
        "end" => (Record::End { direction, at }, after_header),
        "lost" => {
            let bytes = number(field("lost byte count")?)?;
            let lines = number(field("lost line count")?)?;
            let ends_line = match field("lost line end")? {
                "0" => false,
                "1" => true,
                other => {
                    return Err(FormatError(format!("bad line end {other:?} in {header:?}")));
                }
            };
            (
                Record::Lost {
                    direction,
                    at,
                    bytes,
                    lines,
                    ends_line,
                },
                after_header,
            )
        }
        length => {
            let length = usize::try_from(number(length)?)
                .map_err(|_| FormatError(format!("length too large in {header:?}")))?;
            if length == 0 {
                return Err(FormatError(format!("an empty data record: {header:?}")));
            }
            let end = after_header
                .checked_add(length)
                .ok_or_else(|| FormatError(format!("length too large in {header:?}")))?;
            if buffer.len() <= end {
                return Ok(None);
            }
            if buffer[end] != b'\n' {
                return Err(FormatError(format!(
                    "the {length} bytes of {header:?} are not followed by a newline"
                )));
            }
            (
                Record::Data {
                    direction,
                    at,
                    bytes: &buffer[after_header..end],
                },
                end + 1,
            )
        }
    };
    if fields.next().is_some() {
        return Err(FormatError(format!("extra fields in {header:?}")));
    }
    Ok(Some(record))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse(text).unwrap()
    }

    #[test]
    fn records_round_trip_byte_for_byte() {
        let t = at("2026-08-03T15:32:21.5Z");
        let records = [
            Record::Data {
                direction: Direction::ClientToAgent,
                at: t,
                bytes: b"{\"a\":1}\n{\"b\"",
            },
            Record::Data {
                direction: Direction::AgentToClient,
                at: t,
                bytes: b"\xff\x00\n\n end 3\n",
            },
            Record::Lost {
                direction: Direction::AgentToClient,
                at: t,
                bytes: 10,
                lines: 2,
                ends_line: false,
            },
            Record::End {
                direction: Direction::ClientToAgent,
                at: t,
            },
        ];
        let mut file = Vec::new();
        for record in &records {
            write_record(&mut file, record).unwrap();
        }
        assert!(file.starts_with(b"c2a 2026-08-03T15:32:21.500000Z 12\n{\"a\":1}\n{\"b\"\na2c "));
        let mut rest = file.as_slice();
        let mut read = Vec::new();
        while !rest.is_empty() {
            let (record, used) = parse_record(rest).unwrap().expect("complete");
            read.push(record);
            rest = &rest[used..];
        }
        assert_eq!(read, records);
        // Every proper prefix is an incomplete record, never an error or a short one.
        let first_len = parse_record(&file).unwrap().unwrap().1;
        for cut in 0..first_len {
            assert_eq!(parse_record(&file[..cut]), Ok(None), "cut at {cut}");
        }
    }

    #[test]
    fn damage_is_an_error_that_says_what() {
        for (bytes, expected) in [
            (&b"up 2026-08-03T15:32:21Z 1\nx\n"[..], "bad direction"),
            (b"c2a noon 1\nx\n", "invalid timestamp"),
            (b"c2a 2026-08-03T15:32:21Z x\n", "bad number"),
            (b"c2a 2026-08-03T15:32:21Z 0\n\n", "empty data record"),
            (
                b"c2a 2026-08-03T15:32:21Z 1\nxy",
                "not followed by a newline",
            ),
            (b"c2a 2026-08-03T15:32:21Z end now\n", "extra fields"),
            (b"c2a 2026-08-03T15:32:21Z lost 1 0 2\n", "bad line end"),
            (b"c2a\n", "no timestamp"),
            (&[b'x'; 200], "no record header"),
        ] {
            let error = parse_record(bytes).expect_err("damaged");
            assert!(error.0.contains(expected), "{error} (wanted {expected})");
        }
    }
}
