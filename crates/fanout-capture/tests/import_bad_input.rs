//! Bad native history (issue 11's list), on both engines: each case is named as
//! `file:line: reason` (or the file is named and passed over), nothing panics, the rest
//! imports, and nothing already imported changes.

mod common;

use std::path::{Path, PathBuf};

use common::{as_store, copy_tree, dump_all, files_ending, open};
use fanout_capture::import::{
    ImportSummary, KnownFiles, NoProgress, import_paths, import_paths_incremental,
};
use fanout_capture::session_row_id;
use fanout_store::testing::TestDb;
use fanout_store::{SqlStore, UsageRow, both_engines};

const NESTED: &str = "claude/claude-0.101.0-nested-subagents";
const NESTED_SESSION: &str = "3926d87d-23ed-4adf-b7c2-885c893803c5";

fn history(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/history")
        .join(name)
}

/// A private copy of a fixture history.
fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("history");
    copy_tree(&history(name), &root);
    (dir, root)
}

fn main_log(root: &Path) -> PathBuf {
    files_ending(root, &format!("{NESTED_SESSION}.jsonl")).remove(0)
}

fn notes(summary: &ImportSummary) -> Vec<String> {
    summary
        .files
        .iter()
        .flat_map(|f| f.notes.iter().map(ToString::to_string))
        .collect()
}

async fn ledger(store: &SqlStore, acp_session_id: &str) -> Vec<UsageRow> {
    store
        .usage_rows(&session_row_id("unknown", acp_session_id))
        .await
        .expect("usage rows")
}

/// The database a clean import of `root` leaves, on a fresh store of `db`'s engine.
async fn clean_import(db: &TestDb, root: &Path) -> (TestDb, Vec<Vec<Vec<Option<String>>>>) {
    let fresh = db.fresh_like().await;
    let store = open(&fresh).await;
    let summary = import_paths(as_store(&store), &[root.to_owned()], &NoProgress).await;
    assert!(!summary.has_failures(), "{summary:#?}");
    let dump = dump_all(&fresh.url).await;
    (fresh, dump)
}

async fn incremental(store: &std::sync::Arc<SqlStore>, root: &Path) -> ImportSummary {
    let known = KnownFiles::new(store.import_files().await.expect("import files"));
    import_paths_incremental(as_store(store), &[root.to_owned()], &known, &NoProgress).await
}

both_engines!(
    a_truncated_last_line_waits_for_the_next_import,
    a_meta_file_that_is_not_json_is_named_and_the_child_still_links,
    a_child_log_without_its_session_is_named_and_nothing_changes,
    an_agent_id_repeating_across_sessions_stays_in_each_session,
    a_usage_figure_that_is_a_string_is_named_and_changes_nothing_imported,
    a_rollout_with_an_unknown_record_type_is_named_and_the_rest_imports,
);

