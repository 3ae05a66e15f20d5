//! `Store::write_batch` (the group commit capture and import use), on SQLite and
//! PostgreSQL alike: every value lands in its column exactly as the single-statement
//! writes put it (SQLite sends each table's run of upserts as multi-statement queries
//! with renumbered binds), a long interleaved batch merges each key's writes in the
//! order given, and a batch that fails part-way writes nothing.

use fanout_store::testing::{TestDb, add_session_with_turn, session_record, turn_record};
use fanout_store::{
    MessageRecord, SqlStore, Store, SubagentRecord, SubagentRow, Timestamp, TokenCounts,
    UsageRecord, UsageSource, WriteOp, both_engines,
};

both_engines!(
    a_batch_writes_what_single_writes_write,
    a_long_interleaved_batch_merges_in_order_as_single_writes_do,
    a_failing_write_part_way_leaves_nothing_of_the_batch,
);

fn at(micros: i64) -> Timestamp {
    Timestamp::parse("2026-08-10T09:00:00Z")
        .unwrap()
        .plus_micros(micros)
}

/// A tool-call message with every column set to a value of its own.
fn message(id: &str, session: &str) -> MessageRecord {
    MessageRecord {
        id: id.into(),
        task_session_id: session.into(),
        task_id: Some("task-1".into()),
        turn_id: Some(format!("{session}-turn")),
        author_type: Some("agent".into()),
        message_type: Some("tool_call".into()),
        content: Some("Task".into()),
        metadata: r#"{"tool_call_id":"tc","status":"completed"}"#.into(),
        created_at: at(1),
        updated_at: at(2),
    }
}

/// A subagent frame with every field set to a value of its own.
fn subagent(tool_call_id: &str, session: &str) -> SubagentRecord {
    SubagentRecord {
        task_session_id: session.into(),
        task_id: "task-1".into(),
        turn_id: Some(format!("{session}-turn")),
        tool_call_id: tool_call_id.into(),
        agent_execution_id: Some("exec-1".into()),
        parent_tool_call_id: Some("parent".into()),
        subagent_type: Some("reviewer".into()),
        description: Some("review auth".into()),
        agent_id: Some("agent-7".into()),
        child_session_id: Some("child-3".into()),
        model: Some("model-x".into()),
        agent_status: Some("completed".into()),
        tool_status: Some("completed".into()),
        is_async: true,
        total_tokens: Some(1234),
        tool_use_count: Some(5),
        duration_ms: Some(678),
        observed_at: Some(at(3)),
        settled_at: Some(at(4)),
        source: fanout_store::Source::Live,
    }
}

async fn add_session(store: &SqlStore, session: &str) {
    add_session_with_turn(store, session, "task-1", at(0)).await;
}

/// The one row of `session`, with what differs by construction (its own ids and write
/// time) blanked.
async fn row_of(store: &SqlStore, session: &str) -> SubagentRow {
    let mut rows = store.subagents_by_session(session).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let mut row = rows.remove(0);
    row.id = String::new();
    row.task_session_id = String::new();
    row.turn_id = None;
    row.updated_at = at(0);
    row
}

async fn a_batch_writes_what_single_writes_write(db: TestDb) {
    let store = db.open().await.unwrap();
    // The single-statement path.
    add_session(&store, "single").await;
    store
        .upsert_message(&message("m-single", "single"))
        .await
        .unwrap();
    store
        .upsert_subagent(&subagent("tc", "single"))
        .await
        .unwrap();
    // The batch path: session, turn, then the message-and-subagent pair of one frame.
    let (session, turn) = (
        session_record("batch", "task-1", at(0)),
        turn_record("batch-turn", "batch", "task-1", at(0)),
    );
    let (m, r) = (message("m-batch", "batch"), subagent("tc", "batch"));
    store
        .write_batch(&[
            WriteOp::Session(&session),
            WriteOp::Turn(&turn),
            WriteOp::Message(&m),
            WriteOp::Subagent(&r),
        ])
        .await
        .unwrap();

    assert_eq!(
        row_of(&store, "batch").await,
        row_of(&store, "single").await
    );
    let batched = row_of(&store, "batch").await;
    assert_eq!(batched.description.as_deref(), Some("review auth"));
    assert_eq!(batched.total_tokens, Some(1234));
    assert_eq!(batched.settled_at, Some(at(4)));
    // Every message column matches between the two paths.
    let same_message = store
        .query_i64(
            "SELECT COUNT(*) FROM task_session_messages a JOIN task_session_messages b \
             ON a.id = 'm-single' AND b.id = 'm-batch' \
             WHERE a.task_id = b.task_id AND a.author_type = b.author_type AND a.type = b.type \
             AND a.content = b.content AND a.metadata = b.metadata \
             AND a.created_at = b.created_at AND a.updated_at = b.updated_at \
             AND b.turn_id = 'batch-turn' AND b.task_session_id = 'batch'",
        )
        .await
        .unwrap();
    assert_eq!(same_message, 1);
}

