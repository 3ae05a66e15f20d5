//! `fanout import` end to end: the real binary, a real SQLite file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fanout_store::testing::copy_tree;
use serde_json::Value;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fanout-acp/tests/acp-examples")
}

fn fanout_import(db: &Path, args: &[&Path], json: bool) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fanout"));
    command
        .env_remove("FANOUT_DATABASE_URL")
        .env_remove("FANOUT_LOG")
        .arg("import")
        .arg("--db")
        .arg(format!("sqlite://{}", db.display()));
    if json {
        command.args(["--format", "json"]);
    }
    command.args(args).output().expect("run fanout")
}

/// Row counts per table of the SQLite file, read with the store itself.
fn table_counts(db: &Path) -> fanout_store::TableCounts {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let url = format!("sqlite://{}", db.display());
        let store = fanout_store::SqlStore::open(&url).await.expect("open");
        let counts = store.counts().await.expect("counts");
        store.close().await;
        counts
    })
}

fn summary(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "JSON summary ({e}); stdout: {}; stderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[test]
fn json_summary_of_the_examples_and_reimport_is_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("fanout.db");
    let examples = examples_dir();
    let first = fanout_import(&db, &[&examples], true);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let json = summary(&first);
    // acp-examples/README.md: 11 transcripts, one session and one turn each, 19 rows.
    assert_eq!(json["files"], 11);
    assert_eq!(json["subagent_rows"], 19);
    assert_eq!(json["sessions"], 11);
    assert_eq!(json["turns"], 11);
    assert_eq!(json["skipped"], 0);
    assert_eq!(json["errors"], 0);
    assert_eq!(json["counters"]["failed"], 0);
    assert!(json["frames"].as_u64().is_some_and(|n| n > 50));

    let before = table_counts(&db);
    assert_eq!(before.subagents, 19);

    let again = fanout_import(&db, &[&examples], true);
    assert!(again.status.success());
    let again = summary(&again);
    assert_eq!(again["files"], 0, "unchanged files are not read again");
    assert_eq!(again["unchanged"], 11);
    assert_eq!(table_counts(&db), before, "same rows");
}

#[test]
fn a_bad_line_is_reported_as_file_and_line_and_the_rest_imports() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("fanout.db");
    let text =
        std::fs::read_to_string(examples_dir().join("auggie.transcript.jsonl")).expect("example");
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(
        2,
        "{\"ts\": \"2026-08-03T15:32:20Z\", \"dir\": \"a2c\", \"line\": ",
    );
    let transcript = dir.path().join("broken.transcript.jsonl");
    std::fs::write(&transcript, lines.join("\n")).expect("write");

    let output = fanout_import(&db, &[&transcript], true);
    assert_eq!(output.status.code(), Some(1), "a bad line fails the run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("{}:3: not JSON", transcript.display())),
        "{stderr}"
    );
    let json = summary(&output);
    assert_eq!(json["skipped"], 1);
    assert_eq!(json["subagent_rows"], 1, "the rest of the file imported");
    assert_eq!(json["line_errors"].as_array().map(Vec::len), Some(1));
}

#[test]
fn an_unreadable_file_is_named_and_fails_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("fanout.db");
    let missing = dir.path().join("no-such.transcript.jsonl");
    let good = examples_dir().join("cursor.transcript.jsonl");
    let output = fanout_import(&db, &[&missing, &good], false);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("cannot read {}", missing.display())),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("1 subagent row(s)"),
        "the readable file still imported: {stdout}"
    );
}

#[test]
fn a_clean_import_exits_zero_with_a_text_summary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("fanout.db");
    let output = fanout_import(
        &db,
        &[&examples_dir().join("claude.transcript.jsonl")],
        false,
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("3 subagent row(s)"), "{stdout}");
    assert!(stdout.contains("errors         none"), "{stdout}");
}

fn history_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fanout-capture/tests/fixtures/history")
}

/// `fanout import` with no path and the given environment (HOME, CLAUDE_CONFIG_DIR,
/// CODEX_HOME as given, every other one removed).
fn fanout_import_defaults(db: &Path, env: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fanout"));
    command
        .env_remove("FANOUT_DATABASE_URL")
        .env_remove("FANOUT_LOG")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .arg("import")
        .arg("--db")
        .arg(format!("sqlite://{}", db.display()));
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run fanout")
}

/// Zero-config (DESIGN 3.7): no path reads `~/.claude/projects` and `~/.codex/sessions`,
/// says what it found where, and a second run reads nothing.
#[test]
fn no_path_imports_every_default_history_and_says_where() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    copy_tree(
        &history_fixtures().join("claude/claude-0.101.0-nested-subagents/projects"),
        &home.join(".claude/projects"),
    );
    copy_tree(
        &history_fixtures().join("codex/v2-parallel/sessions"),
        &home.join(".codex/sessions"),
    );
    let db = dir.path().join("fanout.db");
    let output = fanout_import_defaults(&db, &[("HOME", &home)]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let claude = format!(
        "claude         {} (from ~/.claude): 1 new or changed, 0 unchanged",
        home.join(".claude/projects").display()
    );
    let codex = format!(
        "codex          {} (from ~/.codex): 1 new or changed, 0 unchanged",
        home.join(".codex/sessions").display()
    );
    assert!(stdout.contains(&claude), "{stdout}");
    assert!(stdout.contains(&codex), "{stdout}");
    assert!(stdout.contains("2 session(s)"), "{stdout}");
    assert!(
        stdout.contains("4 subagent row(s), 14 usage row(s)"),
        "{stdout}"
    );
    let counts = table_counts(&db);

    let again = fanout_import_defaults(&db, &[("HOME", &home)]);
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{stdout}");
    assert!(
        stdout.contains("0 new or changed, 1 unchanged (3 file(s) not read)"),
        "{stdout}"
    );
    assert!(stdout.contains("imported       0 unit(s)"), "{stdout}");
    assert_eq!(table_counts(&db), counts);
}

/// `$CLAUDE_CONFIG_DIR` and `$CODEX_HOME` win over the home folder; a place that does
/// not exist is said, and is no error.
#[test]
fn the_harness_variables_choose_the_places() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("claude-config");
    copy_tree(
        &history_fixtures().join("claude/claude-0.101.0-single-subagents/projects"),
        &config.join("projects"),
    );
    let codex_home = dir.path().join("no-codex-here");
    let db = dir.path().join("fanout.db");
    let output = fanout_import_defaults(
        &db,
        &[
            ("HOME", dir.path()),
            ("CLAUDE_CONFIG_DIR", &config),
            ("CODEX_HOME", &codex_home),
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("(from $CLAUDE_CONFIG_DIR): 1 new or changed"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "codex          {} (from $CODEX_HOME): nothing there",
            codex_home.join("sessions").display()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("1 session(s)"), "{stdout}");
}
