//! History import against the peer (DESIGN 6): on one generated Claude Code history
//! (`fanout gen-claude-history`), in one run, the wall time and peak RSS of a first
//! `fanout import` (SQLite) and of `ccusage session --json --offline` (ccusage 20.0.24,
//! its native binary, installed by `tools/test-agents/ccusage/install.sh`), a re-import
//! of the unchanged folder, their ratios, and a check that every session's input,
//! output, cache-creation and cache-read totals equal ccusage's exactly.
//!
//! `cargo bench -p fanout-cli --bench import_vs_ccusage`: 256 MiB
//! (`FANOUT_BENCH_HISTORY_BYTES` to change). Under `cargo test` it runs in a quick mode
//! (6 MiB, the test profile's binary) with the same assertions; with `CI=true` ccusage
//! must install, never skip.
//!
//! ccusage keys a workflow agent (`<session>/subagents/workflows/<wf>/agent-*.jsonl`)
//! under the workflow folder's name instead of its session; the comparison adds those
//! groups to the session whose folder holds them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fanout_store::SqlStore;
use serde_json::Value;

/// Input, output, cache creation, cache read.
type Totals = [i64; 4];

fn main() {
    let quick = fanout_types::bench::is_quick();
    let bytes: u64 = std::env::var("FANOUT_BENCH_HISTORY_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 6 << 20 } else { 256 << 20 });
    let Some(ccusage) = install_ccusage() else {
        return;
    };
    let fanout = PathBuf::from(env!("CARGO_BIN_EXE_fanout"));
    let scratch = tempfile::Builder::new()
        .prefix("fanout-import-bench")
        .tempdir_in(
            std::env::var_os("FANOUT_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from),
        )
        .expect("scratch folder");
    let history = scratch.path().join("claude");
    let generated = run(
        Command::new(&fanout)
            .args(["gen-claude-history", "--bytes", &bytes.to_string(), "--out"])
            .arg(&history),
        "generate the history",
    );
    let db = scratch.path().join("fanout.db");
    let url = format!("sqlite://{}", db.display());
    let import = |what: &str| {
        measure(
            Command::new(&fanout)
                .args(["import", "--db", &url])
                .arg(&history)
                .env_remove("FANOUT_DATABASE_URL"),
            what,
        )
    };
    let peer = measure(
        Command::new(&ccusage)
            .args(["session", "--json", "--offline"])
            .env("CLAUDE_CONFIG_DIR", &history)
            .env("NO_COLOR", "1"),
        "ccusage session --json --offline",
    );
    let first = import("fanout import (first)");
    let again = import("fanout import (unchanged)");
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("imported       0 unit(s)"),
        "the unchanged re-import read nothing: {}",
        String::from_utf8_lossy(&again.stdout)
    );

    let theirs = ccusage_totals(&peer.stdout, &history);
    let ours = fanout_totals(&url, theirs.keys());
    let equal = theirs == ours;
    println!(
        "history: {} ({} MiB), quick mode: {quick}",
        String::from_utf8_lossy(&generated.stdout).trim(),
        bytes >> 20
    );
    println!("| run | wall time | ratio to ccusage | peak RSS |");
    println!("|---|---|---|---|");
    for (name, m) in [
        ("ccusage session --json --offline", &peer),
        ("fanout import, first", &first),
        ("fanout import, unchanged", &again),
    ] {
        println!(
            "| {name} | {:.3} s | {:.3}x | {} MiB |",
            m.wall.as_secs_f64(),
            m.wall.as_secs_f64() / peer.wall.as_secs_f64(),
            m.peak_rss_kib / 1024
        );
    }
    println!(
        "per-session totals (input, output, cache creation, cache read) equal ccusage's: {equal} ({} sessions)",
        theirs.len()
    );
    if !equal {
        for (session, want) in &theirs {
            if ours.get(session) != Some(want) {
                eprintln!(
                    "{session}: ccusage {want:?}, fanout {:?}",
                    ours.get(session)
                );
            }
        }
    }
    assert!(equal, "per-session token totals differ from ccusage's");
    assert!(!theirs.is_empty(), "ccusage found sessions");
}

/// Installs (or finds, when already installed) the pinned ccusage; its native binary.
fn install_ccusage() -> Option<PathBuf> {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/test-agents/ccusage/install.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output();
    let dest = match output {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .map(PathBuf::from),
        _ => None,
    };
    let binary = dest.map(|d| d.join("node_modules/@ccusage/ccusage-linux-x64/bin/ccusage"));
    match binary {
        Some(binary) if binary.is_file() => Some(binary),
        _ => {
            fanout_types::skip_unless_ci(
                "the import bench",
                format!(
                    "{} could not install ccusage (npm missing?)",
                    script.display()
                ),
            );
            None
        }
    }
}

struct Measured {
    wall: Duration,
    peak_rss_kib: u64,
    stdout: Vec<u8>,
}

/// Runs `command` under GNU time for its peak RSS; the wall time is measured here.
fn measure(command: &mut Command, what: &str) -> Measured {
    let rss_file = tempfile::NamedTempFile::new().expect("rss file");
    let program = command.get_program().to_owned();
    let args: Vec<_> = command.get_args().map(ToOwned::to_owned).collect();
    let mut timed = Command::new("/usr/bin/time");
    timed
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(rss_file.path())
        .arg(program)
        .args(args);
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => timed.env(key, value),
            None => timed.env_remove(key),
        };
    }
    let start = Instant::now();
    let output = run(&mut timed, what);
    let wall = start.elapsed();
    let peak_rss_kib = std::fs::read_to_string(rss_file.path())
        .ok()
        .and_then(|text| text.lines().last().and_then(|l| l.trim().parse().ok()))
        .unwrap_or(0);
    Measured {
        wall,
        peak_rss_kib,
        stdout: output.stdout,
    }
}

