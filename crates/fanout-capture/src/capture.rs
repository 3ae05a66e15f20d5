//! [`Capture`]: the orchestrator half of capture. It turns tracker events into
//! sessions, turns and tool-call messages, then hands subagent snapshots to the
//! [`SubagentWriter`] with the turn open at that moment.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use fanout_acp::{Direction, SubagentTask, ToolFrame, Tracker, TrackerEvent};
use fanout_store::{
    ImportFileRecord, MessageRecord, SessionRecord, Source, Store, StoreError, SubagentRecord,
    Timestamp, TokenCounts, TranscriptMark, TurnRecord, UNKNOWN_EXECUTION, UsageRecord,
    UsageSource, WriteOp,
};
use serde::Serialize;

use crate::counters::{
    DIALECT_ANOMALIES_METRIC, FRAMES_NOT_UNDERSTOOD_METRIC, FRAMES_SEEN_METRIC,
    FRAMES_WITHOUT_TASK_METRIC, STORE_ERRORS_METRIC, WriterCounters,
};
use crate::ids::{message_row_id, session_row_id, turn_row_id};
use crate::writer::{RecordOutcome, SubagentFrame, SubagentWriter};

/// Who is being captured: one agent execution (one proxy run, one transcript).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaptureConfig {
    /// `None` or `""` -> `'unknown'` (and `unknown_execution` on every persisted row).
    pub agent_execution_id: Option<String>,
    /// `None` -> the `cwd` sent in `session/new` (DESIGN 3.2); no task -> not recorded.
    pub task_id: Option<String>,
    /// The agent's command line, stored on every session row of this execution.
    pub agent_command: Option<String>,
}

/// Running totals of one [`Capture`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CaptureStats {
    /// Lines offered to [`Capture::observe`].
    pub frames_seen: u64,
    /// Lines that were not JSON-RPC.
    pub frames_not_understood: u64,
    /// Tool-call frames (subagent or not).
    pub tool_frames: u64,
    /// Frames that would have been recorded but belong to a session with no task id.
    pub frames_without_task: u64,
    /// Distinct session rows written.
    pub sessions: u64,
    /// Distinct turns started.
    pub turns: u64,
    /// Tool-call message rows created (first frame of a tool call).
    pub messages: u64,
    /// Tool-call message upserts that succeeded (one per tool frame).
    pub message_writes: u64,
    /// Distinct subagent rows persisted.
    pub subagent_rows: u64,
    /// Distinct usage-ledger rows (model responses) persisted.
    pub usage_rows: u64,
    /// Failed session, turn and message writes (subagent failures are the writer's `failed`).
    pub store_errors: u64,
    /// Frames a dialect could not place (`fanout_acp::IgnoredReason::is_anomaly`).
    pub dialect_anomalies: u64,
}

#[derive(Debug)]
struct SessionState {
    row_id: String,
    cwd: Option<String>,
    started_at: Timestamp,
    /// The row exists in the store (a failed write is retried on next need).
    row_written: bool,
    /// `row_written` because a replay found it there, not because this capture wrote it.
    replayed: bool,
    open_turn: Option<OpenTurn>,
}

#[derive(Debug, Clone)]
struct OpenTurn {
    id: String,
    request_id: String,
    started_at: Timestamp,
}

/// Which table a write went to, for the `table` label of the store-error metric.
#[derive(Clone, Copy)]
enum Table {
    Sessions,
    Turns,
    Messages,
    Usage,
    ImportFiles,
}

impl Table {
    fn as_str(self) -> &'static str {
        match self {
            Table::Sessions => "task_sessions",
            Table::Turns => "task_session_turns",
            Table::Messages => "task_session_messages",
            Table::Usage => "task_session_usage",
            Table::ImportFiles => "import_files",
        }
    }
}

/// One model response an importer hands to [`Capture::queue_usage`]; the session row,
/// task and turn come from capture's own state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResponseUsage {
    pub response_id: String,
    pub model: Option<String>,
    pub tokens: TokenCounts,
    /// The invocation whose context made the call; `None` = the session's own agent.
    pub subagent_tool_call_id: Option<String>,
    pub source: UsageSource,
}

/// One write queued while lines are observed, with what its outcome moves.
#[derive(Debug)]
enum Pending {
    /// `creates`: this write makes the row exist (`row_written` on success); otherwise
    /// it only moves `updated_at` (turn activity).
    Session {
        acp_session_id: String,
        record: SessionRecord,
        creates: bool,
    },
    Turn {
        record: TurnRecord,
        /// A turn start (counted in `turns` on success).
        starts: bool,
    },
    Message {
        record: MessageRecord,
        tool_call_id: String,
        is_new: bool,
        /// Frames folded into this one write (see [`Capture::queue_message`]).
        frames: u64,
    },
    /// Already through the writer's gate and value rules ([`SubagentWriter::prepare`]).
    Subagent {
        record: SubagentRecord,
    },
    Usage {
        record: UsageRecord,
    },
    /// An importer's state of one source file: written only with the rows before it.
    ImportFile {
        record: ImportFileRecord,
    },
}

