//! Capture-level behaviour (DESIGN 3.2, 4.2): turns, identities, counters and failures,
//! on SQLite and PostgreSQL.

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use common::{as_store, assert_invariant, at, count, open};
use fanout_acp::Direction;
use fanout_capture::{
    Capture, CaptureConfig, CounterSnapshot, message_row_id, session_row_id, turn_row_id,
};
use fanout_store::testing::{LogCapture, TestDb};
use fanout_store::{
    ImportFileRecord, MessageRecord, SessionRecord, SqlStore, Store, StoreError, SubagentRecord,
    SubagentRow, TurnRecord, UsageRecord, WriteOp, both_engines,
};

const A2C: Direction = Direction::AgentToClient;
const C2A: Direction = Direction::ClientToAgent;
const EXEC: &str = "exec-1";
const ACP: &str = "s1";

fn config() -> CaptureConfig {
    CaptureConfig {
        agent_execution_id: Some(EXEC.into()),
        task_id: None,
        agent_command: Some("agent --acp".into()),
    }
}

fn session_new() -> [(Direction, String); 2] {
    [
        (C2A, r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/proj","mcpServers":[]}}"#.into()),
        (A2C, format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"sessionId":"{ACP}"}}}}"#)),
    ]
}

fn prompt(id: u32) -> (Direction, String) {
    (
        C2A,
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"session/prompt","params":{{"sessionId":"{ACP}","prompt":[]}}}}"#
        ),
    )
}

fn prompt_end(id: u32) -> (Direction, String) {
    (
        A2C,
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"stopReason":"end_turn"}}}}"#),
    )
}

fn update(session: &str, update: &str) -> (Direction, String) {
    (
        A2C,
        format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{update}}}}}"#
        ),
    )
}

/// A session, then one prompt turn holding these `session/update`s on it.
fn one_turn(updates: &[&str]) -> Vec<(Direction, String)> {
    let mut lines = session_new().to_vec();
    lines.push(prompt(2));
    lines.extend(updates.iter().map(|body| update(ACP, body)));
    lines.push(prompt_end(2));
    lines
}

/// A Claude `Agent` launch.
fn launch(session: &str, tool_call_id: &str) -> (Direction, String) {
    update(
        session,
        &format!(
            r#"{{"sessionUpdate":"tool_call","toolCallId":"{tool_call_id}","title":"Task","kind":"think","status":"pending","rawInput":{{"description":"review","prompt":"p","subagent_type":"reviewer"}},"_meta":{{"claudeCode":{{"toolName":"Agent"}}}}}}"#
        ),
    )
}

/// A Claude result with the given metrics (10 ms), terminal.
fn result(tool_call_id: &str, tokens: i64, tool_uses: i64) -> (Direction, String) {
    result_with_duration(tool_call_id, tokens, 10, tool_uses)
}

fn result_with_duration(
    tool_call_id: &str,
    tokens: i64,
    duration_ms: i64,
    tool_uses: i64,
) -> (Direction, String) {
    update(
        ACP,
        &format!(
            r#"{{"sessionUpdate":"tool_call_update","toolCallId":"{tool_call_id}","status":"completed","_meta":{{"claudeCode":{{"toolName":"Agent","toolResponse":{{"status":"completed","agentId":"a1","totalTokens":{tokens},"totalDurationMs":{duration_ms},"totalToolUseCount":{tool_uses}}}}}}}}}"#
        ),
    )
}

async fn feed(capture: &mut Capture, lines: &[(Direction, String)]) {
    for (i, (direction, line)) in lines.iter().enumerate() {
        let observed = at("2026-08-10T09:00:00Z").plus_micros(i as i64 * 1_000);
        capture.observe(*direction, line.as_bytes(), observed).await;
    }
}

/// [`feed`], but every line in one [`Capture::observe_batch`] (one group commit).
async fn feed_batch(capture: &mut Capture, lines: &[(Direction, String)]) {
    let batch: Vec<(Direction, &[u8], fanout_store::Timestamp)> = lines
        .iter()
        .enumerate()
        .map(|(i, (direction, line))| {
            let observed = at("2026-08-10T09:00:00Z").plus_micros(i as i64 * 1_000);
            (*direction, line.as_bytes(), observed)
        })
        .collect();
    capture.observe_batch(&batch).await;
}

