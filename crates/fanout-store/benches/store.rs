//! Store benchmarks, reported as ratios against a baseline measured in the same run on
//! the same database file (these machines are noisy; absolute numbers are not comparable).
//!
//! `cargo bench -p fanout-store --bench store` runs both:
//! - writer: `Store::upsert_subagent` (the full merge statement, value rules, row id)
//!   vs a bare prepared-statement upsert loop on the same file; and the same frames
//!   through `Store::write_batch`, `FANOUT_BENCH_BATCH` (default 14) per group commit;
//! - backfill: the AC-21 backfill of N messages (one transaction with the keys) vs the
//!   bare `INSERT … SELECT` of the same rows.
//!
//! Sizes: `FANOUT_BENCH_FRAMES` (default 20000), `FANOUT_BENCH_MESSAGES` (default 1000000).

use std::time::Instant;

use fanout_store::testing::add_session_with_turn;
use fanout_store::testing::bench::{bare_sqlite_pool, bare_subagent_upsert, is_quick, size};
use fanout_store::{SqlStore, Store, SubagentRecord, Timestamp, WriteOp};

fn main() {
    let quick = is_quick();
    let frames = if quick {
        200
    } else {
        size("FANOUT_BENCH_FRAMES", 20_000)
    };
    let messages = if quick {
        2_000
    } else {
        size("FANOUT_BENCH_MESSAGES", 1_000_000)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        writer_vs_bare_loop(frames).await;
        backfill_vs_bare_insert(messages).await;
    });
}

async fn open(dir: &tempfile::TempDir, name: &str) -> SqlStore {
    let url = format!("sqlite://{}", dir.path().join(name).display());
    SqlStore::open(&url).await.expect("open store")
}

async fn seed_session(store: &SqlStore, session: &str) {
    add_session_with_turn(store, session, "bench-task", Timestamp::now()).await;
}

/// Frame `i` of a stream where each tool call gets a launch, an update and a result.
fn frame(i: usize) -> SubagentRecord {
    let call = i / 3;
    let step = i % 3;
    SubagentRecord {
        task_session_id: "bench-session".to_owned(),
        task_id: "bench-task".to_owned(),
        turn_id: Some("bench-session-turn".to_owned()),
        tool_call_id: format!("toolu_{call:08}"),
        agent_execution_id: Some("bench-exec".to_owned()),
        subagent_type: (step > 0).then(|| "reviewer".to_owned()),
        description: (step > 0).then(|| format!("review pass {call}")),
        tool_status: Some(
            if step == 2 {
                "completed"
            } else {
                "in_progress"
            }
            .to_owned(),
        ),
        total_tokens: (step == 2).then_some(1_000 + call as i64),
        tool_use_count: (step == 2).then_some(3),
        duration_ms: (step == 2).then_some(900),
        observed_at: Some(Timestamp::now()),
        settled_at: (step == 2).then(Timestamp::now),
        ..Default::default()
    }
}

async fn writer_vs_bare_loop(frames: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir, "writer.db").await;
    seed_session(&store, "bench-session").await;

    // Baseline: the same merge statement as a bare prepared-statement loop on the same
    // file and settings, through the same driver, with values bound as-is: what is left
    // is the cost of the store layer (value rules, row id, timestamps, the API).
    let url = format!("sqlite://{}", dir.path().join("writer.db").display());
    let bare = bare_sqlite_pool(&url).await.expect("bare pool");
    let statement = store.subagent_upsert_statement().to_owned();

    // Whichever side runs first on a cold file is slower, so the sides alternate over
    // several rounds on fresh keys and the totals are compared.
    let rounds = 4;
    let batch = size("FANOUT_BENCH_BATCH", 14).max(1);
    let (mut bare_secs, mut ours_secs, mut batch_secs) = (0.0, 0.0, 0.0);
    for round in 0..rounds {
        for side in [round % 2, 1 - round % 2, 2] {
            let started = Instant::now();
            if side == 2 {
                let records: Vec<SubagentRecord> = (0..frames)
                    .map(|i| {
                        let mut f = frame(i);
                        f.tool_call_id = format!("b{round}-{}", f.tool_call_id);
                        f
                    })
                    .collect();
                for chunk in records.chunks(batch) {
                    let ops: Vec<WriteOp<'_>> = chunk.iter().map(WriteOp::Subagent).collect();
                    store.write_batch(&ops).await.expect("batch");
                }
                batch_secs += started.elapsed().as_secs_f64();
                continue;
            }
            for i in 0..frames {
                let mut f = frame(i);
                f.tool_call_id = format!("r{round}-{}", f.tool_call_id);
                if side == 0 {
                    store.upsert_subagent(&f).await.expect("upsert");
                    continue;
                }
                f.tool_call_id = format!("bare-{}", f.tool_call_id);
                bare_subagent_upsert(&bare, &statement, format!("bare-{round}-{i}"), &f)
                    .await
                    .expect("bare upsert");
            }
            let secs = started.elapsed().as_secs_f64();
            if side == 0 {
                ours_secs += secs;
            } else {
                bare_secs += secs;
            }
        }
    }
    bare.close().await;
    let total = (frames * rounds) as f64;
    let bare_rate = total / bare_secs;
    let ours_rate = total / ours_secs;
    let batch_rate = total / batch_secs;
    println!(
        "writer: {rounds}x{frames} frames; bare loop {bare_rate:.0} frames/s, Store::upsert_subagent {ours_rate:.0} frames/s; ratio {:.2}x (target >= 0.8x)",
        ours_rate / bare_rate
    );
    println!(
        "writer: Store::write_batch ({batch} upserts per group commit) {batch_rate:.0} frames/s; {:.2}x of the bare loop",
        batch_rate / bare_rate
    );
    store.close().await;
}

