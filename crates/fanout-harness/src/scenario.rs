//! `scenario.toml`: what a snapshot scenario runs.
//!
//! ```toml
//! description = "The parent delegates two subtasks to two spawn children."
//! # Model name to record with (a replay reports the recorded one).
//! model = "scripted-fixture"
//! # Prompts sent in order, in one ACP session.
//! prompts = ["Survey this project."]
//!
//! [workspace]            # the session cwd, created fresh for every run
//! dirs = ["docs"]
//! [workspace.files]
//! "README.md" = "# demo\n"
//!
//! [agent]                # optional
//! # argv of the agent; placeholders {fanout} {scenario} {sessions_root} {model}
//! command = ["{fanout}", "agent", "--provider", "replay", "--scenario", "{scenario}",
//!            "--model", "{model}", "--sessions-root", "{sessions_root}"]
//! timeout_secs = 60      # per ACP message
//!
//! [client]
//! subagents = true       # advertise clientCapabilities.subagents
//! ```

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::error::HarnessError;

/// The scenario's description file.
pub const SCENARIO_FILE: &str = "scenario.toml";
/// The expected, normalised ACP transcript.
pub const TRANSCRIPT_FILE: &str = "transcript.txt";
/// Placeholders an agent command may use.
pub const PLACEHOLDERS: [&str; 4] = ["{fanout}", "{scenario}", "{sessions_root}", "{model}"];

/// The replay command used when `scenario.toml` names none.
pub fn default_replay_command() -> Vec<String> {
    [
        "{fanout}",
        "agent",
        "--provider",
        "replay",
        "--scenario",
        "{scenario}",
        "--model",
        "{model}",
        "--sessions-root",
        "{sessions_root}",
    ]
    .map(String::from)
    .to_vec()
}

/// The values of the [`PLACEHOLDERS`] in an agent command.
#[derive(Debug, Clone, Copy)]
pub struct Placeholders<'a> {
    /// `{fanout}`: the fanout executable.
    pub fanout: &'a Path,
    /// `{scenario}`: the scenario directory.
    pub scenario: &'a Path,
    /// `{sessions_root}`: where the agent writes its session logs.
    pub sessions_root: &'a Path,
    /// `{model}`: the model name.
    pub model: &'a str,
}

impl Placeholders<'_> {
    /// `argv` with every placeholder replaced by its value.
    pub fn substitute(&self, argv: &[String]) -> Vec<String> {
        argv.iter()
            .map(|arg| {
                arg.replace("{fanout}", &self.fanout.to_string_lossy())
                    .replace("{scenario}", &self.scenario.to_string_lossy())
                    .replace("{sessions_root}", &self.sessions_root.to_string_lossy())
                    .replace("{model}", self.model)
            })
            .collect()
    }
}

