//! Forwarding without copying (Linux `tee(2)` and `splice(2)`). When a pump's source is
//! a pipe and its destination a pipe or a socket, the bytes it forwards never enter the
//! pump's memory:
//!
//! 1. `tee` duplicates what is waiting in the source into the direction's *side pipe*
//!    (page references, no copy), and the pump queues a [`crate::queue::Entry::Piped`]
//!    saying how many bytes that was;
//! 2. `splice` moves those bytes on to the destination (again page references);
//! 3. the recorder reads them out of the side pipe into its write buffer and writes
//!    them to the transcript.
//!
//! The copying pump made four copies of every byte (read, the queue's copy, write, the
//! recorder's buffer) before the one into the page cache; this path makes two. The
//! recorder reads rather than splices into the file: splicing a pipe into an ext4 file
//! cost as much CPU as reading it out and writing the buffer (64 ms per 256 MiB either
//! way, into reserved space), so the path that frames records stays.
//!
//! The pipes are asked for [`PIPE_BYTES`] once a direction streams, not before: a
//! line-at-a-time session keeps the kernel's 64 KiB pipes (and charges its user no more
//! pipe memory), a flood moves in fewer, larger steps. That covers the client's pipes
//! too: a bigger buffer changes nothing a client can see but how much it may write
//! before it waits.
//!
//! Under a stream the side pipe is where the recorder sets the pace. When it is full,
//! the pump waits up to [`SIDE_PATIENCE`] for the recorder to make room, so a recorder
//! that keeps up at all loses no line from the transcript; measured on the proxy bench,
//! a pump that never waited outran the recorder once the client's pipes were larger,
//! and 400–5,500 lines of each 128 MiB flood were missing. A recorder that makes no
//! room in that time (a stalled disk) is not waited for again until the side pipe takes
//! a chunk without waiting: meanwhile the pump reads each chunk into its buffer and
//! queues a copy, as the copying pump does (and the queue may drop it, counted). So
//! forwarding waits for the transcript at most [`SIDE_PATIENCE`] at a time, and only
//! while the transcript is moving.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, poll};
use rustix::pipe::{PipeFlags, SpliceFlags, fcntl_setpipe_size, pipe_with, splice, tee};

/// The size asked for a streaming direction's pipes (source, destination, side pipe):
/// how far the recorder may fall behind before the pump waits for it, and how much one
/// chunk may move. 1 MiB is the default `fs.pipe-max-size`. Measured on the proxy bench
/// against 64 KiB pipes: 711 vs 586 MB/s through the proxy, in the same run (the agent's
/// pipes only); with the client's pipes as well, the median of 6 alternating floods went
/// from 955 to 1123 MB/s.
pub(crate) const PIPE_BYTES: usize = 1024 * 1024;
/// How long a splicing pump waits for the recorder to make room in a full side pipe
/// before it stops waiting (until the recorder has caught up). Page-cache writes take
/// well under a millisecond per side pipe; this is for a disk that throttles writeback.
pub(crate) const SIDE_PATIENCE: Duration = Duration::from_millis(100);
/// The largest chunk a splicing pump takes at once: larger chunks would cost capture
/// memory (it reads the transcript a record at a time) for no measured gain.
pub(crate) const SPLICE_CHUNK_BYTES: usize = 256 * 1024;

/// Asks for [`PIPE_BYTES`] of room in the pipe `fd` (best effort: a system whose limit
/// is lower keeps what it gives, which only means smaller chunks; a socket says no).
pub(crate) fn enlarge_pipe(fd: &impl AsFd) {
    let _ = fcntl_setpipe_size(fd, PIPE_BYTES);
}

/// One direction's side pipe: the pump tees into `write`, the recorder reads out of
/// `read`. It starts at the kernel's default size; the pump enlarges it when it
/// streams.
#[derive(Debug)]
pub(crate) struct SidePipe {
    pub read: OwnedFd,
    pub write: OwnedFd,
}

impl SidePipe {
    pub(crate) fn new() -> io::Result<Self> {
        let (read, write) = pipe_with(PipeFlags::CLOEXEC)?;
        Ok(SidePipe { read, write })
    }
}

/// Whether a pump from `from` to `to` can splice: `tee` needs a pipe to read, and
/// `splice` a pipe on one side (the source) and a pipe or socket on the other.
pub(crate) fn can_splice(from: &File, to: &File) -> bool {
    let kind = |file: &File| file.metadata().map(|m| m.file_type()).ok();
    matches!(kind(from), Some(t) if t.is_fifo())
        && matches!(kind(to), Some(t) if t.is_fifo() || t.is_socket())
}

/// What [`tee_next`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Teed {
    /// This many bytes at the head of the source are now also in the side pipe.
    Bytes(usize),
    /// The source reached its end.
    End,
    /// The side pipe has no room: take this chunk the copying way.
    SideFull,
}

