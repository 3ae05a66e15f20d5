//! Killed mid-import (DESIGN 3.7, 7): a real `fanout import` process is sent SIGKILL at
//! several points of a generated Claude history, then run again to its end; the
//! database then equals a clean import of the same folder, and one more run reads
//! nothing. On SQLite and PostgreSQL.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use fanout_store::testing::TestDb;
use fanout_store::{SqlStore, SubagentRow, TableCounts, Timestamp, UsageRow};

fn fanout() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fanout"));
    command
        .env_remove("FANOUT_DATABASE_URL")
        .env_remove("FANOUT_LOG");
    command
}

fn import(url: &str, history: &Path) -> Command {
    let mut command = fanout();
    command
        .args(["import", "--format", "json", "--db", url])
        .arg(history);
    command
}

/// Everything the import wrote, read back through the store: table counts, and per
/// session its ledger and subagent rows (a row's `updated_at` is the wall-clock time of
/// its last write, the one column a re-run may move).
type Snapshot = (TableCounts, Vec<(Vec<UsageRow>, Vec<SubagentRow>)>);

async fn snapshot(url: &str, sessions: &[String]) -> Snapshot {
    let store = SqlStore::open(url).await.expect("open");
    let mut per_session = Vec::new();
    for session in sessions {
        let id = fanout_capture::session_row_id("unknown", session);
        let usage = store.usage_rows(&id).await.expect("usage rows");
        let mut rows = store.subagents_by_session(&id).await.expect("rows");
        for row in &mut rows {
            row.updated_at = Timestamp::from_micros(0).expect("epoch");
        }
        per_session.push((usage, rows));
    }
    let counts = store.counts().await.expect("counts");
    store.close().await;
    (counts, per_session)
}

/// The session ids of a generated history (`projects/<project>/<id>.jsonl`).
fn sessions_of(history: &Path) -> Vec<String> {
    let mut ids = Vec::new();
    for project in std::fs::read_dir(history.join("projects"))
        .expect("projects")
        .flatten()
    {
        for file in std::fs::read_dir(project.path())
            .expect("project")
            .flatten()
        {
            let name = file.file_name().to_string_lossy().into_owned();
            if let Some(id) = name.strip_suffix(".jsonl") {
                ids.push(id.to_owned());
            }
        }
    }
    ids.sort();
    ids
}

fn generate(dir: &Path) -> PathBuf {
    let history = dir.join("claude");
    let status = fanout()
        .args([
            "gen-claude-history",
            "--bytes",
            "16000000",
            "--seed",
            "7",
            "--out",
        ])
        .arg(&history)
        .stdout(Stdio::null())
        .status()
        .expect("run the generator");
    assert!(status.success());
    history
}

async fn killed_at_several_points_then_resumed_equals_a_clean_import(
    killed: TestDb,
    clean: TestDb,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let history = generate(dir.path());
    let sessions = sessions_of(&history);
    assert!(sessions.len() > 3, "{sessions:?}");

    let status = import(&clean.url, &history)
        .stdout(Stdio::null())
        .status()
        .expect("clean import");
    assert!(status.success());
    let want = snapshot(&clean.url, &sessions).await;
    assert!(want.0.usage > 0, "{:?}", want.0);

    let mut kills = 0;
    for delay_ms in [25, 50, 100, 150, 250, 400, 700] {
        let mut child = import(&killed.url, &history)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn fanout import");
        std::thread::sleep(Duration::from_millis(delay_ms));
        // `Child::kill` is SIGKILL on Unix: no handler, no cleanup.
        if child.try_wait().expect("poll").is_none() {
            child.kill().expect("SIGKILL");
            kills += 1;
        }
        child.wait().expect("reap");
    }
    assert!(
        kills >= 2,
        "at least two runs were killed mid-import ({kills})"
    );

    let output = import(&killed.url, &history).output().expect("resume");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        snapshot(&killed.url, &sessions).await,
        want,
        "resumed = clean import"
    );

    let again = import(&killed.url, &history).output().expect("again");
    let summary: serde_json::Value = serde_json::from_slice(&again.stdout).expect("JSON summary");
    assert_eq!(summary["files"], 0, "nothing left to read: {summary}");
    assert_eq!(snapshot(&killed.url, &sessions).await, want);
}

#[test]
fn sqlite() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(killed_at_several_points_then_resumed_equals_a_clean_import(
        TestDb::sqlite(),
        TestDb::sqlite(),
    ));
}

#[test]
fn postgres() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let (Some(killed), Some(clean)) = (TestDb::postgres().await, TestDb::postgres().await)
        else {
            return;
        };
        killed_at_several_points_then_resumed_equals_a_clean_import(killed, clean).await;
    });
}
