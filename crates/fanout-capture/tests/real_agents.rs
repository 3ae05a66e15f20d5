//! Transcripts recorded from real agents run offline (fixtures/real/README.md: Claude
//! 0.23 and 0.101 with and without `clientCapabilities.subagents`, OpenCode, codex-acp
//! 1.x and 2.x, Qwen Code, Gemini CLI, Copilot CLI) import through
//! `fanout_capture::import` to exactly the rows each `<name>.expected.json` lists (written
//! by hand from the frames, placeholders resolved from the transcript by the rules of
//! `fanout_acp::fixtures`), on SQLite and PostgreSQL, and a second import changes nothing.

mod common;

use std::path::PathBuf;

use common::{as_store, dump_all, open};
use fanout_acp::fixtures::{Expected, Transcript, expected_files};
use fanout_capture::import::{NoProgress, import_paths};
use fanout_capture::testing::row_differences;
use fanout_store::both_engines;
use fanout_store::testing::TestDb;
use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real")
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
        let differences = row_differences(&store, &resolved.rows).await;
        assert!(
            differences.is_empty(),
            "{}:\n{}",
            path.display(),
            differences.join("\n")
        );
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
