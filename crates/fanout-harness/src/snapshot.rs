//! The snapshot harness (DESIGN 5.4): run a scenario's agent with a fresh
//! sessions root, drive its prompts over ACP, normalise the transcript and
//! every session log it wrote, and compare them with the expected files.

use std::path::{Path, PathBuf};

use fanout_replay::{ScenarioScripts, indexed_log_files, session_file_name};
use fanout_sessionlog::{Chunk, Event, list_logs, parse_log};

use crate::acp::{AgentCommand, Direction, DrivePlan, drive};
use crate::error::HarnessError;
use crate::normalize::Normalizer;
use crate::scenario::{Placeholders, Scenario, TRANSCRIPT_FILE, default_replay_command};

/// Environment variables holding provider keys: removed for replay runs, so a
/// replay provably needs none.
pub const API_KEY_VARS: [&str; 2] = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"];

/// How the agent gets its model responses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunMode {
    /// Replay the scenario's own recorded logs (`run`, `refresh`).
    Replay,
    /// Record: run `fanout agent` against a provider (`record`). Whether the
    /// provider is usable (its key, or a custom base URL) is the agent's rule,
    /// which this crate does not know: the caller checks it before running.
    Record(RecordProvider),
}

/// The provider a recording runs against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordProvider {
    /// `anthropic`, `openai`, `scripted`, …
    pub provider: String,
    /// Model name; default: the scenario's `model`, else the provider's default.
    pub model: Option<String>,
    /// Script file for the scripted provider.
    pub script: Option<PathBuf>,
    /// Provider base URL (a custom endpoint needs no key).
    pub base_url: Option<String>,
}

/// The normalised outputs of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// `transcript.txt`: a summary of the session logs, then every ACP line.
    pub transcript: String,
    /// The session logs, primary first (`session.jsonl`, `session.1.jsonl`, …).
    pub session_logs: Vec<String>,
}

impl Snapshot {
    /// Every output as (expected file name, content), transcript first.
    pub fn files(&self) -> Vec<(String, &str)> {
        let mut files = vec![(TRANSCRIPT_FILE.to_string(), self.transcript.as_str())];
        for (index, log) in self.session_logs.iter().enumerate() {
            files.push((session_file_name(index), log.as_str()));
        }
        files
    }
}

/// Runs a scenario once. `fanout` is the executable that `{fanout}` names.
pub async fn run(
    scenario: &Scenario,
    fanout: &Path,
    mode: &RunMode,
) -> Result<Snapshot, HarnessError> {
    let (argv, model) = match mode {
        RunMode::Replay => {
            // Validates every expected log up front, so a bad line is reported
            // as file:line here rather than as an agent that failed to start.
            let scripts = ScenarioScripts::load(&scenario.dir)?;
            let model = scripts
                .recorded_model()
                .map(str::to_string)
                .or_else(|| scenario.model.clone())
                .unwrap_or_else(|| "replay".to_string());
            let argv = scenario
                .agent_command
                .clone()
                .unwrap_or_else(default_replay_command);
            (argv, Some(model))
        }
        RunMode::Record(provider) => {
            let model = provider.model.clone().or_else(|| scenario.model.clone());
            (record_command(provider, model.is_some()), model)
        }
    };
    let work = tempfile::Builder::new()
        .prefix("fanout-snapshot-")
        .tempdir()
        .map_err(HarnessError::io(std::env::temp_dir()))?;
    let workspace = work.path().join("workspace");
    let sessions_root = work.path().join("sessions");
    std::fs::create_dir_all(&workspace).map_err(HarnessError::io(&workspace))?;
    scenario.create_workspace(&workspace)?;
    let workspace = std::fs::canonicalize(&workspace).map_err(HarnessError::io(&workspace))?;
    let scenario_dir = absolute(&scenario.dir)?;

    let argv = Placeholders {
        fanout,
        scenario: &scenario_dir,
        sessions_root: &sessions_root,
        model: model.as_deref().unwrap_or(""),
    }
    .substitute(&argv);
    let Some(mut command) = AgentCommand::from_argv(&argv) else {
        return Err(HarnessError::Scenario {
            path: scenario.dir.join(crate::scenario::SCENARIO_FILE),
            line: None,
            message: "the agent command is empty".into(),
        });
    };
    if *mode == RunMode::Replay {
        command.env_remove = API_KEY_VARS.map(String::from).to_vec();
    }
    let outcome = drive(
        &command,
        &DrivePlan {
            cwd: workspace.clone(),
            prompts: scenario.prompts.clone(),
            client_subagents: scenario.client_subagents,
            timeout: scenario.timeout,
        },
    )
    .await?;

    // Harvest every log under the root, all cwd buckets, primary first.
    let entries = list_logs(&sessions_root)?;
    let mut raw_logs = Vec::with_capacity(entries.len());
    for entry in &entries {
        let text = std::fs::read_to_string(&entry.path).map_err(HarnessError::io(&entry.path))?;
        raw_logs.push(text);
    }

    let mut normalizer = Normalizer::new();
    for (index, entry) in entries.iter().enumerate() {
        let name = session_file_name(index);
        let placeholder = format!("<{}>", name.trim_end_matches(".jsonl"));
        normalizer.session(&entry.header.id, &placeholder);
    }
    normalizer.session(&outcome.session_id, "<session>");
    normalizer.literal(&workspace.to_string_lossy(), "<CWD>");
    normalizer.literal(&sessions_root.to_string_lossy(), "<SESSIONS>");
    normalizer.literal(&work.path().to_string_lossy(), "<TMP>");
    if let Ok(canonical_work) = std::fs::canonicalize(work.path()) {
        normalizer.literal(&canonical_work.to_string_lossy(), "<TMP>");
    }
    normalizer.literal(&scenario_dir.to_string_lossy(), "<SCENARIO>");
    normalizer.literal(&fanout.to_string_lossy(), "<FANOUT>");

    let lines: Vec<String> = outcome
        .transcript
        .iter()
        .map(|line| {
            let arrow = match line.direction {
                Direction::Sent => "->",
                Direction::Received => "<-",
            };
            format!("{arrow} {}", line.text)
        })
        .collect();
    normalizer.learn_timestamps(
        raw_logs
            .iter()
            .map(String::as_str)
            .chain(lines.iter().map(String::as_str)),
    );
    let session_logs: Vec<String> = raw_logs
        .iter()
        .map(|log| normalizer.normalize(log))
        .collect();
    let mut transcript = summary(&session_logs);
    for line in &lines {
        transcript.push_str(&normalizer.normalize(line));
        transcript.push('\n');
    }
    Ok(Snapshot {
        transcript,
        session_logs,
    })
}

