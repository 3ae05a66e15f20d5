//! `fanout demo`: offline, from any directory, into the SQLite file it is
//! given; the report shows one turn that fanned out to two subagents.

use std::process::{Command, Output};

use serde_json::Value;

fn demo(cwd: &std::path::Path, db: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fanout"))
        .args(["demo", "--db", db])
        .args(extra)
        .current_dir(cwd)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("FANOUT_DATABASE_URL")
        .output()
        .expect("run fanout demo")
}

#[test]
fn demo_captures_two_subagents_in_one_turn_and_reports_them() {
    // Run from an unrelated directory: the scenario is compiled in.
    let tmp = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", tmp.path().join("demo.db").display());
    let output = demo(tmp.path(), &db, &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("replayed the bundled subagent-multi scenario"),
        "{stdout}"
    );
    assert!(
        stdout.contains("1 turn(s): 1 with known fan-out (2 subagent(s), mean 2 per turn)"),
        "{stdout}"
    );
    assert!(stdout.contains("reviewer"), "{stdout}");

    // A second run is its own task: its report is again one turn, two subagents.
    let output = demo(tmp.path(), &db, &["--format", "json"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("stdout is the JSON report");
    assert_eq!(report["scope"]["kind"], "task");
    assert_eq!(report["turns"]["turns"], 1);
    assert_eq!(report["turns"]["subagents_in_known_turns"], 2);
    assert_eq!(report["subagents"]["total"], 2);
    assert_eq!(report["provenance"]["live"], 2);
    assert_eq!(report["by_type"][0]["value"], "reviewer");
    assert!(String::from_utf8_lossy(&output.stderr).contains("fanout demo:"));
}

#[test]
fn demo_with_the_default_relative_database_writes_fanout_db_where_it_was_run() {
    // The README's command: no --db, so `sqlite://fanout.db`, relative to the user's
    // directory, not to the scenario workspace the agent runs in.
    let tmp = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_fanout"))
        .args(["demo", "--format", "json"])
        .current_dir(tmp.path())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("FANOUT_DATABASE_URL")
        .output()
        .expect("run fanout demo");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("stdout is the JSON report");
    assert_eq!(report["subagents"]["total"], 2);
    assert!(
        tmp.path().join("fanout.db").is_file(),
        "./fanout.db was written"
    );
}
