//! [`Applier`]: a transcript's records in, capture's lines, batches and marks out.

use fanout_acp::{Direction, FramedLine, LineFramer};
use fanout_store::{Timestamp, TranscriptMark};
use serde::Serialize;

use super::Record;
use crate::capture::{Capture, Held};

/// At most this many lines go to capture as one batch (one group commit).
pub const DEFAULT_BATCH_LINES: usize = 128;

/// What an [`Applier`] has seen and done. Per-direction figures are indexed c2a, a2c.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ApplyStats {
    /// Complete lines framed (oversized ones not included).
    pub lines: [u64; 2],
    /// Lines longer than the framing bound: in the transcript, never observed.
    pub oversized: [u64; 2],
    /// Lines the transcript itself says it lost (its `lost` records), at least.
    pub lost_lines: [u64; 2],
    /// Lines whose writes were already in the store (up to the transcript's mark).
    pub replayed: u64,
    /// Lines whose writes are committed (or refused for good, and counted by capture).
    pub applied: u64,
    /// Lines given to capture whose writes wait for the store.
    pub held: u64,
}

/// One direction's framing: the bytes of its records, in order, into lines.
struct DirectionFramer {
    framer: LineFramer,
    /// After lost bytes that cut a line: drop bytes up to the next newline.
    resync: bool,
}

/// A line a [`LineSplitter`] framed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SplitLine {
    /// A complete line (without its newline) seen in `direction` at `at`.
    Line {
        /// Which way the line went.
        direction: Direction,
        /// The line's bytes, without the newline.
        line: Vec<u8>,
        /// When its newline was read.
        at: Timestamp,
    },
    /// A line longer than the bound: recorded, never observed.
    Oversized {
        /// Which way the line went.
        direction: Direction,
    },
}

/// The one framing rule of transcripts: each direction's record bytes into lines, as
/// the proxy's tap saw them (see [`crate::transcript`]). Used by [`Applier`], and by
/// anyone who wants a transcript's lines.
pub struct LineSplitter {
    framers: [DirectionFramer; 2],
    max_line_bytes: usize,
    lost_lines: [u64; 2],
}

impl LineSplitter {
    /// Lines longer than `max_line_bytes` are reported, not kept.
    pub fn new(max_line_bytes: usize) -> Self {
        let framer = || DirectionFramer {
            framer: LineFramer::new(max_line_bytes),
            resync: false,
        };
        LineSplitter {
            framers: [framer(), framer()],
            max_line_bytes,
            lost_lines: [0, 0],
        }
    }

    /// The lines `record` completes, in order.
    pub fn push(&mut self, record: &Record<'_>) -> Vec<SplitLine> {
        let direction = record.direction();
        let framer = &mut self.framers[index(direction)];
        let (framed, at) = match *record {
            Record::Data { at, bytes, .. } => {
                let mut bytes = bytes;
                if framer.resync {
                    match bytes.iter().position(|b| *b == b'\n') {
                        Some(newline) => {
                            bytes = &bytes[newline + 1..];
                            framer.resync = false;
                        }
                        None => return Vec::new(),
                    }
                }
                (framer.framer.push(bytes), at)
            }
            Record::End { at, .. } => {
                framer.resync = false;
                (framer.framer.finish().into_iter().collect(), at)
            }
            Record::Lost {
                lines, ends_line, ..
            } => {
                // The line in progress is cut: drop it.
                framer.framer = LineFramer::new(self.max_line_bytes);
                framer.resync = !ends_line;
                self.lost_lines[index(direction)] += lines + u64::from(!ends_line);
                return Vec::new();
            }
        };
        framed
            .into_iter()
            .map(|framed| match framed {
                FramedLine::Line(line) => SplitLine::Line {
                    direction,
                    line,
                    at,
                },
                FramedLine::Oversized { .. } => SplitLine::Oversized { direction },
            })
            .collect()
    }

    /// Lines the transcript says it lost (its `lost` records), per direction, at least.
    pub fn lost_lines(&self) -> [u64; 2] {
        self.lost_lines
    }
}

/// Applies one stream of transcript records (a file being written, a finished file, or
/// the proxy's memory queue when it writes no transcript) through one [`Capture`]:
/// frames each direction's bytes into lines exactly as the proxy's tap would, gives
/// capture the lines in batches, and commits each batch with the mark of the record it
/// ends on, so the store always says how far the transcript is in it. Records that end
/// at or before `replay_through` (the store's mark, when the transcript is applied
/// again) are only replayed: capture's state follows them, nothing is written twice.
pub struct Applier {
    capture: Capture,
    /// The execution id of the transcript: `Some` makes each batch write its mark.
    marked: Option<String>,
    replay_through: u64,
    splitter: LineSplitter,
    batch: Vec<(Direction, Vec<u8>, Timestamp)>,
    /// The end of the last record whose lines are in `batch`.
    batch_end: u64,
    held: bool,
    stats: ApplyStats,
}