impl Pending {
    fn op(&self) -> WriteOp<'_> {
        match self {
            Pending::Session { record, .. } => WriteOp::Session(record),
            Pending::Turn { record, .. } => WriteOp::Turn(record),
            Pending::Message { record, .. } => WriteOp::Message(record),
            Pending::Subagent { record } => WriteOp::Subagent(record),
            Pending::Usage { record } => WriteOp::Usage(record),
            Pending::ImportFile { record } => WriteOp::ImportFile(record),
        }
    }
}

/// Writes the store could not take now ([`StoreError::is_transient`]): they are kept, in
/// order, by the [`Capture`] that made them, until [`Capture::retry_held`] commits them.
#[derive(Debug, thiserror::Error)]
#[error("{writes} write(s) held until the store is back: {error}")]
pub struct Held {
    /// The store's answer to the last attempt.
    pub error: StoreError,
    /// Writes (and the transcript mark, if any) still waiting.
    pub writes: usize,
}

/// How queued writes reach the store.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flush {
    /// One statement per write, each its own commit ([`Capture::observe`]).
    EachRecord,
    /// One [`Store::write_batch`] (group commit), record by record if it fails.
    Group,
}

/// Capture for one agent execution. Feed it every line in both directions, in order.
///
/// Writes are queued while a line (or a batch of lines) is interpreted and all reach
/// the store before [`Capture::observe`] / [`Capture::observe_batch`] returns: nothing
/// is ever held across calls, so nothing acknowledged can be lost to idle time.
pub struct Capture {
    store: Arc<dyn Store>,
    /// As configured (`None` when empty): the writer counts `unknown_execution` from it.
    execution_id: Option<String>,
    task_id: Option<String>,
    agent_command: Option<String>,
    tracker: Tracker,
    writer: SubagentWriter,
    /// By ACP session id.
    sessions: HashMap<String, SessionState>,
    /// How many of `sessions` have `row_written`, kept in step with every change of the
    /// flag so `stats.sessions` is not recounted from the whole map on each write.
    rows_written: u64,
    /// (session row id, tool_call_id) of subagent rows this capture persisted.
    subagent_rows: HashSet<(String, String)>,
    /// (session row id, response id) of usage rows this capture persisted.
    usage_rows: HashSet<(String, String)>,
    /// The provenance of the subagent rows this capture writes.
    source: Source,
    stats: CaptureStats,
    /// Writes of the line(s) being observed, in order; empty between calls, except for
    /// writes held by [`Capture::apply_batch`] while the store is away.
    pending: Vec<Pending>,
    /// The transcript mark to commit with `pending` ([`Capture::apply_batch`]).
    pending_mark: Option<TranscriptMark>,
    /// Interpreting lines that are already in the store ([`Capture::replay_applied`]):
    /// nothing is queued for writing and no counter moves.
    replaying: bool,
    /// The index in `pending` of the queued write of each message row, for folding.
    queued_messages: HashMap<String, usize>,
    /// The per-line recorder handles, looked up once.
    frames_seen_metric: metrics::Counter,
    not_understood_metric: metrics::Counter,
    without_task_metric: metrics::Counter,
}

impl Capture {
    /// A capture writing to `store` for the execution `config` describes.
    pub fn new(store: Arc<dyn Store>, config: CaptureConfig) -> Capture {
        let non_empty = |v: Option<String>| v.filter(|s| !s.is_empty());
        Capture {
            writer: SubagentWriter::new(),
            store,
            execution_id: non_empty(config.agent_execution_id),
            task_id: non_empty(config.task_id),
            agent_command: non_empty(config.agent_command),
            tracker: Tracker::new(),
            sessions: HashMap::new(),
            rows_written: 0,
            subagent_rows: HashSet::new(),
            usage_rows: HashSet::new(),
            source: Source::Live,
            stats: CaptureStats::default(),
            pending: Vec::new(),
            pending_mark: None,
            replaying: false,
            queued_messages: HashMap::new(),
            frames_seen_metric: metrics::counter!(FRAMES_SEEN_METRIC),
            not_understood_metric: metrics::counter!(FRAMES_NOT_UNDERSTOOD_METRIC),
            without_task_metric: metrics::counter!(FRAMES_WITHOUT_TASK_METRIC),
        }
    }