/// A session still being written: its incomplete last line is a note, left unread;
/// once complete, the next import reads it and the database equals a clean import.
async fn a_truncated_last_line_waits_for_the_next_import(db: TestDb) {
    let (_dir, root) = copy_of(NESTED);
    let log = main_log(&root);
    let full = std::fs::read(&log).unwrap();
    let last_start = full[..full.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    let lines = full[..last_start].iter().filter(|&&b| b == b'\n').count() as u64;
    std::fs::write(&log, &full[..last_start + (full.len() - last_start) / 2]).unwrap();

    let store = open(&db).await;
    let summary = import_paths(as_store(&store), std::slice::from_ref(&root), &NoProgress).await;
    assert!(!summary.has_failures(), "{summary:#?}");
    let want = format!("{}:{}: incomplete last line", log.display(), lines + 1);
    assert!(
        notes(&summary).iter().any(|n| n.starts_with(&want)),
        "{:?}",
        notes(&summary)
    );
    let partial = ledger(&store, NESTED_SESSION).await;

    std::fs::write(&log, &full).unwrap();
    let again = incremental(&store, &root).await;
    assert!(!again.has_failures(), "{again:#?}");
    assert_eq!(again.files[0].frames, 1, "only the completed line is new");
    let (_clean_db, clean) = clean_import(&db, &root).await;
    assert_eq!(dump_all(&db.url).await, clean, "resumed = clean import");
    assert!(ledger(&store, NESTED_SESSION).await.len() >= partial.len());
}

/// `meta.json` is optional: one that is not JSON is named, and the child links by the
/// `toolUseResult.agentId` of its parent's log instead, to the same rows.
async fn a_meta_file_that_is_not_json_is_named_and_the_child_still_links(db: TestDb) {
    let (_dir, root) = copy_of(NESTED);
    let (_clean_db, clean) = clean_import(&db, &root).await;
    let meta = files_ending(&root, "agent-aef817ece77574ff3.meta.json").remove(0);
    std::fs::write(&meta, b"{\"agentType\": \"general-purpose\", oops").unwrap();

    let store = open(&db).await;
    let summary = import_paths(as_store(&store), std::slice::from_ref(&root), &NoProgress).await;
    assert!(!summary.has_failures(), "{summary:#?}");
    let want = format!("{}:1: not JSON", meta.display());
    assert!(
        notes(&summary).iter().any(|n| n.starts_with(&want)),
        "{:?}",
        notes(&summary)
    );
    assert_eq!(
        dump_all(&db.url).await,
        clean,
        "the same rows as with the meta file"
    );
}

/// A subagent log whose session log is missing cannot know its spawning call: the file
/// is named and passed over, and what was imported before stays as it was.
async fn a_child_log_without_its_session_is_named_and_nothing_changes(db: TestDb) {
    let store = open(&db).await;
    let codex = history("codex/v1-single/sessions");
    let first = import_paths(as_store(&store), &[codex], &NoProgress).await;
    assert!(!first.has_failures(), "{first:#?}");
    let before = dump_all(&db.url).await;

    let (_dir, root) = copy_of(NESTED);
    std::fs::remove_file(main_log(&root)).unwrap();
    let summary = import_paths(as_store(&store), std::slice::from_ref(&root), &NoProgress).await;
    assert!(!summary.has_failures(), "{summary:#?}");
    assert_eq!(
        summary.skipped_files.len(),
        2,
        "{:#?}",
        summary.skipped_files
    );
    for skipped in &summary.skipped_files {
        assert!(
            skipped.reason.contains("session log") && skipped.reason.contains("is missing"),
            "{skipped:?}"
        );
    }
    assert!(summary.files.is_empty());
    assert_eq!(dump_all(&db.url).await, before);
}

/// Two sessions whose children have the same agent ids (and response ids): each child
/// links within its own session, keyed by (session, agentId).
async fn an_agent_id_repeating_across_sessions_stays_in_each_session(db: TestDb) {
    let (_dir, root) = copy_of(NESTED);
    let other = "99999999-23ed-4adf-b7c2-885c893803c5";
    let project = main_log(&root).parent().unwrap().to_owned();
    let second = root.join("projects/second-project");
    copy_tree(&project, &second);
    std::fs::rename(second.join(NESTED_SESSION), second.join(other)).unwrap();
    std::fs::rename(
        second.join(format!("{NESTED_SESSION}.jsonl")),
        second.join(format!("{other}.jsonl")),
    )
    .unwrap();
    for file in files_ending(&second, ".jsonl") {
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, text.replace(NESTED_SESSION, other)).unwrap();
    }

    let store = open(&db).await;
    let summary = import_paths(as_store(&store), std::slice::from_ref(&root), &NoProgress).await;
    assert!(!summary.has_failures(), "{summary:#?}");
    let strip = |rows: Vec<UsageRow>| -> Vec<_> {
        rows.into_iter()
            .map(|r| (r.response_id, r.subagent_tool_call_id, r.model, r.tokens))
            .collect()
    };
    let first = strip(ledger(&store, NESTED_SESSION).await);
    assert_eq!(first.len(), 6);
    assert_eq!(first, strip(ledger(&store, other).await));
    for session in [NESTED_SESSION, other] {
        let rows = store
            .subagents_by_session(&session_row_id("unknown", session))
            .await
            .unwrap();
        let children: Vec<_> = rows
            .iter()
            .map(|r| (r.tool_call_id.clone(), r.child_session_id.clone()))
            .collect();
        assert_eq!(
            children,
            vec![
                (
                    "toolu_01FANOUTAGENTA".to_owned(),
                    Some("aef817ece77574ff3".to_owned())
                ),
                (
                    "toolu_01FANOUTAGENTNESTED".to_owned(),
                    Some("a3147f67455d518a7".to_owned())
                ),
            ],
            "{session}"
        );
    }
}