fn index(direction: Direction) -> usize {
    match direction {
        Direction::ClientToAgent => 0,
        Direction::AgentToClient => 1,
    }
}

impl Applier {
    /// An applier feeding `capture`. `marked`: the transcript's execution id when its
    /// batches are to be marked in the store; `replay_through`: the store's mark for it
    /// (0 when nothing of it is there); `max_line_bytes`: the framing bound.
    pub fn new(
        capture: Capture,
        marked: Option<String>,
        replay_through: u64,
        max_line_bytes: usize,
    ) -> Applier {
        Applier {
            capture,
            marked,
            replay_through,
            splitter: LineSplitter::new(max_line_bytes),
            batch: Vec::with_capacity(DEFAULT_BATCH_LINES),
            batch_end: 0,
            held: false,
            stats: ApplyStats::default(),
        }
    }

    /// Takes one record, which ends at byte `end` of the transcript (any increasing
    /// position when there is no file). Lines it completes are replayed at once or
    /// queued for the next [`Applier::commit`].
    pub fn push(&mut self, record: &Record<'_>, end: u64) {
        for split in self.splitter.push(record) {
            let (direction, line, at) = match split {
                SplitLine::Line {
                    direction,
                    line,
                    at,
                } => (direction, line, at),
                SplitLine::Oversized { direction } => {
                    self.stats.oversized[index(direction)] += 1;
                    continue;
                }
            };
            self.stats.lines[index(direction)] += 1;
            if end <= self.replay_through {
                self.stats.replayed += 1;
                self.capture
                    .replay_applied(&[(direction, line.as_slice(), at)]);
                continue;
            }
            self.batch.push((direction, line, at));
            self.batch_end = end;
        }
        self.stats.lost_lines = self.splitter.lost_lines();
    }

    /// Lines waiting for [`Applier::commit`].
    pub fn queued_lines(&self) -> usize {
        self.batch.len()
    }

    /// Whether writes are held for the store ([`Applier::retry`] before anything else).
    pub fn is_held(&self) -> bool {
        self.held
    }

    /// Gives capture the queued lines and commits their writes with the mark of the
    /// last record they came from ([`Capture::apply_batch`]). On [`Held`] the lines are
    /// taken (their writes wait in capture): call [`Applier::retry`] until it succeeds
    /// before pushing more, so an outage holds one batch, not the whole stream.
    pub async fn commit(&mut self) -> Result<(), Held> {
        if self.held {
            self.retry().await?;
        }
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        let lines: Vec<(Direction, &[u8], Timestamp)> = batch
            .iter()
            .map(|(direction, line, at)| (*direction, line.as_slice(), *at))
            .collect();
        let count = lines.len() as u64;
        let mark = self.marked.as_ref().map(|execution_id| TranscriptMark {
            execution_id: execution_id.clone(),
            applied_through: self.batch_end,
        });
        let result = self.capture.apply_batch(&lines, mark).await;
        drop(lines);
        // Reuse the allocation for the next batch.
        self.batch = batch;
        self.batch.clear();
        self.stats.held += count;
        self.settled(result)
    }

    /// Commits what the store could not take before.
    pub async fn retry(&mut self) -> Result<(), Held> {
        let result = self.capture.retry_held().await;
        self.settled(result)
    }

    fn settled(&mut self, result: Result<(), Held>) -> Result<(), Held> {
        self.held = result.is_err();
        if !self.held {
            self.stats.applied += std::mem::take(&mut self.stats.held);
        }
        result
    }

    /// What this applier has seen and done so far.
    pub fn stats(&self) -> ApplyStats {
        self.stats
    }