    /// Observes one complete line (no trailing newline) seen in `direction` at
    /// `observed_at`. Never fails and never panics: store errors are WARN + counters.
    /// Its writes are committed (one statement each) before it returns.
    pub async fn observe(&mut self, direction: Direction, line: &[u8], observed_at: Timestamp) {
        self.interpret(direction, line, observed_at);
        self.flush(Flush::EachRecord).await;
    }

    /// Observes `lines` in order, exactly as that many [`Capture::observe`] calls
    /// would, but commits their writes together ([`Store::write_batch`]: one writer
    /// connection, one transaction) before it returns. Meant for lines that are
    /// already queued (the proxy drains its queue; import reads chunks). If the group
    /// commit fails, nothing of it was written and every write is retried on its own,
    /// so each failure is attributed to its own frame and table (AC-26, AC-27).
    pub async fn observe_batch(&mut self, lines: &[(Direction, &[u8], Timestamp)]) {
        for (direction, line, observed_at) in lines {
            self.interpret(*direction, line, *observed_at);
        }
        self.flush(Flush::Group).await;
    }

    /// Observes `lines` as [`Capture::observe_batch`] does and commits their writes in
    /// one transaction together with `mark` (how far a transcript is applied), so the
    /// mark says exactly what is in the store. When the store cannot take them now
    /// ([`StoreError::is_transient`]: down, locked, read-only, full) nothing is lost and
    /// nothing is counted as failed: the writes and the mark stay held, in order, and
    /// this returns [`Held`]; [`Capture::retry_held`] commits them once the store is
    /// back. Lines given while writes are held are interpreted and their writes queue
    /// behind the held ones. A write the store refuses for good is counted, as
    /// observe_batch does, and the rest still goes in. A batch that writes nothing
    /// writes no mark either: the lines after a mark are the ones without writes, and
    /// applying them again writes nothing.
    pub async fn apply_batch(
        &mut self,
        lines: &[(Direction, &[u8], Timestamp)],
        mark: Option<TranscriptMark>,
    ) -> Result<(), Held> {
        for (direction, line, observed_at) in lines {
            self.interpret(*direction, line, *observed_at);
        }
        if !self.pending.is_empty()
            && let Some(mark) = mark
        {
            self.pending_mark = Some(mark);
        }
        self.flush_holding().await
    }

    /// Commits the writes [`Capture::apply_batch`] held, in order.
    pub async fn retry_held(&mut self) -> Result<(), Held> {
        self.flush_holding().await
    }

    /// Writes (and the mark) waiting for the store.
    pub fn held_writes(&self) -> usize {
        self.pending.len() + usize::from(self.pending_mark.is_some())
    }

    /// Interprets lines whose writes are already in the store (the applied part of a
    /// transcript being applied again, up to its mark), so the lines after them are
    /// interpreted exactly as when they were first observed: sessions, turns, tool
    /// calls and the dialect are tracked, sessions count as written, but nothing is
    /// written and no counter or stat moves.
    pub fn replay_applied(&mut self, lines: &[(Direction, &[u8], Timestamp)]) {
        let stats = self.stats;
        self.replaying = true;
        for (direction, line, observed_at) in lines {
            self.interpret(*direction, line, *observed_at);
        }
        self.replaying = false;
        self.stats = stats;
        self.queued_messages.clear();
        for write in std::mem::take(&mut self.pending) {
            if let Pending::Session {
                acp_session_id,
                creates: true,
                ..
            } = write
                && let Some(state) = self.sessions.get_mut(&acp_session_id)
                && !state.row_written
            {
                // In the store, but not written by this capture: not in `rows_written`.
                state.row_written = true;
                state.replayed = true;
            }
        }
    }

    /// This capture's subagent-writer counters (AC-26).
    pub fn counters(&self) -> Arc<WriterCounters> {
        self.writer.counters()
    }

    /// Its running totals.
    pub fn stats(&self) -> CaptureStats {
        self.stats
    }

    fn interpret(&mut self, direction: Direction, line: &[u8], observed_at: Timestamp) {
        self.stats.frames_seen += 1;
        if !self.replaying {
            self.frames_seen_metric.increment(1);
        }
        for event in self.tracker.observe_bytes(direction, line) {
            self.on_event(event, observed_at);
        }
    }

