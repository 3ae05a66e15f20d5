//! The snapshot scenarios with real third-party agents (DESIGN 5.5): each was
//! recorded once by `fanout snapshot record` through the recording proxy
//! against a scripted mock upstream, and replays keyless with the mock gone,
//! every conversation of the nested run bound to its own recording by the
//! rung the scenario is about.
//!
//! The agents are installed (cached) by `tools/test-agents/*/install.sh`
//! (`FANOUT_TEST_AGENTS_DIR` says where). Under `CI=true` an agent that cannot
//! be installed is a failure; elsewhere its scenarios are skipped with a
//! message.

mod snapshot_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use snapshot_support::{copy_dir, fanout, text};

/// (scenario, its installer, the rung that must bind each conversation, by
/// file name).
const AGENT_SCENARIOS: [(&str, &str, &[&str]); 4] = [
    (
        "claude-subagents",
        "claude-acp-101",
        &[
            "claude-session",
            "claude-session",
            "claude-session",
            "claude-session",
            "claude-agent",
            "claude-agent",
            "claude-session",
            "claude-session",
        ],
    ),
    (
        "claude-subagents-content",
        "claude",
        &["content", "content", "content"],
    ),
    (
        "opencode-task",
        "opencode",
        &["opencode-session", "opencode-session", "opencode-session"],
    ),
    (
        "codex-spawn",
        "codex",
        &["codex-thread", "codex-thread", "codex-thread"],
    ),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scenario_dir(name: &str) -> PathBuf {
    repo().join("scenarios").join(name)
}

/// Whether `installer`'s agent is installed (installing it if needed); a
/// failure fails under `CI=true`.
fn installed(installer: &str) -> bool {
    let script = repo()
        .join("tools/test-agents")
        .join(installer)
        .join("install.sh");
    let output = Command::new("bash").arg(&script).output();
    let failure = match output {
        Ok(out) if out.status.success() => return true,
        Ok(out) => format!(
            "{} failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(error) => format!("cannot run {}: {error}", script.display()),
    };
    fanout_types::skip_unless_ci(&format!("the {installer} scenarios"), failure);
    false
}

/// A scratch copy of a committed scenario (its cassette too).
fn copy_scenario(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    copy_dir(&scenario_dir(name), &dir);
    // The installer is named relative to the scenario.
    let toml = std::fs::read_to_string(dir.join("scenario.toml")).unwrap();
    let tools = repo().join("tools").canonicalize().unwrap();
    std::fs::write(
        dir.join("scenario.toml"),
        toml.replace("../../tools", tools.to_str().unwrap()),
    )
    .unwrap();
    (tmp, dir)
}

/// The rung named on each `# conversation-…` line of a transcript's head.
fn rungs_of(transcript: &str) -> Vec<String> {
    transcript
        .lines()
        .filter(|line| line.starts_with("# conversation-"))
        .filter_map(|line| {
            let after = line.split(", bound by ").nth(1)?;
            Some(after.split(':').next()?.to_string())
        })
        .collect()
}

#[test]
fn every_agent_scenario_replays_keyless_with_the_mock_gone() {
    for (name, installer, want) in AGENT_SCENARIOS {
        if !installed(installer) {
            continue;
        }
        let dir = scenario_dir(name);
        let index: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("cassette/index.json")).unwrap(),
        )
        .unwrap();
        let upstream = index["upstream"].as_str().unwrap();
        let addr = upstream.trim_start_matches("http://");
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "{name}: something listens on the recording's upstream {addr}"
        );
        let expected = std::fs::read_to_string(dir.join("transcript.txt")).unwrap();
        assert_eq!(rungs_of(&expected), want, "{name}: the rungs recorded");
        assert!(!expected.contains("# MISS"), "{name}");

        let output = fanout(&["snapshot", "run"], &[&dir]);
        assert!(output.status.success(), "{name}: {}", text(&output));
        assert!(
            text(&output).contains("1 file(s) match"),
            "{name}: {}",
            text(&output)
        );
    }
}

#[test]
fn committed_cassettes_hold_no_key_and_no_auth_header() {
    for (name, _, _) in AGENT_SCENARIOS {
        let cassette = scenario_dir(name).join("cassette");
        for entry in std::fs::read_dir(&cassette).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap().to_ascii_lowercase();
            for secret in [
                "sk-fanout-dummy-key",
                "sk-test",
                "[\"authorization\"",
                "[\"x-api-key\"",
                "[\"cookie\"",
                "[\"set-cookie\"",
                "bearer sk-",
            ] {
                assert!(!text.contains(secret), "{} holds {secret}", path.display());
            }
        }
    }
}

/// A digit of the recorded usage in `line`'s response (SSE event or JSON
/// body): changing it changes what the agent is told, never the shape of the
/// stream.
fn response_usage_byte(line: &str) -> Option<usize> {
    let response = line.find("\"response\":")?;
    let marker = "\\\"input_tokens\\\": ";
    let at = response + line[response..].find(marker)? + marker.len();
    line[at..]
        .starts_with(|c: char| c.is_ascii_digit())
        .then_some(at)
}