const DEFAULT_TIMEOUT_SECS: u64 = 60;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioToml {
    /// For readers of the file: checked to be text, never used.
    #[serde(default, rename = "description")]
    _description: Option<String>,
    #[serde(default)]
    model: Option<String>,
    prompts: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    workspace: WorkspaceToml,
    #[serde(default)]
    agent: AgentToml,
    #[serde(default)]
    client: ClientToml,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkspaceToml {
    #[serde(default)]
    dirs: Vec<Spanned<String>>,
    #[serde(default)]
    files: BTreeMap<Spanned<String>, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentToml {
    #[serde(default)]
    command: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    timeout_secs: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientToml {
    #[serde(default = "yes")]
    subagents: bool,
}

impl Default for ClientToml {
    fn default() -> Self {
        Self { subagents: true }
    }
}

fn yes() -> bool {
    true
}

/// A loaded, validated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The scenario directory.
    pub dir: PathBuf,
    /// Model name to record with.
    pub model: Option<String>,
    /// Prompts, sent in order in one session.
    pub prompts: Vec<String>,
    /// Directories to create in the workspace (relative).
    pub workspace_dirs: Vec<PathBuf>,
    /// Files to create in the workspace (relative path, content).
    pub workspace_files: Vec<(PathBuf, String)>,
    /// The replay agent's argv with placeholders; `None` for the default.
    pub agent_command: Option<Vec<String>>,
    /// How long to wait for any one ACP message.
    pub timeout: Duration,
    /// Whether the client advertises `clientCapabilities.subagents`.
    pub client_subagents: bool,
}

impl Scenario {
    /// Reads `<dir>/scenario.toml`.
    pub fn load(dir: &Path) -> Result<Self, HarnessError> {
        let path = dir.join(SCENARIO_FILE);
        let text = std::fs::read_to_string(&path).map_err(HarnessError::io(&path))?;
        Self::parse(dir, &path, &text)
    }

    /// Parses scenario text; `path` names the file in errors.
    pub fn parse(dir: &Path, path: &Path, text: &str) -> Result<Self, HarnessError> {
        let bad = |span: Option<Range<usize>>, message: String| HarnessError::Scenario {
            path: path.to_path_buf(),
            line: span.map(|s| line_of(text, s.start)),
            message,
        };
        let raw: ScenarioToml =
            toml::from_str(text).map_err(|err| bad(err.span(), err.message().to_string()))?;
        if raw.prompts.get_ref().is_empty() {
            return Err(bad(
                Some(raw.prompts.span()),
                "`prompts` needs at least one prompt".into(),
            ));
        }
        let mut prompts = Vec::new();
        for prompt in raw.prompts.into_inner() {
            if prompt.get_ref().trim().is_empty() {
                return Err(bad(Some(prompt.span()), "a prompt is blank".into()));
            }
            prompts.push(prompt.into_inner());
        }
        let relative = |spanned: &Spanned<String>| {
            workspace_path(spanned.get_ref()).map_err(|message| bad(Some(spanned.span()), message))
        };
        let workspace_dirs = raw
            .workspace
            .dirs
            .iter()
            .map(relative)
            .collect::<Result<Vec<_>, _>>()?;
        let mut workspace_files = Vec::new();
        for (name, content) in &raw.workspace.files {
            workspace_files.push((relative(name)?, content.clone()));
        }
        let agent_command = match raw.agent.command {
            None => None,
            Some(command) => {
                let span = command.span();
                let argv = command.into_inner();
                if argv.is_empty() || argv[0].trim().is_empty() {
                    return Err(bad(Some(span), "`agent.command` needs a program".into()));
                }
                if let Some(unknown) = argv.iter().find_map(|arg| unknown_placeholder(arg)) {
                    return Err(bad(
                        Some(span),
                        format!(
                            "unknown placeholder {unknown} in `agent.command` (known: {})",
                            PLACEHOLDERS.join(" ")
                        ),
                    ));
                }
                Some(argv)
            }
        };
        let timeout_secs = match raw.agent.timeout_secs {
            None => DEFAULT_TIMEOUT_SECS,
            Some(secs) if *secs.get_ref() == 0 => {
                return Err(bad(
                    Some(secs.span()),
                    "`timeout_secs` must be positive".into(),
                ));
            }
            Some(secs) => secs.into_inner(),
        };
        Ok(Self {
            dir: dir.to_path_buf(),
            model: raw.model.filter(|m| !m.trim().is_empty()),
            prompts,
            workspace_dirs,
            workspace_files,
            agent_command,
            timeout: Duration::from_secs(timeout_secs),
            client_subagents: raw.client.subagents,
        })
    }

    /// Creates the workspace layout under `root` (which must exist).
    pub fn create_workspace(&self, root: &Path) -> Result<(), HarnessError> {
        for dir in &self.workspace_dirs {
            let path = root.join(dir);
            std::fs::create_dir_all(&path).map_err(HarnessError::io(&path))?;
        }
        for (file, content) in &self.workspace_files {
            let path = root.join(file);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(HarnessError::io(parent))?;
            }
            std::fs::write(&path, content).map_err(HarnessError::io(&path))?;
        }
        Ok(())
    }
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// A workspace path must stay inside the workspace: relative, no `..`.
fn workspace_path(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    let inside = !text.is_empty()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if inside {
        Ok(path)
    } else {
        Err(format!(
            "workspace path {text:?} must be relative and stay inside the workspace"
        ))
    }
}

/// The first `{…}` in `arg` that is not a known placeholder.
fn unknown_placeholder(arg: &str) -> Option<String> {
    let mut rest = arg;
    while let Some(start) = rest.find('{') {
        let tail = &rest[start..];
        let end = tail.find('}')?;
        let candidate = &tail[..=end];
        if !PLACEHOLDERS.contains(&candidate) {
            return Some(candidate.to_string());
        }
        rest = &tail[end + 1..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Scenario, HarnessError> {
        Scenario::parse(Path::new("s"), Path::new("s/scenario.toml"), text)
    }

    #[test]
    fn parses_a_full_scenario() {
        let scenario = parse(
            r#"
description = "d"
model = "m"
prompts = ["one", "two"]
[workspace]
dirs = ["docs"]
[workspace.files]
"README.md" = "hi"
"src/lib.rs" = "fn x() {}"
[agent]
command = ["{fanout}", "agent", "--sessions-root", "{sessions_root}"]
timeout_secs = 5
[client]
subagents = false
"#,
        )
        .unwrap();
        assert_eq!(scenario.prompts, ["one", "two"]);
        assert_eq!(scenario.workspace_files.len(), 2);
        assert_eq!(scenario.timeout, Duration::from_secs(5));
        assert!(!scenario.client_subagents);
        let minimal = parse("prompts = [\"x\"]").unwrap();
        assert!(minimal.client_subagents);
        assert_eq!(minimal.agent_command, None);
    }

    #[test]
    fn bad_scenarios_name_file_and_line() {
        for (text, line, needle) in [
            ("prompts = [\"x\"\n", 1, ""),
            ("\n\nprompts = []\n", 3, "at least one prompt"),
            ("prompts = [\"x\",\n  \"  \"]\n", 2, "blank"),
            (
                "prompts = [\"x\"]\n[workspace]\ndirs = [\"../up\"]\n",
                3,
                "inside the workspace",
            ),
            (
                "prompts = [\"x\"]\n[workspace.files]\n\"/etc/passwd\" = \"\"\n",
                3,
                "relative",
            ),
            (
                "prompts = [\"x\"]\n[agent]\ncommand = [\"{fanot}\"]\n",
                3,
                "unknown placeholder {fanot}",
            ),
            ("prompts = [\"x\"]\nmodle = \"m\"\n", 2, "unknown field"),
            ("prompts = [\"x\"]\ndescription = 3\n", 2, "invalid type"),
            (
                "description = \"no prompts\"\n",
                1,
                "missing field `prompts`",
            ),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("s/scenario.toml:{line}: ")),
                "{err}"
            );
            assert!(err.contains(needle), "{err} should contain {needle}");
        }
    }
}