    fn on_event(&mut self, event: TrackerEvent, at: Timestamp) {
        match event {
            TrackerEvent::SessionOpened {
                acp_session_id,
                cwd,
                ..
            } => self.queue_open_session(&acp_session_id, cwd, at),
            TrackerEvent::PromptStarted {
                acp_session_id,
                request_id,
            } => self.queue_start_turn(&acp_session_id, &request_id, at),
            TrackerEvent::PromptEnded {
                acp_session_id,
                request_id,
                stop_reason,
                error,
            } => {
                let stop_reason = stop_reason.or_else(|| error.map(|e| format!("error: {e}")));
                self.queue_end_turn(&acp_session_id, &request_id, stop_reason, at);
            }
            TrackerEvent::Tool(frame) => self.queue_tool_frame(&frame, at),
            TrackerEvent::NotUnderstood { .. } => {
                self.stats.frames_not_understood += 1;
                if !self.replaying {
                    self.not_understood_metric.increment(1);
                }
            }
            TrackerEvent::Ignored { reason, .. } if reason.is_anomaly() => {
                self.stats.dialect_anomalies += 1;
                if !self.replaying {
                    metrics::counter!(DIALECT_ANOMALIES_METRIC, "reason" => reason.as_str())
                        .increment(1);
                }
            }
            TrackerEvent::SessionUpdate { .. } | TrackerEvent::Ignored { .. } => {}
        }
    }

    /// The provenance of every subagent row written from now on: [`Source::Import`] for
    /// the native-history importers ([`Source::Live`] by default).
    pub(crate) fn set_source(&mut self, source: Source) {
        self.source = source;
    }

    /// Writes queued by the `queue_*` calls and not yet committed (Claude import).
    pub(crate) fn queued_writes(&self) -> usize {
        self.pending.len()
    }

    /// Drops the writes queued since `mark` (a [`Capture::queued_writes`] count): an
    /// importer reading lines for their context only keeps the state they moved and
    /// writes nothing of them.
    pub(crate) fn discard_queued_from(&mut self, mark: usize) {
        if mark < self.pending.len() {
            self.pending.truncate(mark);
            self.queued_messages.retain(|_, index| *index < mark);
        }
    }

    /// Queues a message write, or folds it into the write already queued for that row
    /// when that keeps the queued write's turn (so every foreign key still holds where
    /// it stands). The message upsert keeps the first non-NULL turn and `created_at`,
    /// lets a non-NULL type and content replace, and takes metadata and `updated_at` from
    /// the latest write, and no other queued write touches the row: the folded record
    /// leaves exactly the row the upserts in sequence would have left, in one statement.
    fn queue_message(&mut self, write: Pending) {
        let Pending::Message {
            record: newer,
            is_new,
            ..
        } = &write
        else {
            return;
        };
        if let Some(&index) = self.queued_messages.get(&newer.id)
            && let Some(Pending::Message {
                record: queued,
                is_new: queued_new,
                frames,
                ..
            }) = self.pending.get_mut(index)
            && queued.id == newer.id
            && (queued.turn_id.is_some() || newer.turn_id.is_none())
        {
            queued.message_type = newer.message_type.clone().or(queued.message_type.take());
            queued.content = newer.content.clone().or(queued.content.take());
            queued.metadata.clone_from(&newer.metadata);
            queued.updated_at = newer.updated_at;
            *queued_new |= *is_new;
            *frames += 1;
            return;
        }
        self.queued_messages
            .insert(newer.id.clone(), self.pending.len());
        self.pending.push(write);
    }

    /// Commits the queued writes together, exactly as [`Capture::observe_batch`] does
    /// for the lines it interpreted.
    pub(crate) async fn commit_queued(&mut self) {
        self.flush(Flush::Group).await;
    }

    /// Commits the queued writes of several captures on one store as one
    /// [`Store::write_batch`] (one transaction): an import's small units share a commit
    /// instead of paying one each. If that batch fails, nothing of it was written, and
    /// each capture commits its own writes as [`Capture::commit_queued`] does, so a
    /// failure is attributed to its own unit.
    pub(crate) async fn commit_queued_together(captures: &mut [&mut Capture]) {
        if let [first, _, ..] = &*captures {
            let store = Arc::clone(&first.store);
            // `queued_messages` indexes `pending`: it stays valid while it is put back.
            let pending: Vec<Vec<Pending>> = captures
                .iter_mut()
                .map(|c| std::mem::take(&mut c.pending))
                .collect();
            let ops: Vec<WriteOp<'_>> = pending.iter().flatten().map(Pending::op).collect();
            let result = store.write_batch(&ops).await;
            drop(ops);
            match result {
                Ok(()) => {
                    for (capture, writes) in captures.iter_mut().zip(pending) {
                        capture.queued_messages.clear();
                        for write in &writes {
                            capture.settle(write, None);
                        }
                    }
                    return;
                }
                Err(error) => {
                    tracing::debug!(
                        units = captures.len(),
                        %error,
                        "joint commit failed; committing unit by unit"
                    );
                    for (capture, writes) in captures.iter_mut().zip(pending) {
                        capture.pending = writes;
                    }
                }
            }
        }
        for capture in captures {
            capture.commit_queued().await;
        }
    }