#[test]
fn one_changed_byte_in_any_recorded_response_fails_with_a_diff() {
    let (name, installer, _) = AGENT_SCENARIOS[0];
    if !installed(installer) {
        return;
    }
    let (_tmp, dir) = copy_scenario(name);
    let cassette = dir.join("cassette");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&cassette)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    let mut flipped = 0;
    for path in files {
        let original = std::fs::read_to_string(&path).unwrap();
        let first_line = original.lines().next().unwrap();
        let Some(at) = response_usage_byte(first_line) else {
            continue;
        };
        let mut bytes = original.clone().into_bytes();
        bytes[at] = if bytes[at] == b'z' {
            b'y'
        } else {
            bytes[at] + 1
        };
        std::fs::write(&path, &bytes).unwrap();
        let output = fanout(&["snapshot", "run"], &[&dir]);
        let said = text(&output);
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(output.status.code(), Some(1), "{file}: {said}");
        assert!(
            said.contains("--- expected/transcript.txt"),
            "{file}: {said}"
        );
        assert!(
            said.lines()
                .any(|line| line.starts_with(&format!("-# {file}:"))),
            "{file}: the diff names the conversation: {said}"
        );
        assert!(!said.contains("panicked"), "{said}");
        std::fs::write(&path, original).unwrap();
        flipped += 1;
    }
    assert_eq!(flipped, 8, "every conversation's first response");
}

/// Swaps entries `a` and `b` of the index's list `list`.
fn swap_in_index(dir: &Path, list: &str, a: usize, b: usize) {
    let path = dir.join("cassette/index.json");
    let mut index: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    index[list].as_array_mut().unwrap().swap(a, b);
    std::fs::write(&path, serde_json::to_string_pretty(&index).unwrap()).unwrap();
}

#[test]
fn independent_subagents_recorded_in_the_other_order_replay_the_same() {
    // claude-subagents' two subagents ran at the same time when recording:
    // which was recorded first says nothing, so each live subagent still
    // binds to its own conversation and the run matches.
    let (name, installer, _) = AGENT_SCENARIOS[0];
    if !installed(installer) {
        return;
    }
    let (_tmp, dir) = copy_scenario(name);
    let index = std::fs::read_to_string(dir.join("cassette/index.json")).unwrap();
    let index: Value = serde_json::from_str(&index).unwrap();
    let subagents: Vec<usize> = index["identities"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, identity)| identity["rung"] == "claude-agent")
        .map(|(at, _)| at)
        .collect();
    assert_eq!(subagents.len(), 2);
    swap_in_index(&dir, "identities", subagents[0], subagents[1]);
    let conversations: Vec<usize> = index["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            c["identity"]
                .as_str()
                .unwrap_or("")
                .starts_with("claude-agent:")
        })
        .map(|(at, _)| at)
        .collect();
    swap_in_index(&dir, "conversations", conversations[0], conversations[1]);
    let output = fanout(&["snapshot", "run"], &[&dir]);
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn a_header_less_agent_whose_content_root_changed_misses_naming_the_difference() {
    // Claude Code 2.1.83 sends no identity headers: its conversations bind by
    // content root, so a prompt that changed since the recording misses.
    let (name, installer, _) = AGENT_SCENARIOS[1];
    if !installed(installer) {
        return;
    }
    let (_tmp, dir) = copy_scenario(name);
    let toml = std::fs::read_to_string(dir.join("scenario.toml")).unwrap();
    let changed = toml.replace("subagents read hello.txt", "subagents read HELLO.txt");
    assert_ne!(toml, changed);
    std::fs::write(dir.join("scenario.toml"), changed).unwrap();
    let output = fanout(&["snapshot", "run"], &[&dir]);
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    let miss = said
        .lines()
        .find(|line| line.starts_with("MISS"))
        .unwrap_or_else(|| panic!("no MISS line: {said}"));
    for part in [
        "request 1 (POST /v1/messages)",
        "by rung content",
        "closest recorded: conversation-",
        "roots differ at character",
        "HELLO.txt",
    ] {
        assert!(miss.contains(part), "{part}: {miss}");
    }
    assert!(said.contains("DIFFERS"), "{said}");
    assert!(!said.contains("panicked"), "{said}");
}

#[test]
fn snapshot_record_never_overwrites_a_cassette_without_force() {
    // Refused before anything starts: no agent or upstream is needed.
    let (_tmp, dir) = copy_scenario("opencode-task");
    let before = std::fs::read(dir.join("cassette/index.json")).unwrap();
    let output = fanout(
        &["snapshot", "record", "--upstream", "http://127.0.0.1:9"],
        &[&dir],
    );
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&dir.join("cassette").display().to_string()) && said.contains("--force"),
        "{said}"
    );
    assert!(!said.contains("panicked"), "{said}");
    assert_eq!(
        std::fs::read(dir.join("cassette/index.json")).unwrap(),
        before
    );
    assert_eq!(
        std::fs::read(dir.join("transcript.txt")).unwrap(),
        std::fs::read(scenario_dir("opencode-task").join("transcript.txt")).unwrap()
    );
}
