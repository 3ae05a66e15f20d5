//! The snapshot harness (DESIGN 5.4, 5.5): run a scenario's agent with a
//! fresh sessions root (and, for a third-party agent, a fresh home and a
//! cassette server), drive its prompts over ACP, normalise the transcript and
//! every session log it wrote, and compare them with the expected files.

mod compare;
mod lanes;
mod third_party;

use std::path::{Path, PathBuf};

use fanout_replay::{ScenarioScripts, session_file_name};
use fanout_sessionlog::{Chunk, Event, LogEntry, list_logs, parse_log};

pub use compare::{FileCheck, compare, unified_diff, write_expected};

use crate::acp::{AgentCommand, Direction, DriveOutcome, DrivePlan, ExitPolicy, drive};
use crate::error::HarnessError;
use crate::normalize::Normalizer;
use crate::scenario::{
    Placeholders, SCENARIO_FILE, Scenario, TRANSCRIPT_FILE, TranscriptOrder, default_replay_command,
};

/// Environment variables holding provider keys: removed for replay runs, so a
/// replay provably needs none.
pub const API_KEY_VARS: [&str; 2] = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"];

/// How the agent gets its model responses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunMode {
    /// Replay the scenario's recordings: its session logs, or its cassette
    /// (`run`, `refresh`).
    Replay,
    /// Record: run `fanout agent` against a provider (`record`). Whether the
    /// provider is usable (its key, or a custom base URL) is the agent's rule,
    /// which this crate does not know: the caller checks it before running.
    Record(RecordProvider),
    /// Record a third-party agent's cassette through `replay record` against
    /// an upstream (`record --upstream`).
    RecordCassette(CassetteRecording),
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

/// Where a cassette recording forwards to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CassetteRecording {
    /// The model API the recording proxy forwards to.
    pub upstream: String,
    /// Replace the scenario's cassette.
    pub force: bool,
}

/// The normalised outputs of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// `transcript.txt`: a summary of the session logs (and cassette), then
    /// every ACP line.
    pub transcript: String,
    /// The session logs, primary first (`session.jsonl`, `session.1.jsonl`, …).
    pub session_logs: Vec<String>,
    /// Requests the replay server could not answer (a cassette replay).
    pub misses: Vec<String>,
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
    if let Some(third_party) = &scenario.third_party {
        return third_party::run(scenario, third_party, fanout, mode).await;
    }
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
        RunMode::RecordCassette(_) => {
            return Err(scenario_error(
                scenario,
                "this scenario replays session logs: record it with --provider, not --upstream",
            ));
        }
    };
    let dirs = RunDirs::create(scenario)?;
    let placeholders = dirs.placeholders(fanout, model.as_deref().unwrap_or(""));
    let argv = placeholders.substitute(&argv);
    let Some(mut command) = AgentCommand::from_argv(&argv) else {
        return Err(scenario_error(scenario, "the agent command is empty"));
    };
    if *mode == RunMode::Replay {
        command.env_remove = API_KEY_VARS.map(String::from).to_vec();
    }
    let outcome = drive(&command, &dirs.plan(scenario, ExitPolicy::Clean)).await?;
    let logs = harvest(&dirs.sessions_root)?;
    let mut normalizer = dirs.normalizer(fanout, &logs, &outcome);
    let lines = transcript_lines(&outcome, scenario, &[]);
    let session_logs = normalizer.logs_and_lines(&logs, &lines);
    let mut transcript = summary(&session_logs);
    for line in &lines {
        transcript.push_str(&normalizer.normalize(line));
        transcript.push('\n');
    }
    Ok(Snapshot {
        transcript,
        session_logs,
        misses: Vec::new(),
    })
}

fn scenario_error(scenario: &Scenario, message: &str) -> HarnessError {
    HarnessError::Scenario {
        path: scenario.dir.join(SCENARIO_FILE),
        line: None,
        message: message.to_string(),
    }
}

/// A run's scratch directories: removed when dropped.
struct RunDirs {
    work: tempfile::TempDir,
    workspace: PathBuf,
    sessions_root: PathBuf,
    scenario_dir: PathBuf,
}

impl RunDirs {
    /// A fresh scratch root with the scenario's workspace.
    fn create(scenario: &Scenario) -> Result<Self, HarnessError> {
        let work = tempfile::Builder::new()
            .prefix("fanout-snapshot-")
            .tempdir()
            .map_err(HarnessError::io(std::env::temp_dir()))?;
        let workspace = work.path().join("workspace");
        let sessions_root = work.path().join("sessions");
        std::fs::create_dir_all(&workspace).map_err(HarnessError::io(&workspace))?;
        scenario.create_workspace(&workspace)?;
        let workspace = std::fs::canonicalize(&workspace).map_err(HarnessError::io(&workspace))?;
        Ok(Self {
            work,
            workspace,
            sessions_root,
            scenario_dir: absolute(&scenario.dir)?,
        })
    }