    /// A session was opened (or first seen): remember its cwd and queue its row.
    pub(crate) fn queue_open_session(
        &mut self,
        acp_session_id: &str,
        cwd: Option<String>,
        at: Timestamp,
    ) {
        self.note_session(acp_session_id, at);
        if let Some(state) = self.sessions.get_mut(acp_session_id) {
            if cwd.is_some() {
                state.cwd = cwd;
            }
            // Re-opening (session/load) is news about the row: rewrite it.
            if state.row_written {
                state.row_written = false;
                // Never below zero: it was counted when the flag was set (unless a
                // replay set it).
                if !std::mem::take(&mut state.replayed) {
                    self.rows_written = self.rows_written.saturating_sub(1);
                }
            }
        }
        self.ensure_session_row(acp_session_id, at, true);
    }

    /// A prompt started: an open turn for its session.
    pub(crate) fn queue_start_turn(
        &mut self,
        acp_session_id: &str,
        request_id: &str,
        at: Timestamp,
    ) {
        let Some(task_id) = self.ensure_session_row(acp_session_id, at, false) else {
            self.count_without_task();
            return;
        };
        let Some(state) = self.sessions.get_mut(acp_session_id) else {
            return;
        };
        let turn = OpenTurn {
            id: turn_row_id(&state.row_id, request_id),
            request_id: request_id.to_owned(),
            started_at: at,
        };
        state.open_turn = Some(turn.clone());
        let record = TurnRecord {
            id: turn.id,
            task_session_id: state.row_id.clone(),
            task_id,
            started_at: at,
            completed_at: None,
            stop_reason: None,
            updated_at: at,
        };
        self.pending.push(Pending::Turn {
            record,
            starts: true,
        });
        self.touch_session(acp_session_id, at);
    }

    /// A prompt ended: its turn is completed (write-once) and is no longer open.
    pub(crate) fn queue_end_turn(
        &mut self,
        acp_session_id: &str,
        request_id: &str,
        stop_reason: Option<String>,
        at: Timestamp,
    ) {
        let Some(task_id) = self.ensure_session_row(acp_session_id, at, false) else {
            return;
        };
        let Some(state) = self.sessions.get_mut(acp_session_id) else {
            return;
        };
        let id = turn_row_id(&state.row_id, request_id);
        let started_at = match &state.open_turn {
            Some(open) if open.request_id == request_id => {
                let started_at = open.started_at;
                state.open_turn = None;
                started_at
            }
            // Unknown start: the row keeps whatever start it has (started_at is write-once).
            _ => at,
        };
        let record = TurnRecord {
            id,
            task_session_id: state.row_id.clone(),
            task_id,
            started_at,
            completed_at: Some(at),
            stop_reason,
            updated_at: at,
        };
        self.pending.push(Pending::Turn {
            record,
            starts: false,
        });
        self.touch_session(acp_session_id, at);
    }

    /// The tool-call message first, then the subagent writer; neither failure stops the
    /// other (each is its own write, settled on its own).
    pub(crate) fn queue_tool_frame(&mut self, frame: &ToolFrame, at: Timestamp) {
        self.stats.tool_frames += 1;
        let task_id = if frame.acp_session_id.is_empty() {
            None
        } else {
            self.ensure_session_row(&frame.acp_session_id, at, false)
        };
        if self.replaying {
            // The tracker has taken the frame and the session is known: that is all a
            // replay needs (the message and subagent writes are in the store).
            return;
        }
        let Some(task_id) = task_id else {
            if !frame.acp_session_id.is_empty() {
                self.count_without_task();
            }
            // Still offered to the writer, whose identity gate counts it (AC-2).
            if let Some(task) = &frame.subagent {
                let session_id = self
                    .sessions
                    .get(&frame.acp_session_id)
                    .map_or("", |s| s.row_id.as_str());
                let prepared = self.prepare_subagent(frame, task, session_id, "", None, at);
                if let Some(record) = prepared {
                    self.pending.push(Pending::Subagent { record });
                }
            }
            return;
        };
        let Some(state) = self.sessions.get(&frame.acp_session_id) else {
            return;
        };
        // Borrowed from the session state: the records below are the only copies.
        let session_id = state.row_id.as_str();
        let turn_id = state.open_turn.as_ref().map(|t| t.id.as_str());
        // Prepared before the message is built so the message can take `task_id`;
        // still queued after it (message first).
        let subagent = frame
            .subagent
            .as_ref()
            .and_then(|task| self.prepare_subagent(frame, task, session_id, &task_id, turn_id, at));
        if !frame.tool_call_id.is_empty() {
            let write = message_write(frame, session_id, task_id, turn_id, at);
            self.queue_message(write);
        }
        if let Some(record) = subagent {
            self.pending.push(Pending::Subagent { record });
        }
    }

