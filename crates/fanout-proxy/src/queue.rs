//! The bounded frame queue both stages use (pumps to recorder, recorder to capturer).
//!
//! Bounded twice: by frame count (the channel) and by bytes (a budget the sender takes
//! and the receiver gives back as it takes each frame off), so a flood of huge lines
//! cannot grow memory without bound. Sending never waits: a full queue refuses.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use fanout_acp::Direction;
use fanout_store::Timestamp;
use tokio::sync::mpsc;

/// One complete line, as the tap saw it: the element of both queues.
#[derive(Debug)]
pub(crate) struct TapFrame {
    pub direction: Direction,
    pub observed_at: Timestamp,
    pub line: Vec<u8>,
}

/// The byte budget of one queue, shared by its senders (take) and receiver (give back).
#[derive(Debug)]
struct QueueBudget {
    queued_bytes: AtomicUsize,
    max_bytes: usize,
}

impl QueueBudget {
    fn try_take(&self, bytes: usize) -> bool {
        let before = self.queued_bytes.fetch_add(bytes, Ordering::AcqRel);
        if before.saturating_add(bytes) > self.max_bytes && before > 0 {
            // Over budget; a single line larger than the whole budget still goes when
            // the queue is empty, so one big line is never refused for ever.
            self.queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
            return false;
        }
        true
    }

    fn give_back(&self, bytes: usize) {
        self.queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Why a frame was not queued; the frame is dropped either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Either bound is reached.
    Full,
    /// The receiver has closed the queue or is gone.
    Closed,
}

/// A queue of at most `max_frames` frames and (but for one oversized frame alone)
/// `max_bytes` bytes of lines.
pub(crate) fn frame_queue(max_frames: usize, max_bytes: usize) -> (FrameSender, FrameReceiver) {
    let (sender, receiver) = mpsc::channel(max_frames.max(1));
    let budget = Arc::new(QueueBudget {
        queued_bytes: AtomicUsize::new(0),
        max_bytes,
    });
    (
        FrameSender {
            sender,
            budget: Arc::clone(&budget),
        },
        FrameReceiver { receiver, budget },
    )
}

#[derive(Clone, Debug)]
pub(crate) struct FrameSender {
    sender: mpsc::Sender<TapFrame>,
    budget: Arc<QueueBudget>,
}

impl FrameSender {
    /// Queues `frame` if both bounds allow; never waits.
    pub(crate) fn try_send(&self, frame: TapFrame) -> Result<(), Refused> {
        let len = frame.line.len();
        if !self.budget.try_take(len) {
            return Err(Refused::Full);
        }
        self.sender.try_send(frame).map_err(|error| {
            self.budget.give_back(len);
            match error {
                mpsc::error::TrySendError::Full(_) => Refused::Full,
                mpsc::error::TrySendError::Closed(_) => Refused::Closed,
            }
        })
    }

    /// Whether nothing is queued (every frame sent has been received).
    #[cfg(test)]
    pub(crate) fn is_drained(&self) -> bool {
        self.sender.capacity() == self.sender.max_capacity()
    }
}

#[derive(Debug)]
pub(crate) struct FrameReceiver {
    receiver: mpsc::Receiver<TapFrame>,
    budget: Arc<QueueBudget>,
}

impl FrameReceiver {
    /// The next frame; `None` once the queue is closed (or every sender is gone) and
    /// empty. Cancel-safe: nothing awaits after a frame is taken off.
    pub(crate) async fn recv(&mut self) -> Option<TapFrame> {
        let frame = self.receiver.recv().await?;
        self.budget.give_back(frame.line.len());
        Some(frame)
    }

    pub(crate) fn try_recv(&mut self) -> Result<TapFrame, mpsc::error::TryRecvError> {
        let frame = self.receiver.try_recv()?;
        self.budget.give_back(frame.line.len());
        Ok(frame)
    }

    /// Refuses new frames (as [`Refused::Closed`]); those queued can still be received.
    pub(crate) fn close(&mut self) {
        self.receiver.close();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.receiver.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: usize) -> TapFrame {
        TapFrame {
            direction: Direction::ClientToAgent,
            observed_at: Timestamp::now(),
            line: vec![b'x'; len],
        }
    }

    #[test]
    fn both_bounds_refuse_and_receiving_gives_the_bytes_back() {
        let (sender, mut receiver) = frame_queue(2, 10);
        // Larger than the whole budget, but the queue is empty: it goes.
        assert_eq!(sender.try_send(frame(25)), Ok(()));
        assert_eq!(sender.try_send(frame(1)), Err(Refused::Full), "bytes");
        assert_eq!(receiver.try_recv().map(|f| f.line.len()), Ok(25));
        assert_eq!(sender.try_send(frame(6)), Ok(()));
        assert_eq!(sender.try_send(frame(5)), Err(Refused::Full), "bytes");
        assert_eq!(sender.try_send(frame(4)), Ok(()));
        assert_eq!(sender.try_send(frame(0)), Err(Refused::Full), "frames");
        assert!(receiver.try_recv().is_ok());
        assert!(receiver.try_recv().is_ok());
        assert!(sender.is_drained());
        // Refused frames gave their bytes back: the whole budget is free again.
        assert_eq!(sender.try_send(frame(10)), Ok(()));
        receiver.close();
        assert_eq!(sender.try_send(frame(0)), Err(Refused::Closed));
        assert_eq!(receiver.try_recv().map(|f| f.line.len()), Ok(10));
    }
}