fn session_id() -> String {
    session_row_id(EXEC, ACP)
}

async fn only_row(store: &SqlStore) -> SubagentRow {
    let rows = store
        .subagents_by_session(&session_id())
        .await
        .expect("read");
    assert_eq!(rows.len(), 1, "{rows:#?}");
    rows.into_iter().next().expect("one row")
}

fn counters(capture: &Capture) -> CounterSnapshot {
    let snapshot = capture.counters().snapshot();
    assert_invariant(&snapshot);
    snapshot
}

async fn frame_outside_any_prompt_records_turn_null(db: TestDb) {
    let store = open(&db).await;
    let mut capture = Capture::new(as_store(&store), config());
    let mut lines = session_new().to_vec();
    lines.push(launch(ACP, "t1"));
    feed(&mut capture, &lines).await;
    let row = only_row(&store).await;
    assert_eq!(row.turn_id, None);
    let (turn, content, _) = common::message(&db.url, &message_row_id(&session_id(), "t1"))
        .await
        .expect("message");
    assert_eq!(turn, None);
    assert_eq!(content.as_deref(), Some("Task"));
    assert_eq!(
        count(&db.url, "task_session_turns").await,
        0,
        "never creates a turn"
    );
    assert_eq!(counters(&capture).persisted, 1);
}

async fn terminal_frame_after_its_turn_ended_keeps_the_turn(db: TestDb) {
    let store = open(&db).await;
    let mut capture = Capture::new(as_store(&store), config());
    let mut lines = session_new().to_vec();
    lines.extend([
        prompt(2),
        launch(ACP, "t1"),
        prompt_end(2),
        result("t1", 500, 2),
    ]);
    feed(&mut capture, &lines).await;
    let row = only_row(&store).await;
    let turn = turn_row_id(&session_id(), "2");
    assert_eq!(row.turn_id.as_deref(), Some(turn.as_str()));
    assert_eq!(row.tool_status.as_deref(), Some("completed"));
    assert!(row.settled_at.is_some());
    assert_eq!((row.total_tokens, row.tool_use_count), (Some(500), Some(2)));
    let (message_turn, _, metadata) =
        common::message(&db.url, &message_row_id(&session_id(), "t1"))
            .await
            .expect("message");
    assert_eq!(message_turn.as_deref(), Some(turn.as_str()));
    assert_eq!(metadata["status"], "completed");
    let turns = common::text_rows(
        &db.url,
        "SELECT CAST(id AS TEXT), CAST(stop_reason AS TEXT) FROM task_session_turns WHERE completed_at IS NOT NULL",
    )
    .await;
    assert_eq!(turns, vec![vec![Some(turn), Some("end_turn".into())]]);
    assert_eq!(capture.stats().turns, 1);
}

async fn a_null_turn_is_filled_by_a_later_frame(db: TestDb) {
    let store = open(&db).await;
    let mut capture = Capture::new(as_store(&store), config());
    let mut lines = session_new().to_vec();
    lines.extend([launch(ACP, "t1"), prompt(2), result("t1", 5, 1)]);
    feed(&mut capture, &lines).await;
    let row = only_row(&store).await;
    assert_eq!(row.turn_id, Some(turn_row_id(&session_id(), "2")), "AC-2a");
}