/// A usage figure of the wrong type is named and read as not reported; appended to an
/// imported log for a response already in the ledger, it changes nothing (a NULL never
/// replaces).
async fn a_usage_figure_that_is_a_string_is_named_and_changes_nothing_imported(db: TestDb) {
    let (_dir, root) = copy_of(NESTED);
    let store = open(&db).await;
    let first = import_paths(as_store(&store), std::slice::from_ref(&root), &NoProgress).await;
    assert!(!first.has_failures(), "{first:#?}");
    let before = ledger(&store, NESTED_SESSION).await;

    let log = main_log(&root);
    let text = std::fs::read_to_string(&log).unwrap();
    let last_response = text
        .lines()
        .rfind(|l| l.contains("\"type\":\"assistant\"") && l.contains("msg_01FANOUTMAIN"))
        .unwrap()
        .to_owned();
    let bad = last_response.replacen("\"input_tokens\":", "\"input_tokens\":\"many\",\"x\":", 1);
    assert_ne!(bad, last_response);
    std::fs::write(&log, format!("{text}{bad}\n")).unwrap();
    let line = text.lines().count() + 1;

    let again = incremental(&store, &root).await;
    assert!(!again.has_failures(), "{again:#?}");
    let want = format!("{}:{line}: usage of msg_01FANOUTMAIN", log.display());
    let notes = notes(&again);
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with(&want) && n.contains("input_tokens not a number")),
        "{notes:?}"
    );
    let after = ledger(&store, NESTED_SESSION).await;
    let figures = |rows: &[UsageRow]| -> Vec<_> {
        rows.iter()
            .map(|r| {
                (
                    r.response_id.clone(),
                    r.subagent_tool_call_id.clone(),
                    r.model.clone(),
                    r.tokens,
                )
            })
            .collect()
    };
    assert_eq!(
        figures(&after),
        figures(&before),
        "nothing already imported changes"
    );
}

/// A record type Codex may add later is named and passed over; the rest imports to the
/// same rows as without it.
async fn a_rollout_with_an_unknown_record_type_is_named_and_the_rest_imports(db: TestDb) {
    let (_dir, root) = copy_of("codex/v1-single/sessions");
    let (_clean_db, clean) = clean_import(&db, &root).await;
    let rollout = files_ending(&root, "01a230f5-5be3-7820-980b-e495c9b1049c.jsonl").remove(0);
    let text = std::fs::read_to_string(&rollout).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(
        3,
        r#"{"timestamp":"2026-12-01T09:35:16.000Z","type":"brand_new_record","payload":{"x":1}}"#,
    );
    std::fs::write(&rollout, lines.join("\n") + "\n").unwrap();

    let store = open(&db).await;
    let summary = import_paths(as_store(&store), std::slice::from_ref(&root), &NoProgress).await;
    assert!(!summary.has_failures(), "{summary:#?}");
    let want = format!(
        "{}:4: unknown record type \"brand_new_record\"",
        rollout.display()
    );
    assert!(
        notes(&summary).iter().any(|n| n.starts_with(&want)),
        "{:?}",
        notes(&summary)
    );
    assert_eq!(dump_all(&db.url).await, clean);
}
