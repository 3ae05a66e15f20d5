//! Real histories (Claude Code 2.1.83 and 2.1.318 session folders, Codex 0.166 rollouts,
//! recorded offline; see fixtures/real/README.md and fixtures/history/codex/README.md)
//! import to exactly the rows their hand-written expectations list, on SQLite and
//! PostgreSQL, and a second import changes nothing and reads nothing.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{as_store, dump_all, open, text_rows};
use fanout_capture::import::{KnownFiles, NoProgress, import_paths, import_paths_incremental};
use fanout_capture::testing::subagent_row_json;
use fanout_capture::{session_row_id, turn_row_id};
use fanout_store::testing::TestDb;
use fanout_store::{SqlStore, UsageRow, both_engines};
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("fixture JSON")
}

/// A ledger row as the expectations spell it.
fn usage_json(row: &UsageRow, acp_session_id: &str) -> Value {
    json!({
        "acp_session_id": acp_session_id,
        "response_id": row.response_id,
        "model": row.model,
        "input_tokens": row.tokens.input_tokens,
        "output_tokens": row.tokens.output_tokens,
        "cache_creation_tokens": row.tokens.cache_creation_tokens,
        "cache_read_tokens": row.tokens.cache_read_tokens,
        "reasoning_tokens": row.tokens.reasoning_tokens,
        "subagent_tool_call_id": row.subagent_tool_call_id,
        "source": row.source,
    })
}

/// The expected value with every `"$NAME"` replaced by `ids.NAME.recorded`.
fn resolve(value: &Value, ids: &Value) -> Value {
    match value {
        Value::String(s) if s.starts_with('$') => ids[&s[1..]]["recorded"].clone(),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), resolve(v, ids)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Every ledger row of the session, keyed by response id, in the expectations' fields.
async fn ledger(store: &SqlStore, acp_session_id: &str) -> BTreeMap<String, Value> {
    let session = session_row_id("unknown", acp_session_id);
    store
        .usage_rows(&session)
        .await
        .expect("usage rows")
        .iter()
        .map(|row| (row.response_id.clone(), usage_json(row, acp_session_id)))
        .collect()
}

async fn reimport_changes_nothing_and_reads_nothing(
    db: &TestDb,
    store: &Arc<SqlStore>,
    root: &Path,
) {
    let before = dump_all(&db.url).await;
    let known = KnownFiles::new(store.import_files().await.expect("import files"));
    let again =
        import_paths_incremental(as_store(store), &[root.to_owned()], &known, &NoProgress).await;
    assert!(!again.has_failures(), "{again:#?}");
    assert!(
        again.files.is_empty(),
        "nothing changed, nothing read: {:?}",
        again.files.iter().map(|f| &f.path).collect::<Vec<_>>()
    );
    assert!(again.places[0].unchanged_units > 0);
    let full = import_paths(as_store(store), &[root.to_owned()], &NoProgress).await;
    assert!(!full.has_failures(), "{full:#?}");
    assert_eq!(dump_all(&db.url).await, before, "re-import changes nothing");
}

both_engines!(
    claude_histories_write_their_expected_usage,
    codex_rollouts_write_their_expected_rows
);

/// Every Claude fixture: the ledger holds exactly the expected responses, figures and
/// attributions (failed requests and side requests leave nothing).
async fn claude_histories_write_their_expected_usage(db: TestDb) {
    let real = fixtures().join("real");
    let mut checked = 0;
    let mut names: Vec<PathBuf> = std::fs::read_dir(&real)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.starts_with("claude-") && name.ends_with(".expected.json")
        })
        .collect();
    names.sort();
    for path in names {
        let expected = read_json(&path);
        let fresh = db.fresh_like().await;
        let store = open(&fresh).await;
        let history = real.join(expected["history"].as_str().expect("history"));
        let summary = import_paths(
            as_store(&store),
            std::slice::from_ref(&history),
            &NoProgress,
        )
        .await;
        assert!(!summary.has_failures(), "{}: {summary:#?}", path.display());
        let ids = &expected["ids"];
        let session = ids["SESSION"]["recorded"].as_str().unwrap();
        let want: BTreeMap<String, Value> = expected["usage"]
            .as_array()
            .expect("usage")
            .iter()
            .map(|u| {
                let u = resolve(u, ids);
                (u["response_id"].as_str().unwrap().to_owned(), u)
            })
            .collect();
        assert_eq!(ledger(&store, session).await, want, "{}", path.display());
        checked += 1;
        if checked == 1 {
            reimport_changes_nothing_and_reads_nothing(&fresh, &store, &history).await;
        }
    }
    assert_eq!(checked, 21, "every Claude recording");
}

