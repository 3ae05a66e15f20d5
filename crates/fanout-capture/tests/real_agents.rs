//! Transcripts recorded from real agents run offline (fixtures/real/README.md: Claude
//! 0.23 and 0.101 with and without `clientCapabilities.subagents`, OpenCode, codex-acp
//! 1.x and 2.x, Qwen Code, Gemini CLI, Copilot CLI) import through
//! `fanout_capture::import` to exactly the rows each `<name>.expected.json` lists (written
//! by hand from the frames, placeholders resolved from the transcript by the rules of
//! `fanout_acp::fixtures`), on SQLite and PostgreSQL, and a second import changes nothing.

mod common;

use std::path::{Path, PathBuf};

use common::{as_store, dump_all, open};
use fanout_acp::fixtures::{Expected, Transcript, expected_files};
use fanout_capture::import::{NoProgress, import_paths};
use fanout_capture::{session_row_id, turn_row_id};
use fanout_store::testing::TestDb;
use fanout_store::{SqlStore, SubagentRow, both_engines};
use serde_json::{Map, Value, json};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real")
}

/// A stored row in the shape of an expected one.
fn row_json(row: &SubagentRow, acp_session_id: &Value, turn_request_id: &Value) -> Value {
    json!({
        "acp_session_id": acp_session_id,
        "task_id": row.task_id,
        "agent_execution_id": row.agent_execution_id,
        "turn_request_id": turn_request_id,
        "tool_call_id": row.tool_call_id,
        "parent_tool_call_id": row.parent_tool_call_id,
        "subagent_type": row.subagent_type,
        "description": row.description,
        "agent_id": row.agent_id,
        "child_session_id": row.child_session_id,
        "model": row.model,
        "agent_status": row.agent_status,
        "tool_status": row.tool_status,
        "settled": row.settled_at.is_some(),
        "is_async": i64::from(row.is_async),
        "total_tokens": row.total_tokens,
        "tool_use_count": row.tool_use_count,
        "duration_ms": row.duration_ms,
        "source": row.source.as_str(),
    })
}

/// Every row of the fixture's session equals an expected row, and there are no others.
async fn assert_rows(store: &SqlStore, path: &Path, rows: &[Map<String, Value>]) {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let first = rows.first().unwrap_or_else(|| panic!("{name}: no rows"));
    let text =
        |row: &Map<String, Value>, key: &str| row[key].as_str().unwrap_or_default().to_owned();
    let session = session_row_id(
        &text(first, "agent_execution_id"),
        &text(first, "acp_session_id"),
    );
    let stored = store.subagents_by_session(&session).await.expect("rows");
    let mut got: Vec<Value> = Vec::new();
    for row in &stored {
        // The turn the row is in, as the expected files name it: the prompt's request id.
        let turn = rows
            .iter()
            .map(|want| &want["turn_request_id"])
            .find(|request| {
                row.turn_id.as_deref() == Some(&turn_row_id(&session, &request.to_string()))
            })
            .cloned()
            .unwrap_or(Value::Null);
        got.push(row_json(row, &first["acp_session_id"], &turn));
    }
    let want: Vec<Value> = rows.iter().cloned().map(Value::Object).collect();
    let ids = |rows: &[Value]| -> Vec<String> {
        let mut ids: Vec<String> = rows.iter().map(|r| r["tool_call_id"].to_string()).collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&got), ids(&want), "{name}: the rows");
    for want in &want {
        let got = got
            .iter()
            .find(|row| row["tool_call_id"] == want["tool_call_id"])
            .expect("matched above");
        for (column, value) in want.as_object().expect("an object") {
            assert_eq!(
                &got[column], value,
                "{name} {}: {column}",
                want["tool_call_id"]
            );
        }
    }
}

both_engines!(real_agent_transcripts_import_to_their_expected_rows);

async fn real_agent_transcripts_import_to_their_expected_rows(db: TestDb) {
    let store = open(&db).await;
    let files = expected_files(&fixtures()).expect("the fixtures folder");
    assert!(files.len() >= 45, "every recorded fixture: {}", files.len());
    let mut transcripts = Vec::new();
    let mut total = 0;
    for path in &files {
        let expected = Expected::load(path).expect("expected file");
        let transcript_path = expected.transcript_path().expect("its transcript");
        let transcript = Transcript::read(&transcript_path).expect("transcript");
        let resolved = expected
            .resolve(&transcript, None)
            .expect("placeholders resolve");
        assert_eq!(
            Value::Object(resolved.ids.clone()),
            Value::Object(expected.recorded()),
            "{}: the rules find the recorded ids",
            path.display()
        );
        let summary = import_paths(
            as_store(&store),
            std::slice::from_ref(&transcript_path),
            &NoProgress,
        )
        .await;
        assert!(!summary.has_failures(), "{}: {summary:#?}", path.display());
        let anomalies: u64 = summary
            .files
            .iter()
            .map(|f| f.capture.dialect_anomalies)
            .sum();
        assert_eq!(
            anomalies,
            0,
            "{}: a real agent's traffic is no anomaly",
            path.display()
        );
        assert_rows(&store, path, &resolved.rows).await;
        total += resolved.rows.len();
        transcripts.push(transcript_path);
    }
    let counts = store.counts().await.expect("counts");
    assert_eq!(
        counts.subagents,
        i64::try_from(total).unwrap(),
        "no row beyond the expected ones"
    );
    let before = dump_all(&db.url).await;
    let summary = import_paths(as_store(&store), &transcripts, &NoProgress).await;
    assert!(!summary.has_failures(), "{summary:#?}");
    assert_eq!(dump_all(&db.url).await, before, "re-import changes nothing");
}
