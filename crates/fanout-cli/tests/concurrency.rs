//! Concurrent writers on one SQLite file (DESIGN 7): two proxies, each running the
//! reference agent through twelve turns with a subagent each, and an import of every
//! real-agent fixture transcript, all started at once on a file none of them has
//! created yet. Each writer waits for the others' write lock within the busy timeout:
//! no write is lost to "database is locked", and every row of each is there.

mod proxy_support;

use std::path::Path;
use std::time::Duration;

use proxy_support::session::{Client, ScriptedSession};
use proxy_support::{Running, count_rows, fanout};

const TURNS: usize = 12;
const LIMIT: Duration = Duration::from_secs(120);

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fanout-capture/tests/fixtures/real")
}

fn proxy(dir: &Path, db: &str, task: &str) -> (Running, ScriptedSession) {
    let session = ScriptedSession::new(&dir.join(task), TURNS);
    let mut command = fanout(&dir.join("data"));
    command
        .args(["proxy", "--db", db, "--task", task, "--transcript-dir"])
        .arg(dir.join(task).join("transcripts"))
        .arg("--")
        .args(&session.agent);
    (Running::start(command), session)
}

fn import(dir: &Path, db: &str) -> Running {
    let mut command = fanout(&dir.join("data"));
    command
        .args(["import", "--db", db, "--format", "json"])
        .arg(fixtures());
    Running::start(command)
}

/// Rows per table written by the import (the proxies' tasks left out).
async fn imported_rows(db: &str) -> Vec<i64> {
    let mut counts = Vec::new();
    for table in [
        "task_sessions",
        "task_session_turns",
        "task_session_messages",
        "task_session_subagents",
    ] {
        counts.push(count_rows(db, table, "WHERE task_id NOT IN ('alpha', 'beta')").await);
    }
    counts
}

/// Rounds of the race: when the three meet at activation (the backfill's read-then-
/// write transaction), a deferred `BEGIN` lost it in 3 runs of 5; three rounds make
/// a regression all but certain to show.
const ROUNDS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_and_an_import_lose_no_write_to_a_locked_file() {
    for _ in 0..ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        race(dir.path()).await;
    }
}

async fn race(dir: &Path) {
    let db = format!("sqlite://{}", dir.join("shared.db").display());
    // All three open the file at once: none of them finds it created.
    let (alpha, alpha_session) = proxy(dir, &db, "alpha");
    let (beta, beta_session) = proxy(dir, &db, "beta");
    let importing = import(dir, &db);
    let drive = |mut proxy: Running, session: ScriptedSession| {
        std::thread::spawn(move || {
            let mut client = Client::open(&mut proxy, &session, LIMIT);
            client.turns(&mut proxy, TURNS, LIMIT);
            proxy.finish(LIMIT)
        })
    };
    let (alpha, beta) = (drive(alpha, alpha_session), drive(beta, beta_session));
    let (imported, alpha, beta) = tokio::task::block_in_place(|| {
        (
            importing.finish(LIMIT),
            alpha.join().unwrap(),
            beta.join().unwrap(),
        )
    });
    for (who, done) in [("alpha", &alpha), ("beta", &beta), ("import", &imported)] {
        assert_eq!(done.code(), Some(0), "{who}: {}", done.stderr);
        assert!(
            !done.stderr.contains("database is locked"),
            "{who} met the lock: {}",
            done.stderr
        );
        assert!(
            !done.stderr.contains("not in the store") && !done.stderr.contains("refused"),
            "{who}: {}",
            done.stderr
        );
    }
    let summary: serde_json::Value = serde_json::from_slice(&imported.stdout).unwrap();
    assert_eq!(summary["errors"], 0, "{summary}");
    for task in ["alpha", "beta"] {
        assert_eq!(
            count_rows(
                &db,
                "task_session_subagents",
                &format!("WHERE task_id = '{task}' AND settled_at IS NOT NULL")
            )
            .await,
            TURNS as i64,
            "{task}"
        );
        assert_eq!(
            count_rows(
                &db,
                "task_session_turns",
                &format!("WHERE task_id = '{task}'")
            )
            .await,
            TURNS as i64,
            "{task}"
        );
    }
    // The import's rows are exactly those of the same import into a file of its own.
    let alone = format!("sqlite://{}", dir.join("alone.db").display());
    let by_itself = tokio::task::block_in_place(|| import(dir, &alone).finish(LIMIT));
    assert_eq!(by_itself.code(), Some(0), "{}", by_itself.stderr);
    let expected = imported_rows(&alone).await;
    assert!(expected.iter().all(|n| *n > 0), "{expected:?}");
    assert_eq!(imported_rows(&db).await, expected);
}