async fn a_non_subagent_tool_records_nothing(db: TestDb) {
    let store = open(&db).await;
    let mut capture = Capture::new(as_store(&store), config());
    let mut lines = session_new().to_vec();
    lines.extend([
        prompt(2),
        update(
            ACP,
            r#"{"sessionUpdate":"tool_call","toolCallId":"bash-1","title":"ls","kind":"execute","status":"pending","rawInput":{"command":"ls"},"_meta":{"claudeCode":{"toolName":"Bash"}}}"#,
        ),
        update(ACP, r#"{"sessionUpdate":"tool_call_update","toolCallId":"bash-1","status":"completed"}"#),
    ]);
    feed(&mut capture, &lines).await;
    assert_eq!(counters(&capture), CounterSnapshot::default());
    assert_eq!(count(&db.url, "task_session_subagents").await, 0);
    let (_, _, metadata) = common::message(&db.url, &message_row_id(&session_id(), "bash-1"))
        .await
        .expect("message");
    assert_eq!(metadata["normalized"]["kind"], "shell_exec");
    assert_eq!(metadata["status"], "completed");
    assert_eq!(capture.stats().messages, 1);
    assert_eq!(capture.stats().message_writes, 2);
}

/// One launch was attempted and skipped for lack of identity; no other counter moved.
fn assert_only_skipped_no_identity(capture: &Capture) {
    assert_eq!(
        counters(capture),
        CounterSnapshot {
            attempted: 1,
            skipped_no_identity: 1,
            ..CounterSnapshot::default()
        }
    );
}

async fn an_empty_session_id_moves_only_skipped_no_identity(db: TestDb) {
    let store = open(&db).await;
    let mut capture = Capture::new(as_store(&store), config());
    let mut lines = session_new().to_vec();
    lines.push(launch("", "t1"));
    feed(&mut capture, &lines).await;
    assert_only_skipped_no_identity(&capture);
    assert_eq!(count(&db.url, "task_session_subagents").await, 0);
    assert_eq!(count(&db.url, "task_session_messages").await, 0);
}

/// AC-2: a recognised launch whose tool_call_id is empty is counted and written
/// nowhere: no subagent row, no tool-call message; the session and turn still are.
async fn an_empty_tool_call_id_moves_only_skipped_no_identity(db: TestDb) {
    let store = open(&db).await;
    let mut capture = Capture::new(as_store(&store), config());
    let mut lines = session_new().to_vec();
    lines.extend([prompt(2), launch(ACP, ""), prompt_end(2)]);
    feed(&mut capture, &lines).await;
    assert_only_skipped_no_identity(&capture);
    assert_eq!(count(&db.url, "task_session_subagents").await, 0);
    assert_eq!(count(&db.url, "task_session_messages").await, 0);
    assert_eq!(count(&db.url, "task_session_turns").await, 1);
    assert_eq!(count(&db.url, "task_sessions").await, 1);
}

/// An ACP-native announcement that names its child but not the parent session is
/// counted like a launch without a session id, and stored nowhere.
async fn a_native_announcement_without_a_parent_session_moves_only_skipped(db: TestDb) {
    let store = open(&db).await;
    let mut capture = Capture::new(as_store(&store), config());
    let mut lines = session_new().to_vec();
    lines.push((
        A2C,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"subagent_update","sessionId":"child-1","description":"d","state":{"state":"running"}}}}"#
            .to_owned(),
    ));
    feed(&mut capture, &lines).await;
    assert_only_skipped_no_identity(&capture);
    assert_eq!(count(&db.url, "task_session_subagents").await, 0);
}

async fn no_task_records_nothing_and_skips(db: TestDb) {
    let store = open(&db).await;
    let mut capture = Capture::new(as_store(&store), config());
    // session/new without a cwd, and no configured task.
    let lines = vec![
        (
            C2A,
            r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"mcpServers":[]}}"#
                .to_owned(),
        ),
        (
            A2C,
            format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"sessionId":"{ACP}"}}}}"#),
        ),
        prompt(2),
        launch(ACP, "t1"),
    ];
    feed(&mut capture, &lines).await;
    assert_only_skipped_no_identity(&capture);
    for table in common::TABLES {
        assert_eq!(count(&db.url, table).await, 0, "{table}");
    }
    assert_eq!(capture.stats().frames_without_task, 2);
}

async fn a_configured_task_wins_and_a_session_seen_first_through_traffic_gets_its_row(db: TestDb) {
    let store = open(&db).await;
    let mut capture = Capture::new(
        as_store(&store),
        CaptureConfig {
            task_id: Some("TASK-7".into()),
            ..config()
        },
    );
    // No session/new: the transcript starts mid-stream.
    feed(&mut capture, &[prompt(5), launch(ACP, "t1")]).await;
    let row = only_row(&store).await;
    assert_eq!(row.task_id, "TASK-7");
    assert_eq!(row.turn_id, Some(turn_row_id(&session_id(), "5")));
    let sessions = common::text_rows(
        &db.url,
        "SELECT CAST(id AS TEXT), CAST(task_id AS TEXT), CAST(cwd AS TEXT) FROM task_sessions",
    )
    .await;
    assert_eq!(
        sessions,
        vec![vec![Some(session_id()), Some("TASK-7".into()), None]]
    );
    assert_eq!(capture.stats().sessions, 1);
}