/// A timestamp column in the canonical text form on either engine.
fn timestamp_text(url: &str, column: &str) -> String {
    if url.starts_with("sqlite:") {
        column.to_owned()
    } else {
        format!("to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")
    }
}

/// The expectation's usage entry in the ledger's disjoint figures (docs/data-contract.md,
/// "What each figure means"): the README lists the rollout's figures as recorded, where
/// OpenAI's `input_tokens` includes the cached input and `output_tokens` the reasoning.
fn disjoint(recorded: &Value) -> Value {
    let n = |k: &str| recorded[k].as_i64().expect(k);
    let mut u = recorded.clone();
    let map = u.as_object_mut().unwrap();
    map.remove("thread_id");
    map.insert(
        "input_tokens".into(),
        json!(n("input_tokens") - n("cache_read_tokens") - n("cache_creation_tokens")),
    );
    map.insert(
        "output_tokens".into(),
        json!(n("output_tokens") - n("reasoning_tokens")),
    );
    u
}

/// Every Codex scenario: its session, turn, one subagent row per spawn (child linked,
/// model, duration, statuses) and one ledger row per response, attributed to the spawn
/// whose thread made it.
async fn codex_rollouts_write_their_expected_rows(db: TestDb) {
    let base = fixtures().join("history/codex");
    for scenario in ["v1-single", "v1-parallel", "v2-single", "v2-parallel"] {
        let expected = read_json(&base.join(scenario).join("expected.json"));
        let fresh = db.fresh_like().await;
        let store = open(&fresh).await;
        let root = base.join(scenario).join("sessions");
        let summary =
            import_paths(as_store(&store), std::slice::from_ref(&root), &NoProgress).await;
        assert!(!summary.has_failures(), "{scenario}: {summary:#?}");
        for want in expected["sessions"].as_array().unwrap() {
            let acp = want["acp_session_id"].as_str().unwrap();
            let row = session_row_id("unknown", acp);
            let got = text_rows(
                &fresh.url,
                &format!(
                    "SELECT task_id, cwd, agent_execution_id, {} FROM task_sessions WHERE id = '{row}'",
                    timestamp_text(&fresh.url, "started_at")
                ),
            )
            .await;
            assert_eq!(
                got,
                vec![vec![
                    want["task_id"].as_str().map(str::to_owned),
                    want["cwd"].as_str().map(str::to_owned),
                    Some("unknown".to_owned()),
                    want["started_at"].as_str().map(str::to_owned),
                ]],
                "{scenario} session"
            );
        }
        for want in expected["turns"].as_array().unwrap() {
            let session = session_row_id("unknown", want["acp_session_id"].as_str().unwrap());
            let turn = turn_row_id(&session, want["codex_turn_id"].as_str().unwrap());
            let got = text_rows(
                &fresh.url,
                &format!(
                    "SELECT {}, {}, stop_reason FROM task_session_turns WHERE id = '{turn}'",
                    timestamp_text(&fresh.url, "started_at"),
                    timestamp_text(&fresh.url, "completed_at")
                ),
            )
            .await;
            let text = |k: &str| want[k].as_str().map(str::to_owned);
            assert_eq!(
                got,
                vec![vec![
                    text("started_at"),
                    text("completed_at"),
                    text("stop_reason")
                ]],
                "{scenario} turn"
            );
        }
        let mut rows = Vec::new();
        for want in expected["sessions"].as_array().unwrap() {
            let acp = want["acp_session_id"].as_str().unwrap();
            let session = session_row_id("unknown", acp);
            for row in store.subagents_by_session(&session).await.expect("rows") {
                let mut got = subagent_row_json(&row, &json!(acp), Value::Null);
                let map = got.as_object_mut().unwrap();
                map.remove("turn_request_id");
                map.remove("task_id");
                map.remove("agent_execution_id");
                rows.push(got);
            }
        }
        rows.sort_by_key(|r| r["tool_call_id"].as_str().unwrap_or_default().to_owned());
        let mut want_rows = expected["rows"].as_array().unwrap().clone();
        want_rows.sort_by_key(|r| r["tool_call_id"].as_str().unwrap_or_default().to_owned());
        assert_eq!(rows, want_rows, "{scenario} subagent rows");
        let want_usage: BTreeMap<String, Value> = expected["usage"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| (u["response_id"].as_str().unwrap().to_owned(), disjoint(u)))
            .collect();
        let acp = expected["sessions"][0]["acp_session_id"].as_str().unwrap();
        assert_eq!(ledger(&store, acp).await, want_usage, "{scenario} usage");
        if scenario == "v2-parallel" {
            reimport_changes_nothing_and_reads_nothing(&fresh, &store, &root).await;
        }
    }
}