/// `fanout agent` against the recording provider.
fn record_command(provider: &RecordProvider, with_model: bool) -> Vec<String> {
    let mut argv: Vec<String> = ["{fanout}", "agent", "--provider"]
        .map(String::from)
        .to_vec();
    argv.push(provider.provider.clone());
    if with_model {
        argv.extend(["--model".to_string(), "{model}".to_string()]);
    }
    if let Some(script) = &provider.script {
        argv.push("--script".into());
        argv.push(script.to_string_lossy().into_owned());
    }
    if let Some(url) = &provider.base_url {
        argv.push("--base-url".into());
        argv.push(url.clone());
    }
    argv.extend(["--sessions-root".to_string(), "{sessions_root}".to_string()]);
    argv
}

fn absolute(path: &Path) -> Result<PathBuf, HarnessError> {
    std::fs::canonicalize(path).map_err(HarnessError::io(path))
}

/// The transcript's head: one line per session log, with what a reader of the
/// ACP lines cannot see (a session's own model calls and token usage). Because
/// the transcript is never replayed, this also catches an edit to a recorded
/// response that the replay would otherwise reproduce faithfully.
fn summary(session_logs: &[String]) -> String {
    let mut out = String::from("# fanout snapshot: session logs, primary first\n");
    for (index, text) in session_logs.iter().enumerate() {
        let name = session_file_name(index);
        let line = match parse_log(Path::new(&name), text.as_bytes()) {
            Err(err) => format!("unreadable: {err}"),
            Ok(log) => {
                let own = log.own_events();
                let calls = own
                    .iter()
                    .filter(|e| matches!(e, Event::ModelRequest { .. }))
                    .count();
                let tools = own
                    .iter()
                    .filter(|e| matches!(e, Event::ToolCall { .. }))
                    .count();
                let (mut input, mut output, mut cache_read, mut cache_write) =
                    (0u64, 0u64, 0u64, 0u64);
                for event in own {
                    if let Event::AssistantChunk {
                        chunk: Chunk::Stop { usage, .. },
                        ..
                    } = event
                    {
                        input = input.saturating_add(usage.input_tokens);
                        output = output.saturating_add(usage.output_tokens);
                        cache_read =
                            cache_read.saturating_add(usage.cache_read_input_tokens.unwrap_or(0));
                        cache_write = cache_write
                            .saturating_add(usage.cache_creation_input_tokens.unwrap_or(0));
                    }
                }
                let parent = log
                    .header
                    .parent_session
                    .as_deref()
                    .map(|p| format!(" of {p}"))
                    .unwrap_or_default();
                format!(
                    "{} {}{parent}: {calls} model call(s), {tools} tool call(s), tokens in {input} out {output} cache-read {cache_read} cache-write {cache_write}",
                    log.header.id,
                    log.header.backend.as_str(),
                )
            }
        };
        out.push_str(&format!("# {name}: {line}\n"));
    }
    out
}

/// How one expected file compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileCheck {
    /// Byte-identical.
    Same {
        /// The file name.
        name: String,
    },
    /// Both exist and differ.
    Differs {
        /// The file name.
        name: String,
        /// Unified diff, expected -> actual.
        diff: String,
    },
    /// The run produced it but there is no expected file (e.g. an extra session log).
    MissingExpected {
        /// The file name.
        name: String,
        /// Unified diff from nothing.
        diff: String,
    },
    /// The expected file exists but the run did not produce it (a missing session log).
    NotProduced {
        /// The file name.
        name: String,
    },
}