    /// One model response of the session, in the turn open on it now (never creating
    /// one); nothing when the session has no task.
    pub(crate) fn queue_usage(
        &mut self,
        acp_session_id: &str,
        usage: ResponseUsage,
        at: Timestamp,
    ) {
        let Some(task_id) = self.ensure_session_row(acp_session_id, at, false) else {
            self.count_without_task();
            return;
        };
        let Some(state) = self.sessions.get(acp_session_id) else {
            return;
        };
        let record = UsageRecord {
            task_session_id: state.row_id.clone(),
            task_id,
            turn_id: state.open_turn.as_ref().map(|t| t.id.clone()),
            subagent_tool_call_id: usage.subagent_tool_call_id,
            agent_execution_id: Some(
                self.execution_id
                    .clone()
                    .unwrap_or_else(|| UNKNOWN_EXECUTION.to_owned()),
            ),
            response_id: usage.response_id,
            model: usage.model,
            tokens: usage.tokens,
            source: usage.source,
            observed_at: at,
        };
        self.pending.push(Pending::Usage { record });
    }

    /// An importer's state of one source file, committed with the writes queued before
    /// it (never alone after a failed group: see [`Capture::flush`]).
    pub(crate) fn queue_import_file(&mut self, record: ImportFileRecord) {
        self.pending.push(Pending::ImportFile { record });
    }

    /// The writer's first half for one subagent frame, on borrowed values (no copy of
    /// the payload per frame): the record to queue, or `None` when the gate drops it.
    fn prepare_subagent(
        &self,
        frame: &ToolFrame,
        payload: &SubagentTask,
        task_session_id: &str,
        task_id: &str,
        turn_id: Option<&str>,
        at: Timestamp,
    ) -> Option<SubagentRecord> {
        self.writer.prepare(&SubagentFrame {
            task_session_id,
            task_id,
            turn_id,
            tool_call_id: &frame.tool_call_id,
            parent_tool_call_id: frame.parent_tool_call_id.as_deref(),
            agent_execution_id: self.execution_id.as_deref(),
            tool_status: frame.tool_status.as_deref(),
            payload,
            observed_at: at,
            source: self.source,
        })
    }

    /// Sends every queued write to the store and settles its outcome.
    async fn flush(&mut self, how: Flush) {
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        self.queued_messages.clear();
        if how == Flush::Group && pending.len() > 1 {
            let ops: Vec<WriteOp<'_>> = pending.iter().map(Pending::op).collect();
            match self.store.write_batch(&ops).await {
                Ok(()) => {
                    for write in &pending {
                        self.settle(write, None);
                    }
                    return;
                }
                // Nothing of the batch was written: retry each write on its own, so a
                // failure is attributed to its own frame and the others still land.
                Err(error) => tracing::debug!(
                    writes = pending.len(),
                    error = %error,
                    "group commit failed; writing record by record"
                ),
            }
        }
        // An import file's offset is only recorded when every write before it landed:
        // otherwise the next import would skip what this one failed to write.
        let mut any_failed = false;
        for write in &pending {
            if any_failed && matches!(write, Pending::ImportFile { .. }) {
                continue;
            }
            let result = self.write_one(write).await;
            any_failed |= result.is_err();
            self.settle(write, result.as_ref().err());
        }
    }

    /// [`Capture::apply_batch`]'s commit: the queued writes and the mark as one batch;
    /// on a transient failure all of them stay queued, on another one they are written
    /// one by one (a transient failure on the way holds that write and the rest).
    async fn flush_holding(&mut self) -> Result<(), Held> {
        if self.pending.is_empty() && self.pending_mark.is_none() {
            return Ok(());
        }
        let result = {
            let mut ops: Vec<WriteOp<'_>> = self.pending.iter().map(Pending::op).collect();
            ops.extend(self.pending_mark.as_ref().map(WriteOp::TranscriptMark));
            self.store.write_batch(&ops).await
        };
        let error = match result {
            Ok(()) => {
                self.queued_messages.clear();
                for write in std::mem::take(&mut self.pending) {
                    self.settle(&write, None);
                }
                self.pending_mark = None;
                return Ok(());
            }
            Err(error) if error.is_transient() => return Err(self.held(error)),
            Err(error) => error,
        };
        tracing::debug!(writes = self.pending.len(), %error, "group commit failed; writing record by record");
        self.queued_messages.clear();
        let mut writes = std::mem::take(&mut self.pending).into_iter();
        while let Some(write) = writes.next() {
            match self.write_one(&write).await {
                Err(error) if error.is_transient() => {
                    self.pending = std::iter::once(write).chain(writes).collect();
                    return Err(self.held(error));
                }
                result => self.settle(&write, result.as_ref().err()),
            }
        }
        if let Some(mark) = self.pending_mark.take() {
            match self
                .store
                .write_batch(&[WriteOp::TranscriptMark(&mark)])
                .await
            {
                Ok(()) => {}
                Err(error) if error.is_transient() => {
                    self.pending_mark = Some(mark);
                    return Err(self.held(error));
                }
                // The writes it covers are settled; only the mark is missing, so applying
                // the transcript again rewrites them (merges, the same rows).
                Err(error) => tracing::warn!(
                    execution_id = %mark.execution_id,
                    %error,
                    "cannot record how far the transcript is applied"
                ),
            }
        }
        Ok(())
    }

