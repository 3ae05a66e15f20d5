//! Capture throughput, as a ratio against a baseline measured in the same run on the same
//! SQLite file (these machines are noisy; absolute numbers are not comparable).
//!
//! `cargo bench -p fanout-capture --bench capture`: frames per second through capture
//! (JSON-RPC parse, dialect recognition, accumulation, the tool-call message write and
//! the subagent write) on realistic Claude-dialect traffic — per subagent a launch, a
//! status-less input update and a result, with a prompt start and end around every
//! four launches — versus a bare prepared-statement loop of the same subagent upsert
//! statement (`SqlStore::subagent_upsert_statement`), one per frame, each its own
//! commit. Capture is fed the way the proxy's consumer feeds it: what is queued goes
//! to [`Capture::observe_batch`] (one group commit per call, committed before it
//! returns); here a batch is the lines of one prompt turn (14). Per-line
//! [`Capture::observe`] is measured too, for reference.
//!
//! Sizes: `FANOUT_BENCH_FRAMES` (default 20000 per side per round),
//! `FANOUT_BENCH_BATCH` (lines per batch, default 14).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use fanout_acp::Direction;
use fanout_capture::{Capture, CaptureConfig};
use fanout_store::testing::bench::{bare_sqlite_pool, bare_subagent_upsert, is_quick, size};
use fanout_store::{SqlStore, Store, SubagentRecord, Timestamp};

fn main() {
    let quick = is_quick();
    let frames = if quick {
        100
    } else {
        size("FANOUT_BENCH_FRAMES", 20_000)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let batch = size("FANOUT_BENCH_BATCH", 14).max(1);
    runtime.block_on(capture_vs_bare_loop(
        frames,
        batch,
        if quick { 2 } else { 4 },
    ));
}

/// `count` lines of Claude traffic for session `session`, tool call ids prefixed `tag`.
fn traffic(session: &str, tag: &str, count: usize) -> Vec<(Direction, String)> {
    let mut lines = Vec::with_capacity(count + 8);
    let mut call = 0usize;
    let mut request = 1_000usize;
    let update = |body: String| {
        (
            Direction::AgentToClient,
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{body}}}}}"#
            ),
        )
    };
    while lines.len() < count {
        request += 1;
        lines.push((
            Direction::ClientToAgent,
            format!(r#"{{"jsonrpc":"2.0","id":{request},"method":"session/prompt","params":{{"sessionId":"{session}","prompt":[{{"type":"text","text":"review"}}]}}}}"#),
        ));
        for _ in 0..4 {
            call += 1;
            let id = format!("toolu_{tag}_{call:08}");
            lines.push(update(format!(
                r#"{{"sessionUpdate":"tool_call","toolCallId":"{id}","title":"Task","kind":"think","status":"pending","rawInput":{{}},"content":[],"_meta":{{"claudeCode":{{"toolName":"Agent"}}}}}}"#
            )));
            lines.push(update(format!(
                r#"{{"sessionUpdate":"tool_call_update","toolCallId":"{id}","title":"reviewer pass {call}","kind":"think","rawInput":{{"description":"reviewer pass {call}","prompt":"Review the diff","subagent_type":"reviewer"}},"_meta":{{"claudeCode":{{"toolName":"Agent"}}}}}}"#
            )));
            lines.push(update(format!(
                r#"{{"sessionUpdate":"tool_call_update","toolCallId":"{id}","status":"completed","_meta":{{"claudeCode":{{"toolName":"Agent","toolResponse":{{"status":"completed","agentId":"a{call}","totalDurationMs":48213,"totalTokens":{},"totalToolUseCount":11,"content":[{{"type":"text","text":"VERDICT: APPROVE"}}]}}}}}}}}"#,
                1_000 + call
            )));
        }
        lines.push((
            Direction::AgentToClient,
            format!(r#"{{"jsonrpc":"2.0","id":{request},"result":{{"stopReason":"end_turn"}}}}"#),
        ));
    }
    lines.truncate(count);
    lines
}

/// What capture must write for `lines`: one subagent write per tool frame (every tool
/// frame of [`traffic`] is an `Agent` call's), and one subagent row per distinct call.
/// Read from the lines themselves, so a capture that stops writing fails the bench.
fn expected_subagent_writes(lines: &[(Direction, String)]) -> (u64, u64) {
    let mut calls = HashSet::new();
    let mut frames = 0;
    for (_, line) in lines {
        let value: serde_json::Value = serde_json::from_str(line).expect("bench line is JSON");
        if let Some(id) = value["params"]["update"]["toolCallId"].as_str() {
            frames += 1;
            calls.insert(id.to_owned());
        }
    }
    (frames, calls.len() as u64)
}

fn opening(session: &str) -> [(Direction, String); 2] {
    [
        (
            Direction::ClientToAgent,
            r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/bench","mcpServers":[]}}"#.to_owned(),
        ),
        (
            Direction::AgentToClient,
            format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"sessionId":"{session}"}}}}"#),
        ),
    ]
}