fn run(command: &mut Command, what: &str) -> std::process::Output {
    let output = command
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// ccusage's per-session totals, workflow groups added to their session.
fn ccusage_totals(json: &[u8], history: &Path) -> BTreeMap<String, Totals> {
    let report: Value = serde_json::from_slice(json).expect("ccusage JSON");
    let workflows = workflow_sessions(history);
    let mut totals = BTreeMap::new();
    for session in report["session"].as_array().expect("session array") {
        let period = session["period"].as_str().expect("period");
        let key = workflows
            .get(period)
            .cloned()
            .unwrap_or_else(|| period.to_owned());
        let entry: &mut Totals = totals.entry(key).or_default();
        for (slot, field) in entry.iter_mut().zip([
            "inputTokens",
            "outputTokens",
            "cacheCreationTokens",
            "cacheReadTokens",
        ]) {
            *slot += session[field].as_i64().expect(field);
        }
    }
    totals
}

/// Workflow folder name -> the session whose folder holds it.
fn workflow_sessions(history: &Path) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let Ok(projects) = std::fs::read_dir(history.join("projects")) else {
        return map;
    };
    for project in projects.flatten() {
        for session in std::fs::read_dir(project.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let workflows = session.path().join("subagents/workflows");
            for wf in std::fs::read_dir(workflows).into_iter().flatten().flatten() {
                map.insert(
                    wf.file_name().to_string_lossy().into_owned(),
                    session.file_name().to_string_lossy().into_owned(),
                );
            }
        }
    }
    map
}

/// fanout's per-session totals from the ledger (each response once).
fn fanout_totals<'a>(
    url: &str,
    sessions: impl Iterator<Item = &'a String>,
) -> BTreeMap<String, Totals> {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let store = SqlStore::open(url).await.expect("open the bench database");
        let mut totals = BTreeMap::new();
        for session in sessions {
            let row_id = fanout_capture::session_row_id("unknown", session);
            let rows = store.usage_rows(&row_id).await.expect("usage rows");
            if rows.is_empty() {
                continue;
            }
            let mut sum: Totals = [0; 4];
            for row in rows {
                let t = row.tokens;
                for (slot, value) in sum.iter_mut().zip([
                    t.input_tokens,
                    t.output_tokens,
                    t.cache_creation_tokens,
                    t.cache_read_tokens,
                ]) {
                    *slot += value.unwrap_or(0);
                }
            }
            totals.insert(session.clone(), sum);
        }
        store.close().await;
        totals
    })
}