    /// One queued write on its own (its own statement and commit).
    async fn write_one(&self, write: &Pending) -> Result<(), StoreError> {
        match write {
            Pending::Session { record, .. } => self.store.upsert_session(record).await,
            Pending::Turn { record, .. } => self.store.upsert_turn(record).await,
            Pending::Message { record, .. } => self.store.upsert_message(record).await,
            Pending::Subagent { record } => self.store.upsert_subagent(record).await,
            Pending::Usage { record } => self.store.upsert_usage(record).await,
            Pending::ImportFile { record } => self.store.upsert_import_file(record).await,
        }
    }

    fn held(&self, error: StoreError) -> Held {
        Held {
            error,
            writes: self.held_writes(),
        }
    }

    /// What one write's outcome moves: stats, session state, writer counters, WARNs.
    fn settle(&mut self, write: &Pending, error: Option<&StoreError>) {
        match (write, error) {
            (
                Pending::Session {
                    acp_session_id,
                    creates,
                    ..
                },
                None,
            ) => {
                if *creates && let Some(state) = self.sessions.get_mut(acp_session_id) {
                    if !state.row_written {
                        state.row_written = true;
                        self.rows_written += 1;
                    }
                    self.stats.sessions = self.rows_written;
                }
            }
            (Pending::Session { record, .. }, Some(error)) => {
                self.store_error(Table::Sessions, &record.id, error, "");
            }
            (Pending::Turn { starts, .. }, None) => {
                if *starts {
                    self.stats.turns += 1;
                }
            }
            (Pending::Turn { record, .. }, Some(error)) => {
                self.store_error(Table::Turns, &record.task_session_id, error, "");
            }
            (Pending::Message { is_new, frames, .. }, None) => {
                self.stats.message_writes += frames;
                if *is_new {
                    self.stats.messages += 1;
                }
            }
            (
                Pending::Message {
                    record,
                    tool_call_id,
                    ..
                },
                Some(error),
            ) => self.store_error(
                Table::Messages,
                &record.task_session_id,
                error,
                tool_call_id,
            ),
            (Pending::Usage { record }, None) => {
                if self
                    .usage_rows
                    .insert((record.task_session_id.clone(), record.response_id.clone()))
                {
                    self.stats.usage_rows += 1;
                }
            }
            (Pending::Usage { record }, Some(error)) => self.store_error(
                Table::Usage,
                &record.task_session_id,
                error,
                &record.response_id,
            ),
            (Pending::ImportFile { .. }, None) => {}
            (Pending::ImportFile { record }, Some(error)) => {
                self.store_error(Table::ImportFiles, &record.path, error, "");
            }
            (Pending::Subagent { record }, error) => {
                let outcome = self.writer.settle(record, error);
                if outcome == RecordOutcome::Persisted
                    && self
                        .subagent_rows
                        .insert((record.task_session_id.clone(), record.tool_call_id.clone()))
                {
                    self.stats.subagent_rows += 1;
                }
            }
        }
    }

    /// Creates the session's state on first sight. Looked up before inserting: this runs
    /// for every frame, and the key is only allocated for a new session.
    fn note_session(&mut self, acp_session_id: &str, at: Timestamp) {
        if self.sessions.contains_key(acp_session_id) {
            return;
        }
        let execution = self.execution_id.as_deref().unwrap_or(UNKNOWN_EXECUTION);
        self.sessions.insert(
            acp_session_id.to_owned(),
            SessionState {
                row_id: session_row_id(execution, acp_session_id),
                cwd: None,
                started_at: at,
                row_written: false,
                replayed: false,
                open_turn: None,
            },
        );
    }

    /// The session's task id, queueing its row first if it is not in the store yet
    /// (a session first seen through its traffic gets its row on first need, so every
    /// foreign key holds). `None`: no task, so nothing of this session is recorded.
    /// `rewrite`: write the row even if it exists or is already queued (re-open).
    fn ensure_session_row(
        &mut self,
        acp_session_id: &str,
        at: Timestamp,
        rewrite: bool,
    ) -> Option<String> {
        self.note_session(acp_session_id, at);
        let state = self.sessions.get(acp_session_id)?;
        let task_id = self.task_id.as_ref().or(state.cwd.as_ref())?.clone();
        if !state.row_written && (rewrite || !self.session_queued(&state.row_id)) {
            let record = self.session_record(acp_session_id, &task_id, at)?;
            self.queue_session(acp_session_id, record, true);
        }
        Some(task_id)
    }