/// Tees at most `max` bytes of what `from` has into `side`, waiting until `from` has
/// something (or ends), and for room in `side` at most `patience` (never without).
pub(crate) fn tee_next(
    from: &File,
    side: &OwnedFd,
    max: usize,
    mut patience: Option<Duration>,
) -> io::Result<Teed> {
    // A non-blocking tee fails alike when the source is empty and when the side pipe
    // is full; only after poll said the source has bytes (and only this pump reads
    // it) does a failure mean the side pipe is full. Under a stream the source is
    // seldom empty, so poll is only paid for when it is.
    let mut polled = false;
    loop {
        match tee(from, side, max, SpliceFlags::NONBLOCK) {
            Ok(0) => return Ok(Teed::End),
            Ok(n) => return Ok(Teed::Bytes(n)),
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) if polled => match patience.take() {
                Some(wait) if wait_for(side, PollFlags::OUT, Some(wait))? => {}
                _ => return Ok(Teed::SideFull),
            },
            Err(rustix::io::Errno::AGAIN) => {
                wait_for(from, PollFlags::IN, None)?;
                polled = true;
            }
            Err(errno) => return Err(errno.into()),
        }
    }
}

/// Moves exactly `len` bytes from `from` to `to`, waiting for room in `to` when it is
/// non-blocking. On failure, how many bytes did move (the rest are still in `from`).
pub(crate) fn splice_exact(
    from: &impl AsFd,
    to: &impl AsFd,
    len: usize,
) -> Result<(), (io::Error, usize)> {
    let mut moved = 0;
    while moved < len {
        match splice(from, None, to, None, len - moved, SpliceFlags::MOVE) {
            Ok(0) => {
                let error = io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the source ended inside a chunk it had teed",
                );
                return Err((error, moved));
            }
            Ok(n) => moved += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => {
                wait_for(to, PollFlags::OUT, None).map_err(|error| (error, moved))?;
            }
            Err(errno) => return Err((errno.into(), moved)),
        }
    }
    Ok(())
}

/// Waits until `fd` is ready for `events`, for at most `timeout` if one is given:
/// whether it is.
fn wait_for(fd: &impl AsFd, events: PollFlags, timeout: Option<Duration>) -> io::Result<bool> {
    let timeout = timeout
        .map(rustix::event::Timespec::try_from)
        .transpose()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the wait is too long"))?;
    let mut fds = [PollFd::new(fd, events)];
    loop {
        match poll(&mut fds, timeout.as_ref()) {
            Ok(ready) => return Ok(ready > 0),
            Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(errno.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;

    fn pipe() -> (File, File) {
        let (read, write) = pipe_with(PipeFlags::CLOEXEC).unwrap();
        (File::from(read), File::from(write))
    }

    #[test]
    fn tee_then_splice_gives_both_sides_the_same_bytes() {
        let (from_read, mut from_write) = pipe();
        let (to_read, to_write) = pipe();
        let side = SidePipe::new().unwrap();
        assert!(can_splice(&from_read, &to_write));
        from_write.write_all(b"one\ntwo\n").unwrap();
        let Teed::Bytes(n) = tee_next(&from_read, &side.write, 1 << 16, None).unwrap() else {
            panic!("nothing teed");
        };
        assert_eq!(n, 8);
        splice_exact(&from_read, &to_write, n).unwrap();
        drop(to_write);
        let mut forwarded = Vec::new();
        let mut to_read = to_read;
        to_read.read_to_end(&mut forwarded).unwrap();
        assert_eq!(forwarded, b"one\ntwo\n");
        let mut recorded = vec![0; n];
        let mut side_read = File::from(side.read);
        side_read.read_exact(&mut recorded).unwrap();
        assert_eq!(recorded, b"one\ntwo\n");
        drop(from_write);
        assert_eq!(
            tee_next(&from_read, &side.write, 1 << 16, None).unwrap(),
            Teed::End
        );
        drop(side_read);
    }

    #[test]
    fn a_full_side_pipe_is_waited_for_only_as_long_as_patience_allows() {
        let (from_read, mut from_write) = pipe();
        let side = SidePipe::new().unwrap();
        let capacity = rustix::pipe::fcntl_getpipe_size(&side.write).unwrap();
        File::from(side.write.try_clone().unwrap())
            .write_all(&vec![b'x'; capacity])
            .unwrap();
        from_write.write_all(b"more\n").unwrap();
        // Nobody makes room: without patience it is said at once, and with some, once
        // it runs out.
        for patience in [None, Some(Duration::from_millis(20))] {
            assert_eq!(
                tee_next(&from_read, &side.write, 1 << 16, patience).unwrap(),
                Teed::SideFull
            );
        }
        // A reader makes room while the pump waits.
        let mut side_read = File::from(side.read);
        let reader = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            let mut drained = vec![0u8; capacity];
            side_read.read_exact(&mut drained).unwrap();
            side_read
        });
        let patience = Some(Duration::from_secs(60));
        assert_eq!(
            tee_next(&from_read, &side.write, 1 << 16, patience).unwrap(),
            Teed::Bytes(5)
        );
        reader.join().unwrap();
    }

    #[test]
    fn only_pipes_are_teed() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("f")).unwrap();
        let (read, write) = pipe();
        assert!(!can_splice(&file, &write));
        assert!(!can_splice(&read, &file));
    }
}
