//! fanout's own agent behind `fanout proxy`: its subagent calls (`_meta.fanout.subagent`
//! plus ACP-native `subagent_update`, spawn and fork in one turn) are captured as one row
//! per child, and `fanout import` of the proxy's transcript gives the same rows.

mod proxy_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use fanout_store::{SqlStore, SubagentRow};
use proxy_support::session::{self, agent_lines};
use proxy_support::{Running, fanout};
use serde_json::{Value, json};

/// The longest any step may take: a stuck agent or proxy fails the test, never hangs it.
const LIMIT: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Sends one request and waits (at most [`LIMIT`]) for its response.
fn request(proxy: &mut Running, id: u64, method: &str, params: Value) -> Value {
    session::request(proxy, id, method, params, LIMIT)
}

/// The `durationMs` the agent reported in the settling `_meta.fanout.subagent` of a call.
fn reported_duration_ms(seen: &[Value], tool_call_id: &str) -> Option<i64> {
    seen.iter()
        .map(|message| &message["params"]["update"])
        .filter(|update| update["toolCallId"] == tool_call_id)
        .filter_map(|update| update["_meta"]["fanout"]["subagent"]["durationMs"].as_i64())
        .next_back()
}

/// The subagent rows of the one captured session.
async fn rows(url: &str) -> Vec<SubagentRow> {
    let store = SqlStore::open(url).await.expect("open");
    let sessions = store
        .query_i64("SELECT COUNT(*) FROM task_sessions WHERE task_id = 'agent-capture'")
        .await
        .expect("count");
    assert_eq!(sessions, 1, "one ACP session captured under the task");
    let session = {
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect(url).await.expect("connect");
        sqlx::query_scalar::<_, String>("SELECT id FROM task_sessions")
            .fetch_one(&mut conn)
            .await
            .expect("session id")
    };
    store.subagents_by_session(&session).await.expect("rows")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_agent_subagents_are_captured_live_and_by_import() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().join("project");
    std::fs::create_dir_all(cwd.join("src")).unwrap();
    std::fs::write(cwd.join("README.md"), "# tinycalc\n").unwrap();
    std::fs::write(
        cwd.join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    )
    .unwrap();
    let live_db = format!("sqlite://{}", tmp.path().join("live.db").display());
    let transcripts = tmp.path().join("transcripts");
    let data = tmp.path().join("data");
    let exe = env!("CARGO_BIN_EXE_fanout");
    let scenario = repo().join("scenarios/subagent-mixed");

    let mut command = fanout(&data);
    command
        .args([
            "proxy",
            "--db",
            &live_db,
            "--task",
            "agent-capture",
            "--transcript-dir",
        ])
        .arg(&transcripts)
        .arg("--")
        .arg(exe)
        .args([
            "agent",
            "--provider",
            "replay",
            "--model",
            "fixture-model",
            "--scenario",
        ])
        .arg(&scenario)
        .arg("--sessions-root")
        .arg(tmp.path().join("sessions"));
    let mut proxy = Running::start(command);
    request(
        &mut proxy,
        0,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"subagents": {}}}),
    );
    let session = request(
        &mut proxy,
        1,
        "session/new",
        json!({"cwd": cwd, "mcpServers": []}),
    );
    let session_id = session["sessionId"]
        .as_str()
        .expect("a session id")
        .to_owned();
    let result = request(
        &mut proxy,
        2,
        "session/prompt",
        json!({"sessionId": session_id, "prompt": [{"type": "text", "text": "Check the sources against the README, with help."}]}),
    );
    assert_eq!(result["stopReason"], "end_turn");
    // Closes the proxy's stdin and waits for its exit, killing it after LIMIT.
    let done = proxy.finish(LIMIT);
    assert_eq!(done.code(), Some(0), "stderr: {}", done.stderr);
    // Every line the agent wrote, the ones after the last response included.
    let seen = agent_lines(&done.stdout);

    let live = rows(&live_db).await;
    assert_eq!(
        live.len(),
        2,
        "one row per child (spawn and fork): {live:#?}"
    );
    for row in &live {
        assert!(row.child_session_id.is_some(), "{row:#?}");
        assert_eq!(row.tool_status.as_deref(), Some("completed"), "{row:#?}");
        assert!(row.settled_at.is_some());
        assert_eq!(row.model.as_deref(), Some("fixture-model"));
        assert!(
            row.total_tokens.is_some_and(|n| n > 0),
            "tokens reported: {row:#?}"
        );
        // A replayed child usually takes 0 ms (stored as unreported, never as 0), but a
        // busy machine can make it 1 ms or more: the row holds what the agent reported.
        let reported = reported_duration_ms(&seen, &row.tool_call_id);
        assert!(reported.is_some(), "the agent reports durationMs: {row:#?}");
        assert_eq!(
            row.duration_ms,
            reported.filter(|&ms| ms > 0),
            "durationMs {reported:?} reported for {row:#?}"
        );
        assert_eq!(row.parent_tool_call_id, None);
    }

    // The proxy's transcript imports to the same rows in a fresh store.
    let imported_db = format!("sqlite://{}", tmp.path().join("imported.db").display());
    let mut import = fanout(&data);
    import
        .args(["import", "--db", &imported_db, "--format", "json"])
        .arg(&transcripts);
    let output = Running::start(import).finish(LIMIT);
    assert_eq!(output.code(), Some(0), "{}", output.stderr);
    let imported = rows(&imported_db).await;
    let strip = |rows: &[SubagentRow]| -> Vec<SubagentRow> {
        rows.iter()
            .cloned()
            .map(|mut r| {
                r.updated_at = r.observed_at;
                r
            })
            .collect()
    };
    assert_eq!(strip(&imported), strip(&live));
}