async fn no_execution_id_is_unknown_and_counted(db: TestDb) {
    let store = open(&db).await;
    let mut capture = Capture::new(
        as_store(&store),
        CaptureConfig {
            agent_execution_id: Some(String::new()),
            ..config()
        },
    );
    let mut lines = session_new().to_vec();
    lines.extend([launch(ACP, "t1"), result("t1", 1, 1)]);
    feed(&mut capture, &lines).await;
    let rows = store
        .subagents_by_session(&session_row_id("unknown", ACP))
        .await
        .expect("read");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].agent_execution_id, "unknown");
    let c = counters(&capture);
    assert_eq!((c.persisted, c.unknown_execution), (2, 2));
}

async fn negative_metrics_are_null_and_anomalous_once_per_frame(db: TestDb) {
    let store = open(&db).await;
    let mut capture = Capture::new(as_store(&store), config());
    let mut lines = session_new().to_vec();
    lines.extend([launch(ACP, "t1"), result("t1", -5, -1)]);
    feed(&mut capture, &lines).await;
    let row = only_row(&store).await;
    assert_eq!(
        (row.total_tokens, row.tool_use_count, row.duration_ms),
        (None, None, Some(10))
    );
    let c = counters(&capture);
    assert_eq!((c.attempted, c.persisted, c.anomalous_value), (2, 2, 1));
}

/// AC-5, AC-7a end to end: a later result reporting 0 tokens and 0 ms leaves the
/// stored figures; its 0 tool uses is a report and replaces.
async fn a_later_zero_tokens_or_duration_leaves_the_stored_values(db: TestDb) {
    let store = open(&db).await;
    let mut capture = Capture::new(as_store(&store), config());
    let mut lines = session_new().to_vec();
    lines.extend([
        prompt(2),
        launch(ACP, "t1"),
        result_with_duration("t1", 900, 1_500, 7),
        result_with_duration("t1", 0, 0, 0),
        prompt_end(2),
    ]);
    feed(&mut capture, &lines).await;
    let row = only_row(&store).await;
    assert_eq!(
        (row.total_tokens, row.duration_ms, row.tool_use_count),
        (Some(900), Some(1_500), Some(0))
    );
    let c = counters(&capture);
    assert_eq!((c.attempted, c.persisted, c.anomalous_value), (3, 3, 0));
}

/// A store whose subagent writes fail; every other write is the real store's.
struct FailingSubagentStore(Arc<SqlStore>);

