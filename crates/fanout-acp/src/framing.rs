//! Splitting a byte stream into newline-delimited lines for the tap.
//!
//! The proxy forwards the original bytes untouched; this only decides what one "line"
//! is for observation. A line longer than the configured bound is not buffered: it is
//! reported as [`FramedLine::Oversized`] and skipped up to its newline.

/// Default bound on one observed line (ACP lines can carry whole files).
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One framed unit of a byte stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FramedLine {
    /// A complete line without its `\n`, otherwise verbatim: a CRLF line keeps its `\r`
    /// (JSON reads it as whitespace), so transcripts record exactly what was sent.
    Line(Vec<u8>),
    /// A line longer than the bound; its bytes were dropped.
    Oversized {
        /// How many bytes the line had.
        bytes: usize,
    },
}

/// Incremental newline framer.
#[derive(Debug)]
pub struct LineFramer {
    buffer: Vec<u8>,
    max_line_bytes: usize,
    /// Bytes of the current line dropped so far, once it exceeded the bound.
    dropping: Option<usize>,
}

impl Default for LineFramer {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_LINE_BYTES)
    }
}

impl LineFramer {
    /// A framer that drops lines longer than `max_line_bytes` (at least 1).
    pub fn new(max_line_bytes: usize) -> Self {
        Self {
            buffer: Vec::new(),
            max_line_bytes: max_line_bytes.max(1),
            dropping: None,
        }
    }

    /// Feeds a chunk; returns every line it completed, in order.
    pub fn push(&mut self, mut chunk: &[u8]) -> Vec<FramedLine> {
        let mut lines = Vec::new();
        while !chunk.is_empty() {
            let newline = chunk.iter().position(|b| *b == b'\n');
            let (part, rest, complete) = match newline {
                Some(at) => (&chunk[..at], &chunk[at + 1..], true),
                None => (chunk, &chunk[chunk.len()..], false),
            };
            chunk = rest;
            if let Some(dropped) = self.dropping.as_mut() {
                *dropped += part.len();
            } else if self.buffer.len() + part.len() > self.max_line_bytes {
                self.dropping = Some(self.buffer.len() + part.len());
                self.buffer = Vec::new();
            } else {
                self.buffer.extend_from_slice(part);
            }
            if complete {
                lines.push(self.take_line());
            }
        }
        lines
    }

    /// Ends the stream: a final line without a newline is still a line.
    pub fn finish(&mut self) -> Option<FramedLine> {
        if self.buffer.is_empty() && self.dropping.is_none() {
            return None;
        }
        Some(self.take_line())
    }

    fn take_line(&mut self) -> FramedLine {
        if let Some(bytes) = self.dropping.take() {
            return FramedLine::Oversized { bytes };
        }
        FramedLine::Line(std::mem::take(&mut self.buffer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> FramedLine {
        FramedLine::Line(text.as_bytes().to_vec())
    }

    #[test]
    fn splits_across_chunks_and_keeps_a_crlf_line_verbatim() {
        let mut framer = LineFramer::default();
        assert_eq!(framer.push(b"{\"a\""), vec![]);
        assert_eq!(
            framer.push(b":1}\r\n{}\n\nx"),
            vec![line("{\"a\":1}\r"), line("{}"), line("")]
        );
        assert_eq!(framer.finish(), Some(line("x")));
        assert_eq!(framer.finish(), None);
    }

    #[test]
    fn oversized_lines_are_dropped_and_counted() {
        let mut framer = LineFramer::new(4);
        assert_eq!(framer.push(b"abc"), vec![]);
        assert_eq!(framer.push(b"defg"), vec![]);
        assert_eq!(
            framer.push(b"h\nok\n"),
            vec![FramedLine::Oversized { bytes: 8 }, line("ok")]
        );
        assert_eq!(framer.push(b"12345"), vec![]);
        assert_eq!(framer.finish(), Some(FramedLine::Oversized { bytes: 5 }));
    }
}