impl FileCheck {
    /// Whether this is a match.
    pub fn is_same(&self) -> bool {
        matches!(self, FileCheck::Same { .. })
    }

    /// The file name.
    pub fn name(&self) -> &str {
        match self {
            FileCheck::Same { name }
            | FileCheck::Differs { name, .. }
            | FileCheck::MissingExpected { name, .. }
            | FileCheck::NotProduced { name } => name,
        }
    }
}

/// Compares a run with the expected files in `dir`: the transcript, and every
/// session log either side has.
pub fn compare(dir: &Path, snapshot: &Snapshot) -> Result<Vec<FileCheck>, HarnessError> {
    let mut checks = Vec::new();
    let produced = snapshot.files();
    for (name, actual) in &produced {
        let path = dir.join(name);
        let expected = match std::fs::read(&path) {
            Ok(bytes) => Some(bytes),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => return Err(HarnessError::Io { path, error }),
        };
        checks.push(match expected {
            None => FileCheck::MissingExpected {
                name: name.clone(),
                diff: unified_diff(name, "", actual),
            },
            Some(bytes) if bytes == actual.as_bytes() => FileCheck::Same { name: name.clone() },
            Some(bytes) => FileCheck::Differs {
                name: name.clone(),
                diff: unified_diff(name, &String::from_utf8_lossy(&bytes), actual),
            },
        });
    }
    for (index, _) in stale_logs(dir, snapshot)? {
        checks.push(FileCheck::NotProduced {
            name: session_file_name(index),
        });
    }
    Ok(checks)
}

/// The expected session logs in `dir` that `snapshot` did not produce (index, path).
fn stale_logs(dir: &Path, snapshot: &Snapshot) -> Result<Vec<(usize, PathBuf)>, HarnessError> {
    let mut logs = indexed_log_files(dir)?;
    logs.retain(|(index, _)| *index >= snapshot.session_logs.len());
    Ok(logs)
}

/// A unified diff with file headers, three lines of context.
pub fn unified_diff(name: &str, expected: &str, actual: &str) -> String {
    similar::TextDiff::from_lines(expected, actual)
        .unified_diff()
        .context_radius(3)
        .missing_newline_hint(true)
        .header(&format!("expected/{name}"), &format!("actual/{name}"))
        .to_string()
}

/// Writes `bytes` to `path`; a file fanout creates is 0600 (an existing
/// file keeps the mode its owner gave it).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    fanout_types::private_open_options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?
        .write_all(bytes)
}

/// Writes a run's outputs as the expected files of `dir`, removing expected
/// session logs the run no longer produces. Returns the names written.
pub fn write_expected(dir: &Path, snapshot: &Snapshot) -> Result<Vec<String>, HarnessError> {
    let mut written = Vec::new();
    for (name, content) in snapshot.files() {
        let path = dir.join(&name);
        write_private(&path, content.as_bytes()).map_err(HarnessError::io(&path))?;
        written.push(name);
    }
    for (_, path) in stale_logs(dir, snapshot)? {
        std::fs::remove_file(&path).map_err(HarnessError::io(&path))?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(logs: &[&str]) -> Snapshot {
        Snapshot {
            transcript: "# t\n-> a\n".into(),
            session_logs: logs.iter().map(ToString::to_string).collect(),
        }
    }

    fn names(checks: &[FileCheck], same: bool) -> Vec<&str> {
        checks
            .iter()
            .filter(|c| c.is_same() == same)
            .map(FileCheck::name)
            .collect()
    }

    #[test]
    fn compare_sees_changes_extra_and_missing_logs() {
        let dir = tempfile::tempdir().unwrap();
        let run = snapshot(&["p\n", "c1\n"]);
        assert_eq!(
            write_expected(dir.path(), &run).unwrap(),
            ["transcript.txt", "session.jsonl", "session.1.jsonl"]
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("session.jsonl"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let checks = compare(dir.path(), &run).unwrap();
        assert_eq!(names(&checks, false), Vec::<&str>::new());

        let changed = snapshot(&["p\n", "c1 changed\n", "c2\n"]);
        let checks = compare(dir.path(), &changed).unwrap();
        assert_eq!(
            names(&checks, false),
            ["session.1.jsonl", "session.2.jsonl"]
        );
        let FileCheck::Differs { diff, .. } = &checks[2] else {
            panic!("{checks:?}")
        };
        assert!(diff.contains("--- expected/session.1.jsonl\n+++ actual/session.1.jsonl"));
        assert!(diff.contains("-c1\n+c1 changed\n"), "{diff}");
        assert!(matches!(checks[3], FileCheck::MissingExpected { .. }));

        let fewer = snapshot(&["p\n"]);
        let checks = compare(dir.path(), &fewer).unwrap();
        assert_eq!(
            checks.last(),
            Some(&FileCheck::NotProduced {
                name: "session.1.jsonl".into()
            })
        );
        // Writing the smaller run removes the stale expected log.
        write_expected(dir.path(), &fewer).unwrap();
        assert!(!dir.path().join("session.1.jsonl").exists());
        assert!(
            compare(dir.path(), &fewer)
                .unwrap()
                .iter()
                .all(FileCheck::is_same)
        );
    }
}
