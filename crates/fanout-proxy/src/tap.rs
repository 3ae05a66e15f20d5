//! The pumps and the tap. A pump copies one direction chunk by chunk with blocking
//! I/O on its own thread; before writing a chunk it offers a copy to the tap, which
//! queues it ([`crate::queue`]) and never waits.
//!
//! Why the tap is offered a chunk *before* the chunk is written: whoever reads the
//! queue must see a request before its response. Once a request is written, the agent
//! may answer and the other pump may queue the answer before this pump gets to queue
//! the request; queueing first makes that impossible. The cost is one copy of the chunk
//! and a non-blocking push, which is what DESIGN 3.1 allows. Nothing is parsed here:
//! the chunk goes to the transcript as it is, and lines are framed behind it.

use std::io::{self, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fanout_acp::Direction;
use fanout_store::Timestamp;

use crate::metric_names;
use crate::queue::{ChunkQueue, Offered};
use crate::ratelimit::RateLimit;

/// State shared by both directions' taps and the later stages: the WARN limiter and
/// the drop total.
#[derive(Debug)]
pub(crate) struct TapShared {
    pub dropped: AtomicU64,
    drop_warn: RateLimit,
}

impl TapShared {
    pub(crate) fn new(warn_interval: std::time::Duration) -> Self {
        TapShared {
            dropped: AtomicU64::new(0),
            drop_warn: RateLimit::new(warn_interval),
        }
    }

    /// `lines` lines that are in neither the store nor the transcript: counted (`metric`
    /// is their direction's series) and WARNed at most once per interval.
    pub(crate) fn count_drop(
        &self,
        direction: Direction,
        metric: &metrics::Counter,
        lines: u64,
        why: &str,
    ) {
        metric.increment(lines);
        let total = self.dropped.fetch_add(lines, Ordering::Relaxed) + lines;
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
    queue: Arc<ChunkQueue>,
    shared: Arc<TapShared>,
    bytes: metrics::Counter,
    dropped: metrics::Counter,
    why_dropped: &'static str,
}

impl Tap {
    /// `why_dropped`: what a full queue means, for the WARN.
    pub(crate) fn new(
        direction: Direction,
        queue: Arc<ChunkQueue>,
        shared: Arc<TapShared>,
        why_dropped: &'static str,
    ) -> Self {
        let label = direction.as_str();
        Tap {
            direction,
            queue,
            shared,
            bytes: metrics::counter!(metric_names::BYTES, "direction" => label),
            dropped: metrics::counter!(metric_names::FRAMES_DROPPED, "direction" => label),
            why_dropped,
        }
    }

    fn offer(&self, chunk: &[u8], at: Timestamp) {
        match self.queue.offer(self.direction, at, chunk) {
            Offered::Queued | Offered::Closed => {}
            Offered::Dropped { lines } => {
                self.shared
                    .count_drop(self.direction, &self.dropped, lines, self.why_dropped);
            }
        }
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

/// Copies `from` to `to` until EOF, offering every chunk to `tap`, then its end. A
/// failed write stops forwarding (the reader is gone) but not observing: what the
/// source still says is captured. `to` is dropped at the end, which closes it (the
/// agent's stdin closes when the client's does).
pub(crate) fn pump(
    mut from: impl Read,
    to: impl Write,
    tap: &Tap,
    chunk_bytes: usize,
) -> PumpReport {
    let mut report = PumpReport::default();
    let mut buffer = vec![0u8; chunk_bytes.max(1)];
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
        tap.offer(chunk, Timestamp::now());
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
    tap.queue.end(tap.direction, Timestamp::now());
    report
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::time::Duration;

    use super::*;
    use crate::queue::Entry;

    fn tap(max_bytes: usize) -> (Tap, Arc<ChunkQueue>, Arc<TapShared>) {
        let queue = Arc::new(ChunkQueue::new(max_bytes));
        let shared = Arc::new(TapShared::new(Duration::from_secs(60)));
        (
            Tap::new(
                Direction::AgentToClient,
                Arc::clone(&queue),
                Arc::clone(&shared),
                "test",
            ),
            queue,
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

    fn taken(queue: &ChunkQueue) -> Vec<Entry> {
        let mut entries = VecDeque::new();
        while !queue.is_empty() {
            queue.take_blocking(&mut entries);
        }
        entries.into_iter().collect()
    }

    #[test]
    fn forwards_bytes_exactly_and_queues_each_chunk_then_the_end() {
        let (tap, queue, _) = tap(1 << 20);
        let chunks = vec![
            b"{\"a\":".to_vec(),
            b"1}\n\xff\xfe\n".to_vec(),
            b"tail".to_vec(),
        ];
        let mut out = Vec::new();
        let report = pump(Chunked(chunks.clone()), &mut out, &tap, 64);
        assert_eq!(out, b"{\"a\":1}\n\xff\xfe\ntail");
        assert_eq!(report.bytes, out.len() as u64);
        let entries = taken(&queue);
        let data: Vec<Vec<u8>> = entries
            .iter()
            .filter_map(|e| match e {
                Entry::Data { bytes, .. } => Some(bytes.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(data, chunks);
        assert!(matches!(entries.last(), Some(Entry::End { .. })));
    }

    #[test]
    fn a_full_queue_drops_and_counts_lines_but_forwards_everything() {
        let (tap, queue, shared) = tap(8);
        let chunks: Vec<Vec<u8>> = (0..10)
            .map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let input: Vec<u8> = chunks.concat();
        let mut out = Vec::new();
        pump(Chunked(chunks), &mut out, &tap, 1024);
        assert_eq!(out, input);
        // The first chunk fits; the other nine (one line each) do not.
        assert_eq!(shared.dropped.load(Ordering::Relaxed), 9);
        let entries = taken(&queue);
        assert!(matches!(&entries[0], Entry::Data { bytes, .. } if bytes == b"line 0\n"));
        assert!(
            matches!(entries[1], Entry::Lost { tally, .. } if tally.lines == 9 && tally.ends_line)
        );
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
        let (tap, queue, _) = tap(1 << 20);
        let report = pump(
            Chunked(vec![b"a\n".to_vec(), b"b\n".to_vec()]),
            Broken,
            &tap,
            64,
        );
        assert!(report.write_error.is_some());
        assert_eq!(report.bytes, 0);
        assert_eq!(taken(&queue).len(), 3, "two chunks and the end");
    }
}
