//! The pumps and the tap. A pump copies one direction chunk by chunk with blocking
//! I/O on its own thread; before writing a chunk it splits a copy into lines and
//! offers them to the tap, which `try_send`s to a bounded queue and never waits.
//!
//! Why the tap is offered a chunk's lines *before* the chunk is written: the consumer
//! must see a request before its response. Once a request is written, the agent may
//! answer and the other pump may queue the answer before this pump gets to queue the
//! request; queueing first makes that impossible. The cost is a line split and a
//! non-blocking queue push per chunk, which is what DESIGN 3.1 allows.
//!
//! The queue is bounded twice, by frame count and by bytes ([`crate::queue`]), so a
//! flood of huge lines cannot grow memory without bound.

use std::io::{self, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fanout_acp::{Direction, FramedLine, LineFramer};
use fanout_store::Timestamp;

use crate::metric_names;
use crate::queue::{FrameSender, Refused, TapFrame};
use crate::ratelimit::RateLimit;

/// State shared by both directions' taps and the consumer: the WARN limiters and the
/// drop total.
#[derive(Debug)]
pub(crate) struct TapShared {
    pub dropped: AtomicU64,
    pub oversized: AtomicU64,
    drop_warn: RateLimit,
    oversized_warn: RateLimit,
}

impl TapShared {
    pub(crate) fn new(warn_interval: std::time::Duration) -> Self {
        TapShared {
            dropped: AtomicU64::new(0),
            oversized: AtomicU64::new(0),
            drop_warn: RateLimit::new(warn_interval),
            oversized_warn: RateLimit::new(warn_interval),
        }
    }

    /// A line that is in neither the store nor the transcript: counted (`metric` is
    /// its direction's series) and WARNed at most once per interval.
    pub(crate) fn count_drop(&self, direction: Direction, metric: &metrics::Counter, why: &str) {
        metric.increment(1);
        let total = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        if self.drop_warn.ready() {
            tracing::warn!(
                direction = direction.as_str(),
                dropped_so_far = total,
                "{why}: lines are being dropped, neither captured nor in the transcript (forwarding is not affected)"
            );
        }
    }
}

/// One direction's tap.
pub(crate) struct Tap {
    direction: Direction,
    sender: FrameSender,
    shared: Arc<TapShared>,
    frames: metrics::Counter,
    bytes: metrics::Counter,
    dropped: metrics::Counter,
    oversized: metrics::Counter,
}

impl Tap {
    pub(crate) fn new(direction: Direction, sender: FrameSender, shared: Arc<TapShared>) -> Self {
        let label = direction.as_str();
        Tap {
            direction,
            sender,
            shared,
            frames: metrics::counter!(metric_names::FRAMES, "direction" => label),
            bytes: metrics::counter!(metric_names::BYTES, "direction" => label),
            dropped: metrics::counter!(metric_names::FRAMES_DROPPED, "direction" => label),
            oversized: metrics::counter!(metric_names::FRAMES_OVERSIZED, "direction" => label),
        }
    }

    fn offer(&self, framed: FramedLine, observed_at: Timestamp) {
        let line = match framed {
            FramedLine::Line(line) => line,
            FramedLine::Oversized { bytes } => {
                self.oversized.increment(1);
                let total = self.shared.oversized.fetch_add(1, Ordering::Relaxed) + 1;
                if self.shared.oversized_warn.ready() {
                    tracing::warn!(
                        direction = self.direction.as_str(),
                        bytes,
                        total,
                        "a line longer than the framing bound was forwarded but not observed"
                    );
                }
                return;
            }
        };
        self.frames.increment(1);
        let frame = TapFrame {
            direction: self.direction,
            observed_at,
            line,
        };
        match self.sender.try_send(frame) {
            Ok(()) => {}
            Err(Refused::Full) => self.count_drop(),
            // The consumer has stopped taking frames (shutdown): nothing to count.
            Err(Refused::Closed) => {}
        }
    }

    fn count_drop(&self) {
        self.shared
            .count_drop(self.direction, &self.dropped, "the tap queue is full");
    }
}

/// How a pump ended.
#[derive(Debug, Default)]
pub(crate) struct PumpReport {
    pub bytes: u64,
    /// Reading the source failed (EOF is not an error).
    pub read_error: Option<io::Error>,
    /// Writing the destination failed; the pump went on reading and observing.
    pub write_error: Option<io::Error>,
}

/// Copies `from` to `to` until EOF, offering every line to `tap`. A failed write
/// stops forwarding (the reader is gone) but not observing: what the source still
/// says is captured. `to` is dropped at the end, which closes it (the agent's stdin
/// closes when the client's does).
pub(crate) fn pump(
    mut from: impl Read,
    to: impl Write,
    tap: &Tap,
    max_line_bytes: usize,
    chunk_bytes: usize,
) -> PumpReport {
    let mut report = PumpReport::default();
    let mut buffer = vec![0u8; chunk_bytes.max(1)];
    let mut framer = LineFramer::new(max_line_bytes);
    let mut to = Some(to);
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                report.read_error = Some(e);
                break;
            }
        };
        let chunk = &buffer[..read];
        let observed_at = Timestamp::now();
        for framed in framer.push(chunk) {
            tap.offer(framed, observed_at);
        }
        if let Some(destination) = to.as_mut() {
            match destination
                .write_all(chunk)
                .and_then(|()| destination.flush())
            {
                Ok(()) => {
                    report.bytes += read as u64;
                    tap.bytes.increment(read as u64);
                }
                Err(e) => {
                    tracing::debug!(direction = tap.direction.as_str(), error = %e, "destination closed; observing only");
                    report.write_error = Some(e);
                    to = None;
                }
            }
        }
    }
    if let Some(last) = framer.finish() {
        tap.offer(last, Timestamp::now());
    }
    report
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::queue::{FrameReceiver, frame_queue};

    fn tap(capacity: usize, max_bytes: usize) -> (Tap, FrameReceiver, Arc<TapShared>) {
        let (sender, receiver) = frame_queue(capacity, max_bytes);
        let shared = Arc::new(TapShared::new(Duration::from_secs(60)));
        (
            Tap::new(Direction::AgentToClient, sender, Arc::clone(&shared)),
            receiver,
            shared,
        )
    }

    /// A reader that hands out its data in the given chunk sizes.
    struct Chunked(Vec<Vec<u8>>);
    impl Read for Chunked {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Ok(0);
            }
            let chunk = self.0.remove(0);
            buf[..chunk.len()].copy_from_slice(&chunk);
            Ok(chunk.len())
        }
    }

    #[test]
    fn forwards_bytes_exactly_and_frames_lines_across_chunks() {
        let (tap, mut receiver, _) = tap(16, 1 << 20);
        let chunks = vec![
            b"{\"a\":".to_vec(),
            b"1}\n\xff\xfe\n".to_vec(),
            b"tail".to_vec(),
        ];
        let mut out = Vec::new();
        let report = pump(Chunked(chunks), &mut out, &tap, 1 << 20, 64);
        assert_eq!(out, b"{\"a\":1}\n\xff\xfe\ntail");
        assert_eq!(report.bytes, out.len() as u64);
        let lines: Vec<Vec<u8>> = std::iter::from_fn(|| receiver.try_recv().ok())
            .map(|f| f.line)
            .collect();
        assert_eq!(
            lines,
            vec![
                b"{\"a\":1}".to_vec(),
                b"\xff\xfe".to_vec(),
                b"tail".to_vec()
            ]
        );
    }

    #[test]
    fn a_full_queue_drops_and_counts_but_forwards_everything() {
        let (tap, mut receiver, shared) = tap(2, 1 << 20);
        let input: Vec<u8> = (0..10)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let mut out = Vec::new();
        pump(Chunked(vec![input.clone()]), &mut out, &tap, 1 << 20, 1024);
        assert_eq!(out, input);
        assert_eq!(shared.dropped.load(Ordering::Relaxed), 8);
        assert_eq!(
            receiver.try_recv().map(|f| f.line).ok(),
            Some(b"line 0".to_vec())
        );
    }

    #[test]
    fn the_byte_budget_bounds_the_queue() {
        let (tap, _receiver, shared) = tap(100, 10);
        let mut out = Vec::new();
        pump(
            Chunked(vec![b"123456\n123456\n1\n".to_vec()]),
            &mut out,
            &tap,
            1 << 20,
            1024,
        );
        // The first line fits; the second would pass 10 bytes; the third fits again.
        assert_eq!(shared.dropped.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_closed_destination_stops_forwarding_not_observing() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::from(io::ErrorKind::BrokenPipe))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (tap, mut receiver, _) = tap(16, 1 << 20);
        let report = pump(
            Chunked(vec![b"a\n".to_vec(), b"b\n".to_vec()]),
            Broken,
            &tap,
            1 << 20,
            64,
        );
        assert!(report.write_error.is_some());
        assert_eq!(report.bytes, 0);
        assert_eq!(std::iter::from_fn(|| receiver.try_recv().ok()).count(), 2);
    }
}