/// The values capture writes for [`traffic`]'s frames (launch, input update, result
/// per call), as records for the bare loop, built before its clock starts.
fn bare_frames(session_row: &str, round: usize, frames: usize) -> Vec<SubagentRecord> {
    (0..frames)
        .map(|i| {
            let (call, step) = (i / 3, i % 3);
            let done = step == 2;
            SubagentRecord {
                task_session_id: session_row.to_owned(),
                task_id: "/bench".to_owned(),
                tool_call_id: format!("bare_r{round}_{call:08}"),
                agent_execution_id: Some("bare-exec".to_owned()),
                subagent_type: (step > 0).then(|| "reviewer".to_owned()),
                description: (step > 0).then(|| format!("reviewer pass {call}")),
                agent_id: done.then(|| format!("a{call}")),
                agent_status: done.then(|| "completed".to_owned()),
                tool_status: Some(if done { "completed" } else { "in_progress" }.to_owned()),
                total_tokens: done.then_some(1_000 + call as i64),
                tool_use_count: done.then_some(11),
                duration_ms: done.then_some(48_213),
                settled_at: done.then(Timestamp::now),
                ..Default::default()
            }
        })
        .collect()
}

async fn capture_vs_bare_loop(frames: usize, batch: usize, rounds: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("capture.db").display());
    let store = Arc::new(SqlStore::open(&url).await.expect("open store"));

    // Baseline: the subagent merge statement as a bare prepared-statement loop on the
    // same file, same pragmas, through the same driver, values bound as-is. Its rows
    // need a session for the foreign key; seed one through a capture.
    let mut seed = Capture::new(Arc::clone(&store) as Arc<dyn Store>, config("bare-exec"));
    for (direction, line) in opening("bare-session") {
        seed.observe(direction, line.as_bytes(), Timestamp::now())
            .await;
    }
    let bare_session = fanout_capture::session_row_id("bare-exec", "bare-session");
    let bare = bare_sqlite_pool(&url).await.expect("bare pool");
    let statement = store.subagent_upsert_statement().to_owned();

    // Whichever side runs first on a cold file is slower, so the sides alternate over
    // rounds on fresh keys and the totals are compared.
    let (mut bare_secs, mut ours_secs) = (0.0, 0.0);
    let mut persisted = 0;
    for round in 0..rounds {
        let session = format!("bench-session-{round}");
        let lines = traffic(&session, &format!("r{round}"), frames);
        let (expected_writes, expected_rows) = expected_subagent_writes(&lines);
        assert!(expected_writes > 0, "the traffic has subagent frames");
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                let mut capture =
                    Capture::new(Arc::clone(&store) as Arc<dyn Store>, config("bench-exec"));
                for (direction, line) in opening(&session) {
                    capture
                        .observe(direction, line.as_bytes(), Timestamp::now())
                        .await;
                }
                let started = Instant::now();
                for chunk in lines.chunks(batch) {
                    // Stamped as the proxy stamps them: when read, before queueing.
                    let queued: Vec<(Direction, &[u8], Timestamp)> = chunk
                        .iter()
                        .map(|(direction, line)| (*direction, line.as_bytes(), Timestamp::now()))
                        .collect();
                    capture.observe_batch(&queued).await;
                }
                ours_secs += started.elapsed().as_secs_f64();
                let counters = capture.counters().snapshot();
                assert_eq!(counters.failed, 0, "no write fails");
                assert_eq!(counters.persisted, expected_writes, "every subagent frame");
                assert_eq!(capture.stats().subagent_rows, expected_rows, "every call");
                persisted += counters.persisted;
                continue;
            }
            let records = bare_frames(&bare_session, round, frames);
            let started = Instant::now();
            for (i, record) in records.iter().enumerate() {
                bare_subagent_upsert(&bare, &statement, format!("bare-{round}-{i}"), record)
                    .await
                    .expect("bare upsert");
            }
            bare_secs += started.elapsed().as_secs_f64();
        }
    }
    bare.close().await;
    let total = (frames * rounds) as f64;
    // For reference: one line at a time through Capture::observe (a commit per statement).
    let single = traffic("single-session", "single", frames.min(5_000));
    let mut capture = Capture::new(Arc::clone(&store) as Arc<dyn Store>, config("single-exec"));
    for (direction, line) in opening("single-session") {
        capture
            .observe(direction, line.as_bytes(), Timestamp::now())
            .await;
    }
    let started = Instant::now();
    for (direction, line) in &single {
        capture
            .observe(*direction, line.as_bytes(), Timestamp::now())
            .await;
    }
    let single_rate = single.len() as f64 / started.elapsed().as_secs_f64();
    let (expected_writes, expected_rows) = expected_subagent_writes(&single);
    let counters = capture.counters().snapshot();
    assert_eq!(counters.failed, 0, "no write fails");
    assert_eq!(counters.persisted, expected_writes, "every subagent frame");
    assert_eq!(capture.stats().subagent_rows, expected_rows, "every call");
    // Where capture's time goes: the wire work alone (parse, recognise, accumulate, the
    // message metadata JSON), no store.
    let lines = traffic("cpu-session", "cpu", frames);
    let started = Instant::now();
    let mut tracker = fanout_acp::Tracker::new();
    let mut metadata_bytes = 0usize;
    for (direction, line) in &lines {
        for event in tracker.observe(*direction, line) {
            if let fanout_acp::TrackerEvent::Tool(frame) = event {
                metadata_bytes += frame.message_metadata().to_string().len();
            }
        }
    }
    let wire_us = started.elapsed().as_secs_f64() * 1e6 / frames as f64;
    let bare_rate = total / bare_secs;
    let ours_rate = total / ours_secs;
    println!(
        "capture: {rounds}x{frames} frames ({persisted} subagent writes); bare upsert loop {bare_rate:.0} frames/s, Capture::observe_batch ({batch} lines per group commit) {ours_rate:.0} frames/s; ratio {:.2}x (target >= 0.8x)",
        ours_rate / bare_rate
    );
    println!(
        "capture: for reference, Capture::observe one line at a time {single_rate:.0} frames/s ({:.2}x of the bare loop; a commit per statement)",
        single_rate / bare_rate
    );
    println!(
        "capture: of that, wire work alone (no store) {wire_us:.1} us/frame ({metadata_bytes} metadata bytes); capture writes 2 statements per tool frame (message + subagent, one round trip on SQLite; turn + session on prompt lines) where the baseline writes 1"
    );
    store.close().await;
}

fn config(execution: &str) -> CaptureConfig {
    CaptureConfig {
        agent_execution_id: Some(execution.to_owned()),
        task_id: None,
        agent_command: Some("bench".to_owned()),
    }
}