async fn a_failing_write_part_way_leaves_nothing_of_the_batch(db: TestDb) {
    let store = db.open().await.unwrap();
    let session = session_record("s1", "task-1", at(0));
    let turn = turn_record("s1-turn", "s1", "task-1", at(0));
    let good = message("m-good", "s1");
    // Its session does not exist: the foreign key refuses it, after three good writes.
    let orphan = message("m-orphan", "no-such-session");
    let after = subagent("tc", "s1");
    let result = store
        .write_batch(&[
            WriteOp::Session(&session),
            WriteOp::Turn(&turn),
            WriteOp::Message(&good),
            WriteOp::Message(&orphan),
            WriteOp::Subagent(&after),
        ])
        .await;
    assert!(result.is_err(), "the orphan message must fail the batch");
    let counts = store.counts().await.unwrap();
    assert_eq!(
        (
            counts.sessions,
            counts.turns,
            counts.messages,
            counts.subagents
        ),
        (0, 0, 0, 0),
        "all or nothing"
    );
}

/// Frame `k` of one subagent call, its fields changing from frame to frame so that the
/// merge's outcome depends on the order: fill-forward text, a metric that comes and
/// goes, a terminal status at frame 60 and later ones that must not move it.
fn frame(k: usize, session: &str) -> SubagentRecord {
    let mut r = subagent("tc-long", session);
    r.description = k.is_multiple_of(3).then(|| format!("description {k}"));
    r.total_tokens = (k % 4 != 1).then_some(k as i64 * 10);
    r.agent_status = Some(if k < 60 { "running" } else { "completed" }.into());
    r.tool_status = Some(match k {
        0..60 => "in_progress".into(),
        60 => "completed".into(),
        _ => "failed".into(),
    });
    r.settled_at = (k >= 60).then(|| at(1000 + k as i64));
    r.is_async = k == 17;
    r.observed_at = Some(at(k as i64));
    r
}

/// Record `k` of one of seven responses, its figures rising and falling.
fn usage(k: usize, session: &str) -> UsageRecord {
    UsageRecord {
        task_session_id: session.into(),
        task_id: "task-1".into(),
        turn_id: (k > 5).then(|| format!("{session}-turn")),
        subagent_tool_call_id: k.is_multiple_of(2).then(|| "tc-long".into()),
        agent_execution_id: None,
        response_id: format!("resp-{}", k % 7),
        model: (k > 3).then(|| format!("model-{k}")),
        tokens: TokenCounts {
            input_tokens: Some((k as i64 * 37) % 101),
            output_tokens: (!k.is_multiple_of(5)).then_some(k as i64),
            cache_creation_tokens: None,
            cache_read_tokens: Some(1000 - k as i64),
            reasoning_tokens: None,
        },
        source: UsageSource::ClaudeLog,
        observed_at: at(k as i64),
    }
}

async fn a_long_interleaved_batch_merges_in_order_as_single_writes_do(db: TestDb) {
    let store = db.open().await.unwrap();
    // 150 frames and 150 usage records, interleaved with messages: runs long enough
    // for every chunk size SQLite cuts a run into (64, 32, …, 1).
    let frames = 150;
    let records = |session: &str| {
        let subagents: Vec<_> = (0..frames).map(|k| frame(k, session)).collect();
        let usages: Vec<_> = (0..frames).map(|k| usage(k, session)).collect();
        let messages: Vec<_> = (0..frames)
            .map(|k| {
                let mut m = message(&format!("{session}-m{}", k % 9), session);
                m.content = k.is_multiple_of(2).then(|| format!("content {k}"));
                m.metadata = format!(r#"{{"k":{k}}}"#);
                m
            })
            .collect();
        (subagents, usages, messages)
    };
    add_session(&store, "single").await;
    let (subagents, usages, messages) = records("single");
    for k in 0..frames {
        store.upsert_message(&messages[k]).await.unwrap();
        store.upsert_subagent(&subagents[k]).await.unwrap();
        store.upsert_usage(&usages[k]).await.unwrap();
    }
    let (session, turn) = (
        session_record("batch", "task-1", at(0)),
        turn_record("batch-turn", "batch", "task-1", at(0)),
    );
    let (subagents, usages, messages) = records("batch");
    let mut ops = vec![WriteOp::Session(&session), WriteOp::Turn(&turn)];
    for k in 0..frames {
        ops.extend([
            WriteOp::Message(&messages[k]),
            WriteOp::Subagent(&subagents[k]),
            WriteOp::Usage(&usages[k]),
        ]);
    }
    store.write_batch(&ops).await.unwrap();

    let batched = row_of(&store, "batch").await;
    assert_eq!(batched, row_of(&store, "single").await);
    assert_eq!(batched.tool_status.as_deref(), Some("completed"));
    assert_eq!(batched.settled_at, Some(at(1060)));
    assert_eq!(batched.description.as_deref(), Some("description 147"));
    let ledger = |session: &'static str| {
        let store = &store;
        async move {
            let mut rows = store.usage_rows(session).await.unwrap();
            for row in &mut rows {
                row.id = String::new();
                row.task_session_id = String::new();
                row.turn_id = row.turn_id.as_ref().map(|_| String::new());
                row.updated_at = at(0);
            }
            rows
        }
    };
    let single = ledger("single").await;
    assert_eq!(single.len(), 7);
    assert_eq!(ledger("batch").await, single);
    let same_messages = store
        .query_i64(
            "SELECT COUNT(*) FROM task_session_messages a JOIN task_session_messages b \
             ON b.id = 'batch' || substr(a.id, 7) AND a.task_session_id = 'single' \
             WHERE a.content IS NOT DISTINCT FROM b.content AND a.metadata = b.metadata",
        )
        .await
        .unwrap();
    assert_eq!(same_messages, 9);
}
