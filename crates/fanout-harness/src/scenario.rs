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
//!
//! A scenario whose agent is a third-party command replays a cassette
//! (DESIGN 5.5) instead of session logs:
//!
//! ```toml
//! [agent]
//! install = "../../tools/test-agents/claude-acp-101/install.sh"  # {install}: its last stdout line
//! command = ["{install}/bin/claude-agent-acp"]
//! base_url_env = "ANTHROPIC_BASE_URL"   # set to the replay (or recording) server
//! cassette = "cassette"                 # the recorded model traffic, beside scenario.toml
//! settle_secs = 3                       # model traffic quiet this long ends the run
//! [agent.env]                           # the agent's whole environment, with PATH, LANG, TERM
//! HOME = "{home}"
//! [home]                                # the agent's fresh home, made for every run
//! dirs = [".claude"]
//! [home.files]
//! ".codex/config.toml" = "base_url = \"{base_url}/v1\""
//! [home.links]
//! ".config/opencode/node_modules" = "{install}/node_modules"
//! [transcript]
//! order = "lanes"   # notifications grouped by session, kind and tool call (concurrent agents)
//! ignore_updates = ["config_option_update"]   # session/update kinds left out
//! ignore_text = ["Warning: Model metadata"]   # received lines holding this text left out
//! ```
//!
//! Placeholders in the agent's command, environment and home: `{fanout}`,
//! `{scenario}`, `{sessions_root}`, `{model}`, `{install}`, `{home}`,
//! `{workspace}`, `{base_url}`, `{run}` (the run's scratch root).

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
/// Placeholders an agent command, its environment and its home files may use.
pub const PLACEHOLDERS: [&str; 9] = [
    "{fanout}",
    "{scenario}",
    "{sessions_root}",
    "{model}",
    "{install}",
    "{home}",
    "{workspace}",
    "{base_url}",
    "{run}",
];

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

/// The values of the [`PLACEHOLDERS`].
#[derive(Debug, Clone, Default)]
pub struct Placeholders {
    /// (placeholder, value) pairs.
    values: Vec<(&'static str, String)>,
}

impl Placeholders {
    /// The values of the placeholders every run has.
    pub fn new(fanout: &Path, scenario: &Path, sessions_root: &Path, model: &str) -> Self {
        let mut placeholders = Self::default();
        placeholders.set("{fanout}", &fanout.to_string_lossy());
        placeholders.set("{scenario}", &scenario.to_string_lossy());
        placeholders.set("{sessions_root}", &sessions_root.to_string_lossy());
        placeholders.set("{model}", model);
        placeholders
    }

    /// Gives `placeholder` (one of [`PLACEHOLDERS`]) a value.
    pub fn set(&mut self, placeholder: &'static str, value: &str) {
        self.values.retain(|(known, _)| *known != placeholder);
        self.values.push((placeholder, value.to_string()));
    }

    /// `text` with every placeholder that has a value replaced by it.
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (placeholder, value) in &self.values {
            if out.contains(placeholder) {
                out = out.replace(placeholder, value);
            }
        }
        out
    }

    /// `argv` with every placeholder replaced by its value.
    pub fn substitute(&self, argv: &[String]) -> Vec<String> {
        argv.iter().map(|arg| self.apply(arg)).collect()
    }
}