    fn root(&self) -> &Path {
        self.work.path()
    }

    fn placeholders(&self, fanout: &Path, model: &str) -> Placeholders {
        let mut placeholders =
            Placeholders::new(fanout, &self.scenario_dir, &self.sessions_root, model);
        placeholders.set("{workspace}", &self.workspace.to_string_lossy());
        placeholders.set("{run}", &self.root().to_string_lossy());
        placeholders
    }

    fn plan(&self, scenario: &Scenario, exit: ExitPolicy) -> DrivePlan {
        DrivePlan {
            cwd: self.workspace.clone(),
            prompts: scenario.prompts.clone(),
            client_subagents: scenario.client_subagents,
            timeout: scenario.timeout,
            exit,
        }
    }

    /// A normaliser that knows the run's paths and session ids.
    fn normalizer(&self, fanout: &Path, logs: &Harvest, outcome: &DriveOutcome) -> Normalizer {
        let mut normalizer = Normalizer::new();
        for (index, entry) in logs.entries.iter().enumerate() {
            let name = session_file_name(index);
            let placeholder = format!("<{}>", name.trim_end_matches(".jsonl"));
            normalizer.session(&entry.header.id, &placeholder);
        }
        normalizer.session(&outcome.session_id, "<session>");
        normalizer.literal(&self.workspace.to_string_lossy(), "<CWD>");
        normalizer.literal(&self.sessions_root.to_string_lossy(), "<SESSIONS>");
        normalizer.literal(&self.root().to_string_lossy(), "<TMP>");
        if let Ok(canonical_work) = std::fs::canonicalize(self.root()) {
            normalizer.literal(&canonical_work.to_string_lossy(), "<TMP>");
        }
        normalizer.literal(&self.scenario_dir.to_string_lossy(), "<SCENARIO>");
        normalizer.literal(&fanout.to_string_lossy(), "<FANOUT>");
        normalizer
    }
}

/// Every session log under a sessions root, primary first, with its text.
struct Harvest {
    entries: Vec<LogEntry>,
    texts: Vec<String>,
}

fn harvest(sessions_root: &Path) -> Result<Harvest, HarnessError> {
    // Every log under the root, all cwd buckets, primary first.
    let entries = list_logs(sessions_root)?;
    let mut texts = Vec::with_capacity(entries.len());
    for entry in &entries {
        let text = std::fs::read_to_string(&entry.path).map_err(HarnessError::io(&entry.path))?;
        texts.push(text);
    }
    Ok(Harvest { entries, texts })
}

impl Normalizer {
    /// Learns the timestamps of the logs and lines, and returns the logs normalised.
    fn logs_and_lines(&mut self, logs: &Harvest, lines: &[String]) -> Vec<String> {
        self.learn_timestamps(
            logs.texts
                .iter()
                .map(String::as_str)
                .chain(lines.iter().map(String::as_str)),
        );
        logs.texts.iter().map(|log| self.normalize(log)).collect()
    }
}

/// Whether `line` is a `session/update` of one of the `ignored` kinds.
fn is_ignored_update(line: &str, ignored: &[String]) -> bool {
    if ignored.is_empty() {
        return false;
    }
    serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .and_then(|message| {
            message
                .pointer("/params/update/sessionUpdate")
                .and_then(serde_json::Value::as_str)
                .map(|kind| ignored.iter().any(|ignored| ignored == kind))
        })
        .unwrap_or(false)
}

/// The marker between the control lines and the lanes of a `lanes` transcript.
const LANES_MARKER: &str =
    "# lanes: notifications by session, update kind and tool call, each in arrival order";

/// The transcript's lines, `->` sent and `<-` received, in the scenario's
/// order (`known_ids`: run-specific ids and their placeholders, for sorting lanes).
fn transcript_lines(
    outcome: &DriveOutcome,
    scenario: &Scenario,
    known_ids: &[(String, String)],
) -> Vec<String> {
    let kept: Vec<crate::acp::TranscriptLine> = outcome
        .transcript
        .iter()
        .filter(|line| !is_ignored_update(&line.text, &scenario.ignore_updates))
        .filter(|line| {
            line.direction == Direction::Sent
                || !scenario
                    .ignore_text
                    .iter()
                    .any(|text| line.text.contains(text.as_str()))
        })
        .cloned()
        .collect();
    let arrow = |line: &crate::acp::TranscriptLine| {
        let arrow = match line.direction {
            Direction::Sent => "->",
            Direction::Received => "<-",
        };
        format!("{arrow} {}", line.text)
    };
    match scenario.transcript_order {
        TranscriptOrder::Arrival => kept.iter().map(arrow).collect(),
        TranscriptOrder::Lanes => {
            let lanes = lanes::order(&kept, known_ids);
            let mut lines: Vec<String> = lanes.control.iter().map(arrow).collect();
            lines.push(LANES_MARKER.to_string());
            lines.extend(lanes.lanes.iter().flatten().map(arrow));
            lines
        }
    }
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