#[async_trait]
impl Store for FailingSubagentStore {
    async fn upsert_session(&self, s: &SessionRecord) -> Result<(), StoreError> {
        self.0.upsert_session(s).await
    }
    async fn upsert_turn(&self, t: &TurnRecord) -> Result<(), StoreError> {
        self.0.upsert_turn(t).await
    }
    async fn upsert_message(&self, m: &MessageRecord) -> Result<(), StoreError> {
        self.0.upsert_message(m).await
    }
    async fn upsert_subagent(&self, _: &SubagentRecord) -> Result<(), StoreError> {
        Err(StoreError::Query {
            op: "subagent upsert",
            cause: sqlx::Error::Protocol("the disk is full (test)".into()),
        })
    }
    async fn upsert_usage(&self, u: &UsageRecord) -> Result<(), StoreError> {
        self.0.upsert_usage(u).await
    }
    async fn upsert_import_file(&self, f: &ImportFileRecord) -> Result<(), StoreError> {
        self.0.upsert_import_file(f).await
    }
    /// A batch with a subagent write fails as a whole and writes nothing, as a real
    /// transaction would; capture must then retry record by record.
    async fn write_batch(&self, ops: &[WriteOp<'_>]) -> Result<(), StoreError> {
        if ops.iter().any(|op| matches!(op, WriteOp::Subagent(_))) {
            return Err(StoreError::Query {
                op: "batch commit",
                cause: sqlx::Error::Protocol("the disk is full (test)".into()),
            });
        }
        self.0.write_batch(ops).await
    }
    async fn transcript_applied(&self, execution_id: &str) -> Result<Option<u64>, StoreError> {
        self.0.transcript_applied(execution_id).await
    }
}

async fn a_failed_subagent_write_counts_failed_and_the_rest_still_happens(db: TestDb) {
    let store = open(&db).await;
    let failing: Arc<dyn Store> = Arc::new(FailingSubagentStore(Arc::clone(&store)));
    let mut capture = Capture::new(failing, config());
    let mut lines = session_new().to_vec();
    lines.extend([prompt(2), launch(ACP, "t1"), prompt_end(2)]);
    feed(&mut capture, &lines).await;
    assert_eq!(
        counters(&capture),
        CounterSnapshot {
            attempted: 1,
            failed: 1,
            ..CounterSnapshot::default()
        }
    );
    let (turn, _, metadata) = common::message(&db.url, &message_row_id(&session_id(), "t1"))
        .await
        .expect("the message write still happened");
    assert_eq!(turn, Some(turn_row_id(&session_id(), "2")));
    assert_eq!(metadata["normalized"]["kind"], "subagent_task");
    assert_eq!(
        count(&db.url, "task_session_turns").await,
        1,
        "the turn still happened"
    );
    assert_eq!(count(&db.url, "task_session_subagents").await, 0);
    assert_eq!(
        capture.stats().store_errors,
        0,
        "only the subagent write failed"
    );
}

/// AC-27: the WARN of a failed subagent write names its session and tool_call id, on
/// the single-write path and on the record-by-record retry of a failed group commit.
async fn a_failed_subagent_write_warns_with_its_session_and_tool_call_id(db: TestDb) {
    let store = open(&db).await;
    let failing: Arc<dyn Store> = Arc::new(FailingSubagentStore(Arc::clone(&store)));
    let mut capture = Capture::new(failing, config());
    let logs = LogCapture::default();
    {
        let _guard = logs.install();
        let mut lines = session_new().to_vec();
        lines.extend([prompt(2), launch(ACP, "t-single")]);
        feed(&mut capture, &lines).await;
        feed_batch(&mut capture, &[launch(ACP, "t-batch"), prompt_end(2)]).await;
    }
    let text = logs.text();
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("failed to record subagent context"))
        .collect();
    assert_eq!(warnings.len(), 2, "{text}");
    for (line, tool_call_id) in warnings.iter().zip(["t-single", "t-batch"]) {
        assert!(line.contains("WARN"), "{line}");
        assert!(
            line.contains(&format!("session_id={}", session_id())),
            "{line}"
        );
        assert!(
            line.contains(&format!("tool_call_id={tool_call_id}")),
            "{line}"
        );
        assert!(line.contains("the disk is full (test)"), "{line}");
    }
    assert_eq!(counters(&capture).failed, 2);
}

async fn a_failed_group_commit_is_retried_record_by_record_and_attributed(db: TestDb) {
    let store = open(&db).await;
    // Its write_batch fails whenever a subagent write is in it, writing nothing.
    let failing: Arc<dyn Store> = Arc::new(FailingSubagentStore(Arc::clone(&store)));
    let mut capture = Capture::new(failing, config());
    let mut lines = session_new().to_vec();
    lines.extend([
        prompt(2),
        launch(ACP, "t1"),
        launch(ACP, "t2"),
        prompt_end(2),
    ]);
    feed_batch(&mut capture, &lines).await;
    assert_eq!(
        counters(&capture),
        CounterSnapshot {
            attempted: 2,
            failed: 2,
            ..CounterSnapshot::default()
        }
    );
    for id in ["t1", "t2"] {
        let (turn, _, _) = common::message(&db.url, &message_row_id(&session_id(), id))
            .await
            .expect("the message write still happened");
        assert_eq!(turn, Some(turn_row_id(&session_id(), "2")));
    }
    assert_eq!(count(&db.url, "task_session_turns").await, 1);
    assert_eq!(count(&db.url, "task_session_subagents").await, 0);
    let stats = capture.stats();
    assert_eq!((stats.store_errors, stats.message_writes), (0, 2));
}

/// Group commit changes when rows are written, never what: the same lines give the
/// same rows, counters and stats one at a time and as one batch.
async fn a_batch_writes_what_the_same_lines_write_one_at_a_time(db: TestDb) {
    let store = open(&db).await;
    let mut lines = session_new().to_vec();
    lines.extend([
        prompt(2),
        launch(ACP, "t1"),
        launch(ACP, "t2"),
        result("t1", -5, 3),
        prompt_end(2),
        (A2C, "not json".to_owned()),
        prompt(3),
        result("t2", 70, 0),
        prompt_end(3),
    ]);
    let mut one_by_one = Capture::new(as_store(&store), config());
    feed(&mut one_by_one, &lines).await;
    let expected = common::dump_all(&db.url).await;
    store
        .delete_session(&session_id())
        .await
        .expect("delete the session and (cascade) its rows");
    let mut batched = Capture::new(as_store(&store), config());
    feed_batch(&mut batched, &lines).await;
    assert_eq!(common::dump_all(&db.url).await, expected);
    assert_eq!(counters(&batched), counters(&one_by_one));
    assert_eq!(batched.stats(), one_by_one.stats());
    assert_eq!(count(&db.url, "task_session_subagents").await, 2);
}

