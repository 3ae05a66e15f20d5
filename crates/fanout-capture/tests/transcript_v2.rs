//! Version 2 transcripts through import, on SQLite and PostgreSQL: every dialect's
//! real fixtures and the ACP examples, rewritten as version 2 (chunked anywhere, the
//! way the proxy reads them), import to exactly the rows their version 1 files give;
//! the store's mark makes a second import, or an import after a partial one, write
//! only what is missing; a record cut short at the end is not an error; a transcript
//! locked by a running proxy is left to it.

mod common;

use std::path::{Path, PathBuf};

use common::{as_store, dump_all, open};
use fanout_acp::Direction;
use fanout_capture::import::{ImportSummary, NoProgress, import_paths};
use fanout_capture::transcript::{Record, try_lock, write_record};
use fanout_store::testing::TestDb;
use fanout_store::{Timestamp, both_engines};
use serde_json::Value;

both_engines!(
    version_2_imports_to_the_rows_of_version_1,
    the_mark_makes_import_write_only_what_is_missing,
);

fn fixtures() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for dir in ["tests/fixtures/real", "../fanout-acp/tests/acp-examples"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        paths.extend(
            std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.to_string_lossy().ends_with(".transcript.jsonl")),
        );
    }
    paths.sort();
    assert!(paths.len() > 40, "{paths:?}");
    paths
}

/// `v1` rewritten as version 2: the same header (version 2), then each line with its
/// newline as raw bytes at its time, cut into records of at most `chunk` bytes (so a
/// line spans records, as the proxy's reads cut them).
fn to_v2(v1: &Path, dir: &Path, chunk: usize) -> PathBuf {
    let text = std::fs::read_to_string(v1).unwrap();
    let mut lines = text.lines();
    let mut header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    header["version"] = 2.into();
    let mut out = header.to_string().into_bytes();
    out.push(b'\n');
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let frame: Value = serde_json::from_str(line).unwrap();
        let direction = Direction::from_tag(frame["dir"].as_str().unwrap()).unwrap();
        let at = Timestamp::parse(frame["ts"].as_str().unwrap()).unwrap();
        let mut bytes = frame["line"].as_str().unwrap().as_bytes().to_vec();
        bytes.push(b'\n');
        for piece in bytes.chunks(chunk) {
            let record = Record::Data {
                direction,
                at,
                bytes: piece,
            };
            write_record(&mut out, &record).unwrap();
        }
    }
    // The folder in the name: both folders have an `opencode` and a `codex`.
    let folder = v1.parent().unwrap().file_name().unwrap().to_string_lossy();
    let name = v1.file_name().unwrap().to_string_lossy();
    let path = dir.join(format!(
        "{folder}-{}",
        name.replace(".transcript.jsonl", ".transcript")
    ));
    std::fs::write(&path, out).unwrap();
    path
}

fn clean(summary: &ImportSummary) {
    assert!(!summary.has_failures(), "{summary:#?}");
}

async fn version_2_imports_to_the_rows_of_version_1(db: TestDb) {
    let scratch = tempfile::tempdir().unwrap();
    let v1_store = open(&db).await;
    let paths = fixtures();
    clean(&import_paths(as_store(&v1_store), &paths, &NoProgress).await);
    let expected = dump_all(&db.url).await;
    assert!(expected.iter().any(|table| !table.is_empty()));
    for chunk in [7, 4096] {
        let dir = scratch.path().join(format!("v2-{chunk}"));
        std::fs::create_dir_all(&dir).unwrap();
        let v2: Vec<PathBuf> = paths.iter().map(|p| to_v2(p, &dir, chunk)).collect();
        let fresh = match db.url.starts_with("sqlite:") {
            true => TestDb::sqlite(),
            false => TestDb::postgres().await.expect("the server is there"),
        };
        let store = open(&fresh).await;
        let summary = import_paths(as_store(&store), std::slice::from_ref(&dir), &NoProgress).await;
        clean(&summary);
        let imported: std::collections::BTreeSet<&PathBuf> =
            summary.files.iter().map(|f| &f.path).collect();
        let missing: Vec<&PathBuf> = v2.iter().filter(|p| !imported.contains(p)).collect();
        assert!(missing.is_empty(), "not imported: {missing:?}");
        let got = dump_all(&fresh.url).await;
        for (table, (got, want)) in common::TABLES.iter().zip(got.iter().zip(&expected)) {
            let extra: Vec<_> = got.iter().filter(|r| !want.contains(r)).collect();
            let missing: Vec<_> = want.iter().filter(|r| !got.contains(r)).collect();
            assert!(
                extra.is_empty() && missing.is_empty(),
                "records of {chunk} bytes, {table}: not in version 1's rows {extra:#?}; missing {missing:#?}"
            );
        }
    }
}

async fn the_mark_makes_import_write_only_what_is_missing(db: TestDb) {
    let scratch = tempfile::tempdir().unwrap();
    let store = open(&db).await;
    let fixture = fixtures()
        .into_iter()
        .find(|p| p.ends_with("claude-0.101.0-parallel-subagents.transcript.jsonl"))
        .unwrap();
    let full = to_v2(&fixture, scratch.path(), 512);
    let bytes = std::fs::read(&full).unwrap();
    // The first half, cut in the middle of a record, as a killed proxy leaves it.
    let half = scratch.path().join("half").join(full.file_name().unwrap());
    std::fs::create_dir_all(half.parent().unwrap()).unwrap();
    std::fs::write(&half, &bytes[..bytes.len() / 2 + 100]).unwrap();
    let first = import_paths(as_store(&store), std::slice::from_ref(&half), &NoProgress).await;
    clean(&first);
    let applied_first = first.files[0].capture.frames_seen;
    assert!(applied_first > 0);

    let rest = import_paths(as_store(&store), std::slice::from_ref(&full), &NoProgress).await;
    clean(&rest);
    let applied_rest = rest.files[0].capture.frames_seen;
    assert!(applied_rest > 0, "the second half was written");

    let fresh = match db.url.starts_with("sqlite:") {
        true => TestDb::sqlite(),
        false => TestDb::postgres().await.expect("the server is there"),
    };
    let alone = open(&fresh).await;
    let whole = import_paths(as_store(&alone), std::slice::from_ref(&full), &NoProgress).await;
    clean(&whole);
    assert_eq!(
        dump_all(&db.url).await,
        dump_all(&fresh.url).await,
        "half then all: the rows of all at once"
    );
    // The second import did not start over: it replayed what the first had written.
    let total = whole.files[0].capture.frames_seen;
    assert!(
        applied_rest < total,
        "{applied_rest} of {total} lines applied again"
    );

    let before = dump_all(&db.url).await;
    let again = import_paths(as_store(&store), std::slice::from_ref(&full), &NoProgress).await;
    clean(&again);
    assert!(again.files[0].capture.frames_seen < total);
    assert_eq!(
        dump_all(&db.url).await,
        before,
        "a third import changes nothing"
    );

    // A proxy still writing it holds its lock: import leaves it alone.
    let held = std::fs::File::open(&full).unwrap();
    assert!(try_lock(&held).unwrap());
    let refused = import_paths(as_store(&store), std::slice::from_ref(&full), &NoProgress).await;
    assert_eq!(refused.failed_files.len(), 1, "{refused:#?}");
    assert!(
        refused.failed_files[0]
            .error
            .contains("a running `fanout proxy`"),
        "{refused:#?}"
    );
}