    /// The capture it feeds (its stats and counters).
    pub fn capture(&self) -> &Capture {
        &self.capture
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use fanout_store::Store;
    use fanout_store::testing::TestDb;

    use super::*;
    use crate::capture::CaptureConfig;

    fn data<'a>(direction: Direction, bytes: &'a [u8], micros: i64) -> Record<'a> {
        Record::Data {
            direction,
            at: Timestamp::from_micros(1_780_000_000_000_000 + micros).unwrap(),
            bytes,
        }
    }

    async fn applier(marked: bool, replay_through: u64) -> (Applier, TestDb) {
        let db = TestDb::sqlite();
        let store: Arc<dyn Store> = Arc::new(db.open().await.unwrap());
        let capture = Capture::new(
            store,
            CaptureConfig {
                agent_execution_id: Some("exec-1".into()),
                task_id: Some("task".into()),
                agent_command: None,
            },
        );
        (
            Applier::new(
                capture,
                marked.then(|| "exec-1".to_owned()),
                replay_through,
                1 << 20,
            ),
            db,
        )
    }

    #[tokio::test]
    async fn lines_are_framed_per_direction_across_records_and_at_the_end() {
        let (mut applier, _db) = applier(false, 0).await;
        let c2a = Direction::ClientToAgent;
        let a2c = Direction::AgentToClient;
        applier.push(&data(c2a, b"{\"a\":", 1), 10);
        applier.push(&data(a2c, b"x\ny", 2), 20);
        applier.push(&data(c2a, b"1}\n", 3), 30);
        applier.push(
            &Record::End {
                direction: a2c,
                at: Timestamp::from_micros(1_780_000_000_000_004).unwrap(),
            },
            40,
        );
        let lines: Vec<(Direction, Vec<u8>, i64)> = applier
            .batch
            .iter()
            .map(|(d, l, at)| (*d, l.clone(), at.unix_micros() - 1_780_000_000_000_000))
            .collect();
        assert_eq!(
            lines,
            vec![
                (a2c, b"x".to_vec(), 2),
                (c2a, b"{\"a\":1}".to_vec(), 3),
                (a2c, b"y".to_vec(), 4),
            ]
        );
        assert_eq!(applier.stats().lines, [1, 2]);
        applier.commit().await.unwrap();
        assert_eq!(applier.queued_lines(), 0);
        assert_eq!(applier.capture().stats().frames_seen, 3);
    }

    #[tokio::test]
    async fn lost_bytes_drop_the_line_they_cut_and_nothing_else() {
        let (mut applier, _db) = applier(false, 0).await;
        let d = Direction::AgentToClient;
        let lost = |ends_line| Record::Lost {
            direction: d,
            at: Timestamp::now(),
            bytes: 9,
            lines: 1,
            ends_line,
        };
        applier.push(&data(d, b"ok\nhead-of-", 1), 1);
        applier.push(&lost(false), 2);
        applier.push(&data(d, b"tail\nnext\nsta", 3), 3);
        applier.push(&lost(true), 4);
        applier.push(&data(d, b"fresh\n", 5), 5);
        let lines: Vec<&[u8]> = applier.batch.iter().map(|(_, l, _)| l.as_slice()).collect();
        assert_eq!(lines, vec![&b"ok"[..], b"next", b"fresh"]);
        assert_eq!(applier.stats().lost_lines, [0, 3]);
    }

    #[tokio::test]
    async fn records_up_to_the_mark_are_replayed_and_the_rest_marked() {
        let new_session = br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w"}}
"#;
        let opened = br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}
"#;
        let prompt = br#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}
"#;
        let (mut first, db) = applier(true, 0).await;
        first.push(&data(Direction::ClientToAgent, new_session, 1), 1);
        first.push(&data(Direction::AgentToClient, opened, 2), 2);
        first.commit().await.unwrap();
        let store = db.open().await.unwrap();
        let mark = store.transcript_applied("exec-1").await.unwrap();
        assert_eq!(mark, Some(2));

        // Applied again, from the start, against the mark.
        let store: Arc<dyn Store> = Arc::new(store);
        let capture = Capture::new(
            Arc::clone(&store),
            CaptureConfig {
                agent_execution_id: Some("exec-1".into()),
                task_id: Some("task".into()),
                agent_command: None,
            },
        );
        let mut applier = Applier::new(capture, Some("exec-1".into()), 2, 1 << 20);
        applier.push(&data(Direction::ClientToAgent, new_session, 1), 1);
        applier.push(&data(Direction::AgentToClient, opened, 2), 2);
        applier.push(&data(Direction::ClientToAgent, prompt, 3), 3);
        assert_eq!(applier.stats().replayed, 2);
        applier.commit().await.unwrap();
        assert_eq!(store.transcript_applied("exec-1").await.unwrap(), Some(3));
        let store = db.open().await.unwrap();
        let counts = store.counts().await.unwrap();
        // The replayed lines wrote nothing again; the prompt found its session (known
        // from the replay, so not written again) and wrote its turn.
        assert_eq!((counts.sessions, counts.turns), (1, 1));
        assert_eq!(applier.capture().stats().sessions, 0);
        assert_eq!(applier.capture().stats().frames_seen, 1);
    }
}