async fn seed_messages(store: &SqlStore, messages: usize) {
    seed_session(store, "bench-session").await;
    let base = Timestamp::now();
    // Seed through one transaction-sized batch per 10k rows for speed; content is the
    // tool-call metadata contract of DESIGN 4.1.
    let mut batch = String::new();
    for i in 0..messages {
        let created = base.plus_micros(i as i64).canonical();
        let metadata = format!(
            r#"{{"tool_call_id":"toolu_{i:08}","title":"Task","status":"completed","normalized":{{"kind":"subagent_task","subagent_task":{{"description":"pass {i}","prompt":"p","subagent_type":"reviewer","status":"completed","total_tokens":{},"tool_use_count":{},"duration_ms":900}}}}}}"#,
            1000 + i,
            i % 5
        );
        batch.push_str(&format!(
            "('m{i:08}', 'bench-session', 'bench-task', 'bench-session-turn', 'agent', 'tool_call', 'Task', '{metadata}', '{created}', '{created}'),"
        ));
        if (i + 1) % 5_000 == 0 || i + 1 == messages {
            batch.pop();
            store
                .execute_raw(&format!(
                    "INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, author_type, type, content, metadata, created_at, updated_at) VALUES {batch}"
                ))
                .await
                .expect("seed messages");
            batch.clear();
        }
    }
}

async fn backfill_vs_bare_insert(messages: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    // Seed once (an activated store, so opening a copy runs no backfill), then give
    // every run its own copy of the same file, alternating sides over two rounds:
    // neither side pays for seeding, a colder cache or going first.
    let seed_path = dir.path().join("seed.db");
    let seed = open(&dir, "seed.db").await;
    seed_messages(&seed, messages).await;
    seed.close().await;

    let (mut bare_secs, mut ours_secs) = (0.0, 0.0);
    let mut inserted = Vec::new();
    for (run, ours) in [false, true, true, false].into_iter().enumerate() {
        let name = format!("run{run}.db");
        std::fs::copy(&seed_path, dir.path().join(&name)).expect("copy the seeded file");
        let store = open(&dir, &name).await;
        // Unactivated, as a database from before fanout: both sides find the same file
        // (the backfill statement inserts nothing into an activated one).
        store
            .execute_raw("DELETE FROM fanout_meta WHERE key LIKE 'subagent_context_%'")
            .await
            .expect("reset keys");
        let (secs, rows) = if ours {
            let started = Instant::now();
            let steps = store.run_migrations().await;
            let secs = started.elapsed().as_secs_f64();
            assert!(
                matches!(steps[0].status, fanout_store::StepStatus::Applied { .. }),
                "{steps:?}"
            );
            (
                secs,
                store.counts().await.expect("counts").subagents_backfill as u64,
            )
        } else {
            // Baseline: the very same INSERT … SELECT, bare (no transaction, no
            // high-water read, no activation keys).
            let statement = store.backfill_statement();
            let started = Instant::now();
            let rows = store.execute_raw(&statement).await.expect("bare insert");
            (started.elapsed().as_secs_f64(), rows)
        };
        store.close().await;
        std::fs::remove_file(dir.path().join(&name)).ok();
        inserted.push(rows);
        if ours {
            ours_secs += secs;
        } else {
            bare_secs += secs;
        }
    }
    assert!(
        inserted.iter().all(|&n| n == messages as u64),
        "every run inserts every message: {inserted:?}"
    );
    println!(
        "backfill: {messages} messages, 2 runs a side on copies of one seeded file; bare INSERT…SELECT {bare_secs:.2}s, backfill step {ours_secs:.2}s; ratio {:.2}x (target <= 1.1x)",
        ours_secs / bare_secs
    );
}