    /// Moves the session's `updated_at` (turn activity).
    fn touch_session(&mut self, acp_session_id: &str, at: Timestamp) {
        let task_id = self.task_id.clone().or_else(|| {
            self.sessions
                .get(acp_session_id)
                .and_then(|s| s.cwd.clone())
        });
        let Some(record) = task_id.and_then(|task| self.session_record(acp_session_id, &task, at))
        else {
            return;
        };
        self.queue_session(acp_session_id, record, false);
    }

    fn session_queued(&self, row_id: &str) -> bool {
        self.pending
            .iter()
            .any(|w| matches!(w, Pending::Session { record, .. } if record.id == row_id))
    }

    /// Queues a session upsert, or folds it into the one already queued for that row
    /// (redundant writes avoided): the session upsert keeps `task_id` and `started_at`
    /// of the first insert, lets a non-NULL value replace, takes `updated_at` from the
    /// latest write and `agent_execution_id` from the first non-NULL one. Folding the
    /// later record into the earlier one by those same rules leaves exactly the row
    /// the two upserts in sequence would have left, one statement earlier.
    fn queue_session(&mut self, acp_session_id: &str, record: SessionRecord, creates: bool) {
        for write in &mut self.pending {
            if let Pending::Session {
                record: queued,
                creates: queued_creates,
                ..
            } = write
                && queued.id == record.id
            {
                let newer = record;
                queued.acp_session_id = newer.acp_session_id.or(queued.acp_session_id.take());
                queued.agent_execution_id = queued
                    .agent_execution_id
                    .take()
                    .or(newer.agent_execution_id);
                queued.agent_command = newer.agent_command.or(queued.agent_command.take());
                queued.cwd = newer.cwd.or(queued.cwd.take());
                queued.completed_at = newer.completed_at.or(queued.completed_at);
                queued.updated_at = newer.updated_at;
                *queued_creates |= creates;
                return;
            }
        }
        self.pending.push(Pending::Session {
            acp_session_id: acp_session_id.to_owned(),
            record,
            creates,
        });
    }

    fn session_record(
        &self,
        acp_session_id: &str,
        task_id: &str,
        at: Timestamp,
    ) -> Option<SessionRecord> {
        let state = self.sessions.get(acp_session_id)?;
        Some(SessionRecord {
            id: state.row_id.clone(),
            task_id: task_id.to_owned(),
            acp_session_id: Some(acp_session_id.to_owned()),
            agent_execution_id: Some(
                self.execution_id
                    .clone()
                    .unwrap_or_else(|| UNKNOWN_EXECUTION.to_owned()),
            ),
            agent_command: self.agent_command.clone(),
            cwd: state.cwd.clone(),
            started_at: state.started_at,
            completed_at: None,
            updated_at: at,
        })
    }

    fn count_without_task(&mut self) {
        self.stats.frames_without_task += 1;
        if !self.replaying {
            self.without_task_metric.increment(1);
        }
    }

    fn store_error(
        &mut self,
        table: Table,
        session_id: &str,
        error: &StoreError,
        tool_call_id: &str,
    ) {
        self.stats.store_errors += 1;
        metrics::counter!(STORE_ERRORS_METRIC, "table" => table.as_str()).increment(1);
        tracing::warn!(
            table = table.as_str(),
            session_id = %session_id,
            tool_call_id = %tool_call_id,
            error = %error,
            "capture write failed"
        );
    }
}

/// The tool-call message write of one frame (its first frame creates the row).
fn message_write(
    frame: &ToolFrame,
    session_id: &str,
    task_id: String,
    turn_id: Option<&str>,
    at: Timestamp,
) -> Pending {
    let metadata =
        serde_json::to_string(&frame.message_metadata()).unwrap_or_else(|_| "{}".to_owned());
    let record = MessageRecord {
        id: message_row_id(session_id, &frame.tool_call_id),
        task_session_id: session_id.to_owned(),
        task_id: Some(task_id),
        turn_id: turn_id.map(str::to_owned),
        author_type: Some("agent".to_owned()),
        message_type: Some("tool_call".to_owned()),
        content: frame.title.clone(),
        metadata,
        created_at: at,
        updated_at: at,
    };
    Pending::Message {
        record,
        tool_call_id: frame.tool_call_id.clone(),
        is_new: frame.is_new,
        frames: 1,
    }
}
