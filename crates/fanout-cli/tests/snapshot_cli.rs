//! `fanout snapshot` as a user runs it: every committed scenario passes, a
//! single changed byte in any expected file fails naming the file, missing and
//! extra session logs fail, bad input is one clear error, and `record` without
//! a key refuses to run.

mod snapshot_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use snapshot_support::{copy_dir, fanout, text};

/// The committed scenarios and how many session logs each has.
const SCENARIOS: [(&str, usize); 5] = [
    ("single", 1),
    ("subagent-spawn", 2),
    ("subagent-multi", 3),
    ("subagent-fork", 2),
    ("subagent-mixed", 3),
];

fn scenarios_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

/// A scratch copy of a committed scenario.
fn copy_scenario(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    copy_dir(&scenarios_root().join(name), &dir);
    (tmp, dir)
}

fn expected_files(sessions: usize) -> Vec<String> {
    let mut files = vec!["transcript.txt".to_string()];
    files.extend((0..sessions).map(fanout_replay::session_file_name));
    files
}

#[test]
fn every_committed_scenario_passes() {
    for (name, sessions) in SCENARIOS {
        let dir = scenarios_root().join(name);
        for file in expected_files(sessions) {
            assert!(dir.join(&file).is_file(), "{name} lacks {file}");
        }
        assert!(
            !dir.join(fanout_replay::session_file_name(sessions))
                .exists(),
            "{name} has more than {sessions} session logs"
        );
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        assert!(
            readme.contains("no live model was recorded"),
            "{name}/README.md"
        );
        let output = fanout(&["snapshot", "run"], &[&dir]);
        assert!(output.status.success(), "{name}: {}", text(&output));
        assert!(
            text(&output).contains(&format!("{} file(s) match", sessions + 1)),
            "{}",
            text(&output)
        );
    }
}

/// Changes the byte at `at` to a different printable one that keeps the line
/// structure (a digit stays a digit, so a timestamp stays a timestamp).
fn flip_byte(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] = match bytes[at] {
        b'0'..=b'8' => bytes[at] + 1,
        b'9' => b'0',
        b'a'..=b'y' | b'A'..=b'Y' => bytes[at] + 1,
        b'z' => b'a',
        b'Z' => b'A',
        _ => b'x',
    };
    std::fs::write(path, bytes).unwrap();
}

/// Where to flip a byte of an expected file. In a session log, a digit of the
/// last event's timestamp: logs are also what replay reads, and that byte is
/// output-only, so the failure must name the log itself. In the transcript,
/// the first letter after its middle.
fn flip_position(name: &str, bytes: &[u8]) -> usize {
    if name.ends_with(".jsonl") {
        let last_ts = bytes
            .windows(2)
            .rposition(|w| w == b"Z\"")
            .expect("a timestamp in the log");
        last_ts - 1
    } else {
        let middle = bytes.len() / 2;
        middle
            + bytes[middle..]
                .iter()
                .position(u8::is_ascii_alphabetic)
                .expect("a letter after the middle")
    }
}

#[test]
fn one_changed_byte_in_any_expected_file_fails_and_names_the_file() {
    for (name, sessions) in SCENARIOS {
        let (_tmp, dir) = copy_scenario(name);
        for file in expected_files(sessions) {
            let path = dir.join(&file);
            let original = std::fs::read(&path).unwrap();
            flip_byte(&path, flip_position(&file, &original));
            let output = fanout(&["snapshot", "run"], &[&dir]);
            let said = text(&output);
            assert_eq!(output.status.code(), Some(1), "{name}/{file}: {said}");
            assert!(
                said.contains(&format!("DIFFERS {}", path.display())),
                "{name}/{file}: the diff must name the file:\n{said}"
            );
            assert!(said.contains(&format!("--- expected/{file}")), "{said}");
            assert!(!said.contains("panicked"), "{said}");
            std::fs::write(&path, original).unwrap();
        }
        let output = fanout(&["snapshot", "run"], &[&dir]);
        assert!(
            output.status.success(),
            "{name} restored: {}",
            text(&output)
        );
    }
}

