//! Transcripts recorded from real agents run offline (opencode 1.18, codex-acp 2.6 with
//! and without `clientCapabilities.subagents`; see fixtures/real/README.md) import to
//! exactly the rows `fixtures/real/expected.json` lists, on SQLite and PostgreSQL, and a
//! second import changes nothing.

mod common;

use std::path::PathBuf;

use common::{as_store, dump_all, open};
use fanout_capture::import::{NoProgress, import_paths};
use fanout_capture::session_row_id;
use fanout_store::both_engines;
use fanout_store::testing::TestDb;
use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real")
}

both_engines!(real_agent_transcripts_import_to_their_expected_rows);

async fn real_agent_transcripts_import_to_their_expected_rows(db: TestDb) {
    let store = open(&db).await;
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("expected.json")).expect("expected.json"),
    )
    .expect("expected.json parses");
    let files = expected.as_object().expect("an object of files");
    assert!(files.len() >= 3, "opencode, codex and codex with subagents");
    for (file, rows) in files {
        let summary = import_paths(as_store(&store), &[fixtures().join(file)], &NoProgress).await;
        assert!(!summary.has_failures(), "{file}: {summary:#?}");
        for want in rows.as_array().expect("rows") {
            let text = |key: &str| want[key].as_str().unwrap_or_default().to_owned();
            let session = session_row_id(&text("agent_execution_id"), &text("acp_session_id"));
            let got = store.subagents_by_session(&session).await.expect("rows");
            assert_eq!(got.len(), 1, "{file}: one row per delegation: {got:#?}");
            let row = &got[0];
            let actual = common::subagent_row_json(row, &want["acp_session_id"]);
            for (column, value) in want.as_object().expect("a row object") {
                assert_eq!(&actual[column], value, "{file}: {column}");
            }
        }
    }
    let before = dump_all(&db.url).await;
    for file in files.keys() {
        let summary = import_paths(as_store(&store), &[fixtures().join(file)], &NoProgress).await;
        assert!(!summary.has_failures(), "{file}: {summary:#?}");
    }
    assert_eq!(dump_all(&db.url).await, before, "re-import changes nothing");
}