const DEFAULT_TIMEOUT_SECS: u64 = 60;
const DEFAULT_SETTLE_SECS: u64 = 2;

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
    home: HomeToml,
    #[serde(default)]
    client: ClientToml,
    #[serde(default)]
    transcript: TranscriptToml,
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
    #[serde(default)]
    install: Option<Spanned<String>>,
    #[serde(default)]
    base_url_env: Option<Spanned<String>>,
    #[serde(default)]
    cassette: Option<Spanned<String>>,
    #[serde(default)]
    settle_secs: Option<Spanned<f64>>,
    #[serde(default)]
    env: BTreeMap<String, Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HomeToml {
    #[serde(default)]
    dirs: Vec<Spanned<String>>,
    #[serde(default)]
    files: BTreeMap<Spanned<String>, Spanned<String>>,
    #[serde(default)]
    links: BTreeMap<Spanned<String>, Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TranscriptToml {
    #[serde(default)]
    order: Option<Spanned<String>>,
    #[serde(default)]
    ignore_updates: Vec<Spanned<String>>,
    #[serde(default)]
    ignore_text: Vec<Spanned<String>>,
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

/// How the transcript's lines are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TranscriptOrder {
    /// As they arrived (one agent process writing in a fixed order).
    #[default]
    Arrival,
    /// Requests and their answers as they arrived, then the notifications
    /// grouped in lanes (session, update kind, tool call), each lane in
    /// arrival order and the lanes sorted: concurrent subagents of a
    /// third-party agent interleave differently on every run.
    Lanes,
}

/// A scenario's third-party agent: what it needs besides its command.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ThirdParty {
    /// An installer to run first; its last stdout line is `{install}`.
    pub install: Option<PathBuf>,
    /// The environment variable set to the server's base URL.
    pub base_url_env: Option<String>,
    /// The cassette directory.
    pub cassette: PathBuf,
    /// How long the model traffic must be quiet for the run to end.
    pub settle: Duration,
    /// The agent's environment (besides PATH, LANG, LC_ALL, TERM, SHELL).
    pub env: Vec<(String, String)>,
    /// Directories made in the fresh home.
    pub home_dirs: Vec<PathBuf>,
    /// Files written in the fresh home (relative path, text with placeholders).
    pub home_files: Vec<(PathBuf, String)>,
    /// Symbolic links made in the fresh home (relative path, target with placeholders).
    pub home_links: Vec<(PathBuf, String)>,
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
    /// How the transcript is ordered.
    pub transcript_order: TranscriptOrder,
    /// `session/update` kinds left out of the transcript (an agent's racy
    /// intermediate states, declared per scenario).
    pub ignore_updates: Vec<String>,
    /// Received lines holding any of these texts are left out of the
    /// transcript (an agent's racy warnings, declared per scenario).
    pub ignore_text: Vec<String>,
    /// The third-party agent's needs, when the scenario replays a cassette.
    pub third_party: Option<ThirdParty>,
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
        let transcript_order = match raw.transcript.order {
            None => TranscriptOrder::Arrival,
            Some(order) => match order.get_ref().as_str() {
                "arrival" => TranscriptOrder::Arrival,
                "lanes" => TranscriptOrder::Lanes,
                other => {
                    return Err(bad(
                        Some(order.span()),
                        format!("`transcript.order` is \"arrival\" or \"lanes\", not {other:?}"),
                    ));
                }
            },
        };
        let placeholders_ok =
            |spanned: &Spanned<String>, what: &str| match unknown_placeholder(spanned.get_ref()) {
                None => Ok(()),
                Some(unknown) => Err(bad(
                    Some(spanned.span()),
                    format!(
                        "unknown placeholder {unknown} in {what} (known: {})",
                        PLACEHOLDERS.join(" ")
                    ),
                )),
            };
        let third_party = match raw.agent.cassette {
            None => {
                let stray = [
                    raw.agent.install.as_ref().map(|s| ("install", s.span())),
                    raw.agent
                        .base_url_env
                        .as_ref()
                        .map(|s| ("base_url_env", s.span())),
                    raw.agent
                        .settle_secs
                        .as_ref()
                        .map(|s| ("settle_secs", s.span())),
                ]
                .into_iter()
                .flatten()
                .next()
                .or_else(|| raw.agent.env.values().next().map(|v| ("env", v.span())))
                .or_else(|| raw.home.dirs.first().map(|v| ("home", v.span())))
                .or_else(|| raw.home.files.keys().next().map(|v| ("home", v.span())))
                .or_else(|| raw.home.links.keys().next().map(|v| ("home", v.span())));
                if let Some((field, span)) = stray {
                    return Err(bad(
                        Some(span),
                        format!(
                            "`{field}` is for an agent that replays a cassette: set `agent.cassette`"
                        ),
                    ));
                }
                None
            }
            Some(cassette) => {
                let Some(command) = &agent_command else {
                    return Err(bad(
                        Some(cassette.span()),
                        "a scenario with `agent.cassette` needs `agent.command`".into(),
                    ));
                };
                let cassette_dir = workspace_path(cassette.get_ref())
                    .map_err(|message| bad(Some(cassette.span()), message))?;
                let settle = match raw.agent.settle_secs {
                    None => Duration::from_secs(DEFAULT_SETTLE_SECS),
                    Some(secs)
                        if !(secs.get_ref().is_finite()
                            && *secs.get_ref() > 0.0
                            && *secs.get_ref() < 3600.0) =>
                    {
                        return Err(bad(
                            Some(secs.span()),
                            "`settle_secs` must be a positive number of seconds".into(),
                        ));
                    }
                    Some(secs) => Duration::from_secs_f64(secs.into_inner()),
                };
                let mut env = Vec::new();
                for (name, value) in &raw.agent.env {
                    placeholders_ok(value, "`agent.env`")?;
                    env.push((name.clone(), value.get_ref().clone()));
                }
                let home_path = |spanned: &Spanned<String>| {
                    workspace_path(spanned.get_ref()).map_err(|message| {
                        bad(Some(spanned.span()), message.replace("workspace", "home"))
                    })
                };
                let mut home_files = Vec::new();
                for (name, text) in &raw.home.files {
                    placeholders_ok(text, "`home.files`")?;
                    home_files.push((home_path(name)?, text.get_ref().clone()));
                }
                let mut home_links = Vec::new();
                for (name, target) in &raw.home.links {
                    placeholders_ok(target, "`home.links`")?;
                    home_links.push((home_path(name)?, target.get_ref().clone()));
                }
                let base_url_env = raw.agent.base_url_env.map(Spanned::into_inner);
                let mentions_base_url = command.iter().any(|arg| arg.contains("{base_url}"))
                    || env.iter().any(|(_, value)| value.contains("{base_url}"))
                    || home_files
                        .iter()
                        .any(|(_, text)| text.contains("{base_url}"));
                if base_url_env.is_none() && !mentions_base_url {
                    return Err(bad(Some(cassette.span()), "the agent is never told the replay server's URL: set `agent.base_url_env` or use {base_url}".into()));
                }
                Some(ThirdParty {
                    install: raw
                        .agent
                        .install
                        .map(|install| dir.join(install.into_inner())),
                    base_url_env,
                    cassette: cassette_dir,
                    settle,
                    env,
                    home_dirs: raw
                        .home
                        .dirs
                        .iter()
                        .map(home_path)
                        .collect::<Result<_, _>>()?,
                    home_files,
                    home_links,
                })
            }
        };
        let mut ignore_updates = Vec::new();
        for kind in raw.transcript.ignore_updates {
            let valid = !kind.get_ref().is_empty()
                && kind
                    .get_ref()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_');
            if !valid {
                return Err(bad(
                    Some(kind.span()),
                    format!(
                        "`transcript.ignore_updates`: {:?} is not a sessionUpdate kind",
                        kind.get_ref()
                    ),
                ));
            }
            ignore_updates.push(kind.into_inner());
        }
        let mut ignore_text = Vec::new();
        for text in raw.transcript.ignore_text {
            if text.get_ref().trim().is_empty() {
                return Err(bad(
                    Some(text.span()),
                    "`transcript.ignore_text`: an empty text would leave out every line".into(),
                ));
            }
            ignore_text.push(text.into_inner());
        }
        Ok(Self {
            ignore_text,
            transcript_order,
            ignore_updates,
            third_party,
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
/// Only `{name}` with a lower-case name counts: the braces of JSON or TOML in
/// a home file are not placeholders.
fn unknown_placeholder(arg: &str) -> Option<String> {
    let mut rest = arg;
    while let Some(start) = rest.find('{') {
        let tail = &rest[start..];
        let name_len = tail[1..]
            .bytes()
            .take_while(|b| b.is_ascii_lowercase() || *b == b'_')
            .count();
        if name_len > 0 && tail.as_bytes().get(1 + name_len) == Some(&b'}') {
            let candidate = &tail[..name_len + 2];
            if !PLACEHOLDERS.contains(&candidate) {
                return Some(candidate.to_string());
            }
        }
        rest = &tail[1..];
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
    fn only_lower_case_names_in_braces_are_placeholders() {
        assert_eq!(unknown_placeholder("{home}/.config/{install}"), None);
        assert_eq!(
            unknown_placeholder("{home}/{nope}"),
            Some("{nope}".to_string())
        );
        // The braces of JSON or TOML in a home file are not placeholders.
        let json = r#"{"provider": {"mock": {"options": {"baseURL": "{base_url}/v1"}}}}"#;
        assert_eq!(unknown_placeholder(json), None);
        assert_eq!(unknown_placeholder("{} {A} {a-b} {"), None);
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