#[test]
fn a_changed_recorded_usage_is_caught_by_the_transcript() {
    // The primary's own token counts are replayed as recorded, so the log alone
    // cannot disagree with them; the transcript's per-session summary does.
    let (_tmp, dir) = copy_scenario("subagent-multi");
    let log = dir.join("session.jsonl");
    let text_before = std::fs::read_to_string(&log).unwrap();
    let at = text_before.find("\"inputTokens\":").unwrap() + "\"inputTokens\":".len();
    flip_byte(&log, at);
    let output = fanout(&["snapshot", "run"], &[&dir]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(text(&output).contains("DIFFERS"), "{}", text(&output));
    assert!(
        text(&output).contains("--- expected/transcript.txt"),
        "{}",
        text(&output)
    );
}

/// Adds `session.<index>.jsonl`: a copy of the first child's log under another
/// id, created last, so it is a valid script no live session ever claims.
fn add_unused_log(dir: &Path, index: usize) {
    let child = std::fs::read_to_string(dir.join("session.1.jsonl")).unwrap();
    let ghost = child
        .replace("<session.1>", &format!("<session.{index}>"))
        .replacen(
            "\"createdAt\":\"2000-01-01T00:00:00",
            "\"createdAt\":\"2000-01-01T00:00:59",
            1,
        );
    std::fs::write(dir.join(fanout_replay::session_file_name(index)), ghost).unwrap();
}

#[test]
fn missing_and_extra_session_logs_fail() {
    // One recorded child removed: the run still produces three logs.
    let (_tmp, dir) = copy_scenario("subagent-multi");
    std::fs::remove_file(dir.join("session.2.jsonl")).unwrap();
    let output = fanout(&["snapshot", "run"], &[&dir]);
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(
        said.contains("EXTRA") && said.contains("session.2.jsonl: the run produced it"),
        "{said}"
    );
    assert!(
        said.contains("distinct caller number 3"),
        "the unrecorded child is named: {said}"
    );

    // An expected log the run never produces.
    let (_tmp2, dir) = copy_scenario("subagent-spawn");
    add_unused_log(&dir, 2);
    let output = fanout(&["snapshot", "run"], &[&dir]);
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(
        said.contains("MISSING")
            && said.contains("session.2.jsonl: expected, but the run did not produce it"),
        "{said}"
    );
}

/// (scenario, file spoiled, how, what the error must say).
type BadInputCase = (&'static str, &'static str, fn(&Path), &'static str);

#[test]
fn bad_scenario_input_is_one_clear_error_naming_file_and_line() {
    let cases: [BadInputCase; 5] = [
        (
            "single",
            "scenario.toml",
            |dir| std::fs::remove_file(dir.join("scenario.toml")).unwrap(),
            "scenario.toml: ",
        ),
        (
            "single",
            "scenario.toml",
            |dir| {
                std::fs::write(
                    dir.join("scenario.toml"),
                    "model = \"m\"\nprompts = [\"x\"\n",
                )
                .unwrap();
            },
            "scenario.toml:2: ",
        ),
        (
            "subagent-spawn",
            "session.1.jsonl",
            |dir| {
                let path = dir.join("session.1.jsonl");
                let text = std::fs::read_to_string(&path).unwrap();
                let mut lines: Vec<&str> = text.lines().collect();
                lines[3] = "{\"type\":\"assistant/chunk\",\"ts\":";
                std::fs::write(&path, lines.join("\n") + "\n").unwrap();
            },
            "session.1.jsonl:4: not valid JSON",
        ),
        (
            "subagent-fork",
            "session.jsonl",
            |dir| {
                let path = dir.join("session.jsonl");
                let text = std::fs::read_to_string(&path).unwrap();
                let header_end = text.find('\n').unwrap();
                let header = text[..header_end]
                    .replace(",\"createdAt\":\"2000-01-01T00:00:00.000000Z\"", "");
                std::fs::write(&path, format!("{header}{}", &text[header_end..])).unwrap();
            },
            "session.jsonl:1: invalid header: missing field `createdAt`",
        ),
        (
            "single",
            "session.jsonl",
            |dir| std::fs::remove_file(dir.join("session.jsonl")).unwrap(),
            "no session logs to replay",
        ),
    ];
    for (name, file, spoil, want) in cases {
        let (_tmp, dir) = copy_scenario(name);
        spoil(&dir);
        let output = fanout(&["snapshot", "run"], &[&dir]);
        let said = text(&output);
        assert_eq!(output.status.code(), Some(1), "{name}/{file}: {said}");
        assert!(
            said.contains(want),
            "{name}/{file}: {said}\n  should contain {want}"
        );
        assert!(
            said.contains(dir.to_str().unwrap()),
            "names the path: {said}"
        );
        assert!(!said.contains("panicked"), "{said}");
        assert_eq!(said.lines().count(), 1, "one error line: {said}");
    }
}

#[test]
fn record_needs_a_key_and_refresh_rewrites_from_a_replay() {
    let (_tmp, dir) = copy_scenario("subagent-spawn");
    let before = std::fs::read(dir.join("transcript.txt")).unwrap();
    let output = fanout(&["snapshot", "record"], &[&dir]);
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(
        said.contains("ANTHROPIC_API_KEY") && said.contains("not set"),
        "{said}"
    );
    let output = fanout(&["snapshot", "record", "--provider", "openai"], &[&dir]);
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(
        said.contains("OPENAI_API_KEY") && said.contains("not set"),
        "{said}"
    );
    assert_eq!(
        std::fs::read(dir.join("transcript.txt")).unwrap(),
        before,
        "nothing written"
    );
    // A base URL without a key is a setup the agent accepts, so record does too
    // (in a scratch copy: the closed port makes the recorded prompt fail).
    let (_tmp2, scratch) = copy_scenario("subagent-spawn");
    let output = Command::new(env!("CARGO_BIN_EXE_fanout"))
        .args(["snapshot", "record", "--provider", "openai"])
        .arg(&scratch)
        .env_remove("OPENAI_API_KEY")
        .env("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
        .env_remove("FANOUT_LOG")
        .output()
        .expect("run fanout");
    let said = text(&output);
    assert!(
        !said.contains("cannot use this provider") && !said.contains("not set"),
        "{said}"
    );

    // refresh: a spoiled transcript and a stale extra log are rewritten.
    std::fs::write(dir.join("transcript.txt"), "stale\n").unwrap();
    add_unused_log(&dir, 7);
    let output = fanout(&["snapshot", "refresh"], &[&dir]);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(std::fs::read(dir.join("transcript.txt")).unwrap(), before);
    assert!(!dir.join("session.7.jsonl").exists());
    let output = fanout(&["snapshot", "run"], &[&dir]);
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn scripted_recording_reproduces_the_committed_fixtures() {
    // The fixtures were produced by this harness from each scenario's
    // deterministic script; recording again must give the same bytes.
    for (name, sessions) in SCENARIOS {
        let (_tmp, dir) = copy_scenario(name);
        let script = dir.join("model-script.json");
        let output = fanout(
            &[
                "snapshot",
                "record",
                "--provider",
                "scripted",
                "--script",
                script.to_str().unwrap(),
            ],
            &[&dir],
        );
        assert!(output.status.success(), "{name}: {}", text(&output));
        for file in expected_files(sessions) {
            assert_eq!(
                std::fs::read(dir.join(&file)).unwrap(),
                std::fs::read(scenarios_root().join(name).join(&file)).unwrap(),
                "{name}/{file}"
            );
        }
    }
}
