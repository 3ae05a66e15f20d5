//! The chunk queue between the pumps and the one stage that takes what they read: the
//! recorder thread (with a transcript) or the capture follower (without one).
//!
//! The pumps hand it whole chunks as they read them, in the order they read them, and
//! it never makes them wait: it is bounded by bytes, and a chunk that does not fit is
//! dropped and tallied, so the next entry of that direction is preceded by a
//! [`Entry::Lost`] saying how much is missing there. Both kinds of consumer are served:
//! a thread blocks on a condition variable, a task awaits a [`tokio::sync::Notify`].

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use fanout_acp::Direction;
use fanout_capture::transcript::Record;
use fanout_store::Timestamp;
use tokio::sync::Notify;

/// What wakes a thread gathering entries ([`ChunkQueue::take_within`]) before its time
/// is up: one full read of a pump, so that a stream never waits for the deadline (a
/// splicing pump would be waiting for room in its side pipe by then).
const WAKE_GATHERING_BYTES: usize = 64 * 1024;

/// One thing a pump saw: the element of the queue.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A chunk, as read and forwarded.
    Data {
        direction: Direction,
        at: Timestamp,
        bytes: Vec<u8>,
    },
    /// A chunk, as read and forwarded, whose `len` bytes wait in the direction's side
    /// pipe ([`crate::splice`]), not here.
    Piped {
        direction: Direction,
        at: Timestamp,
        len: usize,
    },
    /// The direction reached its end.
    End { direction: Direction, at: Timestamp },
    /// Chunks of the direction that did not fit.
    Lost {
        direction: Direction,
        at: Timestamp,
        tally: LostTally,
    },
}

impl Entry {
    /// The transcript record of this entry. A [`Entry::Piped`] chunk's bytes are not
    /// here: only the recorder, which holds the side pipes, can write it, and anyone
    /// else can only say it is lost. (Side pipes exist only with a recorder.)
    pub(crate) fn record(&self) -> Record<'_> {
        match self {
            Entry::Piped { direction, at, len } => Record::Lost {
                direction: *direction,
                at: *at,
                bytes: *len as u64,
                lines: 0,
                ends_line: false,
            },
            Entry::Data {
                direction,
                at,
                bytes,
            } => Record::Data {
                direction: *direction,
                at: *at,
                bytes,
            },
            Entry::End { direction, at } => Record::End {
                direction: *direction,
                at: *at,
            },
            Entry::Lost {
                direction,
                at,
                tally,
            } => Record::Lost {
                direction: *direction,
                at: *at,
                bytes: tally.bytes,
                lines: tally.lines,
                ends_line: tally.ends_line,
            },
        }
    }

    /// Bytes this entry holds in the queue.
    fn size(&self) -> usize {
        match self {
            Entry::Data { bytes, .. } => bytes.len(),
            // Its bytes are in the side pipe, which bounds them itself.
            Entry::Piped { .. } | Entry::End { .. } | Entry::Lost { .. } => 0,
        }
    }
}

/// What was dropped of one direction since its last queued entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LostTally {
    pub bytes: u64,
    /// Newlines in the dropped bytes.
    pub lines: u64,
    /// The last dropped chunk ended with a newline.
    pub ends_line: bool,
}

/// The newlines in `bytes`.
pub(crate) fn count_lines(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64
}

fn index(direction: Direction) -> usize {
    match direction {
        Direction::ClientToAgent => 0,
        Direction::AgentToClient => 1,
    }
}

/// How the thread that takes entries waits on the condition variable.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Taker {
    /// Not waiting (or a task that awaits the `Notify`).
    #[default]
    Away,
    /// Until there are entries ([`ChunkQueue::take_blocking`]): woken by any.
    Waiting,
    /// With a deadline ([`ChunkQueue::take_within`]): woken only once the entries hold
    /// [`WAKE_GATHERING_BYTES`].
    Gathering,
}

#[derive(Debug, Default)]
struct State {
    entries: VecDeque<Entry>,
    queued_bytes: usize,
    lost: [Option<(Timestamp, LostTally)>; 2],
    closed: bool,
    /// How the taking thread waits, if it does: only then is a futex wake (a system
    /// call on the pump's path) worth making.
    taker: Taker,
    /// Bytes of the chunks queued since the last take, copied or piped.
    bytes_since_take: usize,
}

impl State {
    /// Queues `entry`, after the tally of what its direction lost, if any.
    fn queue(&mut self, direction: Direction, entry: Entry) {
        if let Some((at, tally)) = self.lost[index(direction)].take() {
            self.entries.push_back(Entry::Lost {
                direction,
                at,
                tally,
            });
        }
        self.queued_bytes += entry.size();
        self.bytes_since_take += match &entry {
            Entry::Data { bytes, .. } => bytes.len(),
            Entry::Piped { len, .. } => *len,
            Entry::End { .. } | Entry::Lost { .. } => 0,
        };
        self.entries.push_back(entry);
    }
}

/// What became of a chunk offered to the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Offered {
    Queued,
    /// It did not fit; it held this many newlines.
    Dropped {
        lines: u64,
    },
    /// The queue is closed (shutdown): nothing to count.
    Closed,
}