async fn garbage_lines_are_counted_not_recorded(db: TestDb) {
    let store = open(&db).await;
    let mut capture = Capture::new(as_store(&store), config());
    capture
        .observe(A2C, b"not json at all", at("2026-08-10T09:00:00Z"))
        .await;
    capture
        .observe(C2A, &[0xff, 0xfe, b'{'], at("2026-08-10T09:00:01Z"))
        .await;
    let stats = capture.stats();
    assert_eq!((stats.frames_seen, stats.frames_not_understood), (2, 2));
    for table in common::TABLES {
        assert_eq!(count(&db.url, table).await, 0, "{table}");
    }
}

/// Issue 10's bad input end to end: a lone state for a child never announced, a cycle
/// that goes idle twice, a hand-back from a session never announced and a Qwen
/// `backgroundTask` naming an unknown call are each one dialect anomaly; the only row is
/// the announced child's first cycle, settled once.
async fn bad_subagent_input_is_counted_and_invents_no_row(db: TestDb) {
    let store = open(&db).await;
    let mut capture = Capture::new(as_store(&store), config());
    let lines = one_turn(&[
        r#"{"sessionUpdate":"subagent_update","sessionId":"ghost","state":{"state":"running"}}"#,
        r#"{"sessionUpdate":"subagent_update","sessionId":"kid","title":"Review","state":{"state":"running"}}"#,
        r#"{"sessionUpdate":"subagent_update","sessionId":"kid","state":{"state":"idle","stopReason":"end_turn"}}"#,
        r#"{"sessionUpdate":"subagent_update","sessionId":"kid","state":{"state":"idle","stopReason":"cancelled"}}"#,
        r#"{"sessionUpdate":"session_message","messageId":"m1","senderSessionId":"stranger","recipientSessionId":"s1","content":[{"type":"text","text":"report"}]}"#,
        r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"done"},"_meta":{"backgroundTask":{"toolUseId":"call_404","status":"completed"}}}"#,
    ]);
    feed(&mut capture, &lines).await;
    assert_eq!(
        capture.stats().dialect_anomalies,
        4,
        "{:?}",
        capture.stats()
    );
    let row = only_row(&store).await;
    assert_eq!(row.tool_call_id, "kid");
    assert_eq!(row.child_session_id.as_deref(), Some("kid"));
    assert_eq!(row.description.as_deref(), Some("Review"));
    assert_eq!(
        (row.agent_status.as_deref(), row.tool_status.as_deref()),
        (Some("idle"), Some("completed")),
        "the second idle does not re-settle it as cancelled"
    );
}

both_engines!(
    bad_subagent_input_is_counted_and_invents_no_row,
    frame_outside_any_prompt_records_turn_null,
    terminal_frame_after_its_turn_ended_keeps_the_turn,
    a_null_turn_is_filled_by_a_later_frame,
    a_non_subagent_tool_records_nothing,
    an_empty_session_id_moves_only_skipped_no_identity,
    an_empty_tool_call_id_moves_only_skipped_no_identity,
    a_native_announcement_without_a_parent_session_moves_only_skipped,
    no_task_records_nothing_and_skips,
    a_configured_task_wins_and_a_session_seen_first_through_traffic_gets_its_row,
    no_execution_id_is_unknown_and_counted,
    negative_metrics_are_null_and_anomalous_once_per_frame,
    a_later_zero_tokens_or_duration_leaves_the_stored_values,
    a_failed_subagent_write_counts_failed_and_the_rest_still_happens,
    a_failed_subagent_write_warns_with_its_session_and_tool_call_id,
    a_failed_group_commit_is_retried_record_by_record_and_attributed,
    a_batch_writes_what_the_same_lines_write_one_at_a_time,
    garbage_lines_are_counted_not_recorded,
);
