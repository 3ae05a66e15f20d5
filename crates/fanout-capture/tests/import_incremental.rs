//! Incremental import (`import_files`, DESIGN 3.7) on both engines: an unchanged file
//! is not read, an appended one is read from its offset, a rewritten or shrunk one is
//! read again from the start, and each ends where a clean import ends.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{as_store, copy_tree, dump_all, files_ending, open};
use fanout_capture::import::{
    ImportSummary, KnownFiles, NoProgress, import_paths, import_paths_incremental,
};
use fanout_store::testing::TestDb;
use fanout_store::{SqlStore, both_engines};

const SESSION: &str = "3926d87d-23ed-4adf-b7c2-885c893803c5";

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/history/claude/claude-0.101.0-nested-subagents")
}

fn copy() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("history");
    copy_tree(&fixture(), &root);
    let log = files_ending(&root, &format!("{SESSION}.jsonl")).remove(0);
    (dir, root, log)
}

async fn incremental(store: &Arc<SqlStore>, root: &Path) -> ImportSummary {
    let known = KnownFiles::new(store.import_files().await.expect("import files"));
    let summary =
        import_paths_incremental(as_store(store), &[root.to_owned()], &known, &NoProgress).await;
    assert!(!summary.has_failures(), "{summary:#?}");
    summary
}

async fn clean(db: &TestDb) -> Vec<Vec<Vec<Option<String>>>> {
    let fresh = db.fresh_like().await;
    let store = open(&fresh).await;
    let summary = import_paths(as_store(&store), &[fixture()], &NoProgress).await;
    assert!(!summary.has_failures(), "{summary:#?}");
    dump_all(&fresh.url).await
}

both_engines!(
    an_unchanged_file_is_not_read,
    an_appended_file_is_read_from_its_offset,
    a_rewritten_or_shrunk_file_is_read_again_from_the_start,
);

/// Same size and modification time: the file is not opened. Its bytes are replaced by
/// garbage of the same length with the old mtime, and the import neither fails nor
/// changes anything: it never read them.
async fn an_unchanged_file_is_not_read(db: TestDb) {
    let (_dir, root, log) = copy();
    let store = open(&db).await;
    incremental(&store, &root).await;
    let before = dump_all(&db.url).await;
    let mtime = std::fs::metadata(&log).unwrap().modified().unwrap();
    let len = std::fs::metadata(&log).unwrap().len() as usize;
    std::fs::write(&log, vec![b'#'; len]).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&log)
        .unwrap()
        .set_modified(mtime)
        .unwrap();

    let again = incremental(&store, &root).await;
    assert!(again.files.is_empty(), "{again:#?}");
    assert_eq!(again.places[0].unchanged_units, 1);
    assert_eq!(again.places[0].unchanged_files, 3);
    assert_eq!(dump_all(&db.url).await, before);
}

/// A log that grew: only the lines after the stored offset are new (counted, written);
/// the result equals a clean import of the whole log.
async fn an_appended_file_is_read_from_its_offset(db: TestDb) {
    let (_dir, root, log) = copy();
    let full = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    let head = lines[..20].join("\n") + "\n";
    std::fs::write(&log, &head).unwrap();
    let store = open(&db).await;
    incremental(&store, &root).await;
    let state = store.import_files().await.unwrap();
    let stored = state
        .iter()
        .find(|f| f.path == log.to_string_lossy())
        .expect("the log's state");
    assert_eq!(stored.offset as usize, head.len());

    std::fs::write(&log, &full).unwrap();
    let again = incremental(&store, &root).await;
    assert_eq!(again.files.len(), 1);
    assert_eq!(
        again.files[0].frames as usize,
        lines.len() - 20,
        "only the appended lines are new"
    );
    assert_eq!(dump_all(&db.url).await, clean(&db).await);
}

/// A log whose head changed (same records, reformatted first line), or that shrank, is
/// read again from its start; every write is a merge, so nothing changes.
async fn a_rewritten_or_shrunk_file_is_read_again_from_the_start(db: TestDb) {
    let (_dir, root, log) = copy();
    let store = open(&db).await;
    incremental(&store, &root).await;
    let before = dump_all(&db.url).await;
    let full = std::fs::read_to_string(&log).unwrap();
    let count = full.lines().count();

    let reformatted = full.replacen("{\"", "{ \"", 1);
    assert_ne!(reformatted, full);
    std::fs::write(&log, &reformatted).unwrap();
    let again = incremental(&store, &root).await;
    assert_eq!(
        again.files[0].frames as usize, count,
        "read again from the start"
    );
    assert_eq!(dump_all(&db.url).await, before);

    let shrunk: String = full
        .lines()
        .take(count - 5)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&log, &shrunk).unwrap();
    let again = incremental(&store, &root).await;
    assert_eq!(
        again.files[0].frames as usize,
        count - 5,
        "read again from the start"
    );
    assert_eq!(
        dump_all(&db.url).await,
        before,
        "nothing imported is taken back"
    );
}