/// A byte-bounded queue of [`Entry`]s; see the module doc.
#[derive(Debug)]
pub(crate) struct ChunkQueue {
    state: Mutex<State>,
    ready: Condvar,
    notify: Notify,
    max_bytes: usize,
}

impl ChunkQueue {
    /// A queue holding at most `max_bytes` of chunk bytes (but for one larger chunk
    /// alone, so a big chunk is never refused for ever).
    pub(crate) fn new(max_bytes: usize) -> Self {
        ChunkQueue {
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
            notify: Notify::new(),
            max_bytes,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wake(&self) {
        self.ready.notify_one();
        self.notify.notify_one();
    }

    /// Queues a copy of `bytes` read from `direction` at `at`; never waits.
    pub(crate) fn offer(&self, direction: Direction, at: Timestamp, bytes: &[u8]) -> Offered {
        let mut state = self.state();
        if state.closed {
            return Offered::Closed;
        }
        if !state.entries.is_empty() && state.queued_bytes + bytes.len() > self.max_bytes {
            let lines = count_lines(bytes);
            let lost = &mut state.lost[index(direction)];
            let (_, tally) = lost.get_or_insert((at, LostTally::default()));
            tally.bytes += bytes.len() as u64;
            tally.lines += lines;
            tally.ends_line = bytes.last() == Some(&b'\n');
            return Offered::Dropped { lines };
        }
        let entry = Entry::Data {
            direction,
            at,
            bytes: bytes.to_vec(),
        };
        self.queued(state, direction, entry)
    }

    /// Queues `entry` and wakes whoever waits, without a futex wake when no thread
    /// does (it would be a system call on the pump's path).
    fn queued(
        &self,
        mut state: std::sync::MutexGuard<'_, State>,
        direction: Direction,
        entry: Entry,
    ) -> Offered {
        state.queue(direction, entry);
        let wake = match state.taker {
            Taker::Away => false,
            Taker::Waiting => true,
            Taker::Gathering => state.bytes_since_take >= WAKE_GATHERING_BYTES,
        };
        drop(state);
        if wake {
            self.ready.notify_one();
        }
        self.notify.notify_one();
        Offered::Queued
    }

    /// A chunk of `len` bytes read from `direction` at `at`, now waiting in the
    /// direction's side pipe; never dropped (the side pipe bounds it), never waits.
    pub(crate) fn offer_piped(&self, direction: Direction, at: Timestamp, len: usize) -> Offered {
        let state = self.state();
        if state.closed {
            return Offered::Closed;
        }
        self.queued(state, direction, Entry::Piped { direction, at, len })
    }

    /// The end of `direction` (EOF); never dropped.
    pub(crate) fn end(&self, direction: Direction, at: Timestamp) {
        let mut state = self.state();
        if state.closed {
            return;
        }
        state.queue(direction, Entry::End { direction, at });
        drop(state);
        self.wake();
    }

    /// Takes no more entries; those queued (and the tallies of what was lost) can still
    /// be taken.
    pub(crate) fn close(&self) {
        let mut state = self.state();
        if !state.closed {
            state.closed = true;
            for direction in [Direction::ClientToAgent, Direction::AgentToClient] {
                if let Some((at, tally)) = state.lost[index(direction)].take() {
                    state.entries.push_back(Entry::Lost {
                        direction,
                        at,
                        tally,
                    });
                }
            }
        }
        drop(state);
        self.wake();
    }

    /// Moves every queued entry into `into`; `None` when there is none now, `Some(false)`
    /// when there is none and never will be (closed).
    fn take_now(&self, state: &mut State, into: &mut VecDeque<Entry>) -> Option<bool> {
        if state.entries.is_empty() {
            return (state.closed).then_some(false);
        }
        state.queued_bytes = 0;
        state.bytes_since_take = 0;
        into.append(&mut state.entries);
        Some(true)
    }

    /// Waits (blocking the thread) until there are entries and moves them all into
    /// `into`; false once the queue is closed and empty.
    pub(crate) fn take_blocking(&self, into: &mut VecDeque<Entry>) -> bool {
        let mut state = self.state();
        loop {
            if let Some(taken) = self.take_now(&mut state, into) {
                state.taker = Taker::Away;
                return taken;
            }
            state.taker = Taker::Waiting;
            state = self
                .ready
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Waits (blocking the thread) until there are entries or `wait` has passed, and
    /// moves them all into `into`; false once the queue is closed and empty. The pumps
    /// wake a thread waiting here only once [`WAKE_GATHERING_BYTES`] have come (as do
    /// [`ChunkQueue::end`] and [`ChunkQueue::close`]): otherwise it takes what came
    /// when its time is up, so a run of small chunks costs it one wake-up per `wait`,
    /// not one per chunk, and a stream is taken as it comes.
    pub(crate) fn take_within(&self, into: &mut VecDeque<Entry>, wait: Duration) -> bool {
        let mut state = self.state();
        if let Some(taken) = self.take_now(&mut state, into) {
            return taken;
        }
        state.taker = Taker::Gathering;
        let (mut state, _) = self
            .ready
            .wait_timeout(state, wait)
            .unwrap_or_else(PoisonError::into_inner);
        state.taker = Taker::Away;
        self.take_now(&mut state, into).unwrap_or(true)
    }

    /// Moves every queued entry into `into` without waiting: `None` when there is none
    /// now, `Some(false)` when there is none and never will be (closed).
    pub(crate) fn try_take(&self, into: &mut VecDeque<Entry>) -> Option<bool> {
        self.take_now(&mut self.state(), into)
    }

    /// [`ChunkQueue::take_blocking`] for a task.
    pub(crate) async fn take(&self, into: &mut VecDeque<Entry>) -> bool {
        loop {
            let notified = self.notify.notified();
            if let Some(taken) = self.take_now(&mut self.state(), into) {
                return taken;
            }
            notified.await;
        }
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.state().entries.is_empty()
    }

    /// Newlines in what is still queued (lines that will not be taken at an abandon).
    pub(crate) fn queued_lines(&self) -> u64 {
        self.state()
            .entries
            .iter()
            .map(|entry| match entry {
                Entry::Data { bytes, .. } => count_lines(bytes),
                Entry::Piped { .. } | Entry::End { .. } | Entry::Lost { .. } => 0,
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Direction = Direction::AgentToClient;

    fn drain(queue: &ChunkQueue) -> Vec<Entry> {
        let mut taken = VecDeque::new();
        if !queue.is_empty() {
            assert!(queue.take_blocking(&mut taken));
        }
        taken.into_iter().collect()
    }

    /// A thread taking from `queue` with deadlines of `wait` until it gets something or
    /// the queue ends: what it got, `None` at the end.
    fn gatherer(
        queue: &std::sync::Arc<ChunkQueue>,
        wait: Duration,
    ) -> std::thread::JoinHandle<Option<VecDeque<Entry>>> {
        let queue = std::sync::Arc::clone(queue);
        std::thread::spawn(move || {
            let mut taken = VecDeque::new();
            while taken.is_empty() {
                if !queue.take_within(&mut taken, wait) {
                    return None;
                }
            }
            Some(taken)
        })
    }

    fn until_gathering(queue: &ChunkQueue) {
        while queue.state().taker != Taker::Gathering {
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_gathering_taker_gets_small_chunks_at_its_deadline_and_a_stream_at_once() {
        let queue = std::sync::Arc::new(ChunkQueue::new(1 << 20));
        // Small chunks while it waits: taken when its (short) time is up.
        let taking = gatherer(&queue, Duration::from_millis(10));
        queue.offer(D, Timestamp::now(), b"one line\n");
        assert_eq!(taking.join().unwrap().map(|taken| taken.len()), Some(1));
        // A stream's worth wakes it long before its deadline (a minute: the test
        // would hang, not pass, if it did not).
        let taking = gatherer(&queue, Duration::from_secs(60));
        until_gathering(&queue);
        queue.offer_piped(D, Timestamp::now(), WAKE_GATHERING_BYTES);
        let taken = taking.join().unwrap().unwrap_or_default();
        assert!(
            matches!(taken.front(), Some(Entry::Piped { len, .. }) if *len == WAKE_GATHERING_BYTES)
        );
        // And closing wakes it too, with nothing left: the end.
        let taking = gatherer(&queue, Duration::from_secs(60));
        until_gathering(&queue);
        queue.close();
        assert!(taking.join().unwrap().is_none(), "closed and empty");
    }

    #[test]
    fn what_does_not_fit_is_dropped_and_said_before_the_next_entry() {
        let queue = ChunkQueue::new(10);
        let at = Timestamp::now();
        // Larger than the whole budget, but the queue is empty: it goes.
        assert_eq!(queue.offer(D, at, &[b'x'; 25]), Offered::Queued);
        assert_eq!(queue.offer(D, at, b"a\nb\n"), Offered::Dropped { lines: 2 });
        assert_eq!(queue.offer(D, at, b"c"), Offered::Dropped { lines: 0 });
        assert_eq!(drain(&queue).len(), 1);
        assert_eq!(queue.offer(D, at, b"d\n"), Offered::Queued);
        queue.end(D, at);
        let entries = drain(&queue);
        assert_eq!(
            entries[0],
            Entry::Lost {
                direction: D,
                at,
                tally: LostTally {
                    bytes: 5,
                    lines: 2,
                    ends_line: false
                }
            }
        );
        assert!(matches!(&entries[1], Entry::Data { bytes, .. } if bytes == b"d\n"));
        assert_eq!(entries[2], Entry::End { direction: D, at });
        // The budget is free again once taken.
        assert_eq!(queue.offer(D, at, &[b'y'; 10]), Offered::Queued);
        assert_eq!(queue.offer(D, at, b"z\n"), Offered::Dropped { lines: 1 });
        queue.close();
        assert_eq!(queue.offer(D, at, b"late"), Offered::Closed);
        let entries = drain(&queue);
        assert!(matches!(entries[1], Entry::Lost { tally, .. } if tally.ends_line));
        let mut none = VecDeque::new();
        assert!(!queue.take_blocking(&mut none), "closed and empty");
    }
}
