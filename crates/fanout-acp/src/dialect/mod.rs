//! The agent dialects of DESIGN 3.3: one module per agent, each behind [`DialectRules`],
//! the one registry of them ([`REGISTRY`]) and the rule that decides which of them reads
//! a connection.
//!
//! A dialect is known by its place in [`REGISTRY`] and nowhere else: its [`Dialect`] value,
//! its name, the tests that every dialect has its fixtures and its docs row, the fuzzers'
//! agent names and the CLI's harness names all derive from that slice.
//!
//! Which rules apply is decided per connection ([`Rules`]). The agent names itself in its
//! `initialize` response (`agentInfo.name`); when that name belongs to a dialect, only that
//! dialect's rules read the connection, because the same shape can mean different things
//! for two agents (a Copilot tool titled `task` is not OpenCode's launch). Without a known
//! name (an old transcript, an import of a partial stream, an agent we do not know) every
//! dialect's shape rules apply, in the order of [`REGISTRY`]: the first dialect whose
//! launch signal matches a `tool_call` owns the row.
//!
//! ACP's own subagent sessions (`subagent_update`) are protocol, not an agent's dialect:
//! they apply on every connection ([`Dialect::ACP_NATIVE`]), with the field mapping of the
//! named agent ([`NativeFields`]).
//!
//! What a dialect correlates across frames is its state on the connection
//! ([`DialectState`], made by [`DialectRules::state`]), in the dialect's own module:
//! Codex's cards (lifecycle frames on other wire ids, `codex/cards.rs`), Cursor's parked
//! `cursor/task` side requests (`cursor.rs`), the work cycles and messages of ACP's
//! subagent sessions (`native/sessions.rs`). The tracker calls the hooks and names no
//! agent.

mod auggie;
mod claude;
mod codex;
mod copilot;
mod cursor;
mod fanout;
mod gemini;
mod native;
mod opencode;
mod qwen;
pub(crate) mod state;

use std::fmt;

use serde_json::Value;

use crate::frame::FrameView;
use crate::subagent::SubagentTask;

pub(crate) use native::{NativeField, NativeFields};
pub(crate) use state::DialectState;

/// Every agent dialect, and the only list of them, in the order their launch signals are
/// tried when the agent did not name itself: from the most specific signal to the least.
/// - fanout: its own `_meta.fanout` namespace;
/// - Claude: `_meta.claudeCode.toolName`;
/// - Codex: `_meta.codex` or `spawnAgent` with thread ids, lifecycle inputs (its state
///   claims keyed frames before any launch signal runs, as they correlate across ids);
/// - Qwen: `_meta.toolName == "agent"`;
/// - Copilot: `rawInput.prompt` and `rawInput.agent_type` (its title is free text, the
///   description, so it goes before every title rule);
/// - Cursor: `rawInput._toolName`;
/// - Gemini: the `invoke_agent__` id prefix or its `Delegating to agent '…'` title;
/// - Auggie: the `sub-agent-<type>: …` title;
/// - OpenCode: the bare title `task`, the weakest signal.
///
/// A new dialect is one line here, at the place its launch signal's specificity gives it.
pub(crate) const REGISTRY: &[&dyn DialectRules] = &[
    &fanout::Fanout,
    &claude::Claude,
    &codex::Codex,
    &qwen::Qwen,
    &copilot::Copilot,
    &cursor::Cursor,
    &gemini::Gemini,
    &auggie::Auggie,
    &opencode::OpenCode,
];

// A dialect is its index in the registry; one value is ACP's subagent sessions.
const _: () = assert!(REGISTRY.len() < u8::MAX as usize);

/// The name of ACP's own subagent sessions as a dialect.
const ACP_NATIVE_NAME: &str = "acp-native";

/// Which rule recognised a tool call (or a child session) as a subagent: a dialect of the
/// registry, or ACP's own subagent sessions ([`Dialect::ACP_NATIVE`]). It prints as its
/// [`name`](Dialect::name).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dialect(u8);

impl Dialect {
    /// ACP's own subagent sessions (`subagent_update`), one row per work cycle: protocol,
    /// on every connection, not an agent's dialect.
    pub const ACP_NATIVE: Self = Self(u8::MAX);

    /// Its short stable name (`claude`, `codex`, …, `acp-native`), for logs and tests.
    pub fn name(self) -> &'static str {
        self.rules().map_or(ACP_NATIVE_NAME, DialectRules::name)
    }

    /// The dialect of this name, if any.
    pub fn named(name: &str) -> Option<Self> {
        if name == ACP_NATIVE_NAME {
            return Some(Self::ACP_NATIVE);
        }
        registered()
            .find(|(_, rules)| rules.name() == name)
            .map(|(dialect, _)| dialect)
    }

    /// Every agent dialect, in registry order (ACP's subagent sessions are not one).
    pub fn registered() -> impl Iterator<Item = Self> {
        registered().map(|(dialect, _)| dialect)
    }

    /// The `initialize` `agentInfo.name` values of the agents that speak it.
    pub fn agent_names(self) -> &'static [&'static str] {
        self.rules().map_or(&[], DialectRules::agent_names)
    }

    /// The dialect an agent's `initialize` `agentInfo.name` belongs to (ASCII case is
    /// ignored), if any.
    pub fn for_agent_name(name: &str) -> Option<Self> {
        Self::registered().find(|dialect| {
            dialect
                .agent_names()
                .iter()
                .any(|known| known.eq_ignore_ascii_case(name.trim()))
        })
    }

    /// The dialect whose agent an agent command line runs (ASCII case is ignored), for
    /// naming a session's harness: the first in registry order whose
    /// [`command_names_it`](DialectRules::command_names_it) says so, else the first that
    /// says it may.
    pub fn for_agent_command(command: &str) -> Option<Self> {
        let command = command.to_lowercase();
        let first = |wanted: CommandMatch| {
            registered()
                .find(|(_, rules)| rules.command_names_it(&command) == wanted)
                .map(|(dialect, _)| dialect)
        };
        first(CommandMatch::Names).or_else(|| first(CommandMatch::MayName))
    }

    pub(crate) fn rules(self) -> Option<&'static dyn DialectRules> {
        REGISTRY.get(usize::from(self.0)).copied()
    }
}

impl fmt::Debug for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Every registered dialect with its rules, in registry order.
pub(crate) fn registered() -> impl Iterator<Item = (Dialect, &'static dyn DialectRules)> {
    // The index stays below `u8::MAX` (checked above), so the range never runs out.
    (0_u8..)
        .zip(REGISTRY.iter().copied())
        .map(|(index, rules)| (Dialect(index), rules))
}

/// Whether an agent command line runs a dialect's agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommandMatch {
    /// It does not.
    No,
    /// It names the agent.
    Names,
    /// It may (a name that also shows in other commands' paths): only when none names one.
    MayName,
}

/// A session update (not a tool call) that moves the agent status of an existing row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowSignal {
    /// Which row: the dialect's own rows in the session the update arrived on.
    pub row: RowRef,
    /// The agent status it reports, verbatim.
    pub agent_status: String,
}

/// How a [`RowSignal`] names its row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RowRef {
    /// The wire tool call id of the launch (Qwen's `backgroundTask.toolUseId`).
    ToolCall(String),
    /// The row's agent id (Claude's peer hand-back `from`).
    AgentId(String),
}

/// What a session update other than a tool call (a child's message chunk sent on the
/// parent session) says about the call whose child sent it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Caller<'a> {
    /// The wire tool call id of the launch.
    pub parent: Option<&'a str>,
    /// One model call's token usage, verbatim.
    pub usage: Option<&'a Value>,
}

/// One agent's dialect: what its frames mean. Every method reads one frame and keeps
/// nothing; what a dialect correlates across frames is its state ([`DialectRules::state`]).
///
/// A new dialect is a module (`src/dialect/<name>.rs`, or `<name>/mod.rs` with its state
/// beside it) holding a unit struct that implements this trait, and its line in
/// [`REGISTRY`]. Where the traps agents set go:
/// - **ACP `completed` that only means dispatched** (the child runs on): `enrich` sets
///   `is_async` and leaves the agent status open, never `completed`; a status-less
///   dispatch frame is `dispatched`. What ends the child later moves the agent status:
///   another session update naming the row is a `row_signal`; a later tool call that
///   reports on it (a wait, an output read) is the state's `after` hook.
/// - **A failed child behind ACP `completed`**: `enrich` sees the frame's ACP status
///   (`view.status`) with its result and sets the agent status (`failed`) from what the
///   result says; the tool status stays the wire's. A failure the prompt's end reports is
///   the state's `prompt_ended`.
/// - **A launch whose first frame is a `tool_call_update`**: `launches_on_updates`; the
///   later `tool_call` of the same id finds the row recognised already.
/// - **Inputs only as streamed text**: the state keeps the text per row (its `enrich` hook
///   sees every frame of a recognised row, with the frame's key) and fills the inputs
///   once they parse.
/// - **One call that starts several children**: the state's `plan` creates the rows
///   (their ids derived from the call's with [`allocate_id`]'s tag), fills and emits them,
///   and stops the frame (`Target::Handled`); later frames of the call find the rows the
///   same way.
/// - **A child session named by a field of the call**: `child_session` when the child's
///   own traffic comes on the wire (it nests under the row), else `enrich` into
///   `child_session_id`.
/// - **Two agents with the same shapes**: `agent_names` decides when the agent names
///   itself; without a name, the registry order does (put the more specific signal
///   first, and say which wins and why in the docs row).
///
/// [`allocate_id`]: crate::tracker::rows::RowSession::allocate_id
pub(crate) trait DialectRules: Sync {
    /// The dialect's short stable name, also its module's (`claude`, `codex`, …).
    fn name(&self) -> &'static str;

    /// The `initialize` `agentInfo.name` values of the agents that speak it.
    fn agent_names(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether a launch may first show on a `tool_call_update` (Gemini's lone denial);
    /// otherwise recognition happens on `tool_call` frames only (DESIGN 3.3).
    fn launches_on_updates(&self) -> bool {
        false
    }

    /// The launch signal, on a call's first frame.
    fn is_launch(&self, view: &FrameView<'_>) -> bool;

    /// A recognised launch's payload from its frame (the unit tests' shorthand).
    #[cfg(test)]
    fn recognise(&self, view: &FrameView<'_>) -> Option<SubagentTask> {
        self.is_launch(view).then(|| {
            let mut task = SubagentTask::default();
            self.enrich(&mut task, view);
            task
        })
    }

    /// What a frame of a call these rules recognised says about it, the launch frame
    /// included. Inputs only fill what is empty; results merge by the never-blank rules
    /// of [`SubagentTask`].
    fn enrich(&self, task: &mut SubagentTask, view: &FrameView<'_>);

    /// The parent tool call a frame names, for child tool calls and nested launches.
    fn parent<'a>(&self, _view: &FrameView<'a>) -> Option<&'a str> {
        None
    }

    /// Whether a frame of a recognised call ends the tool call although it carries no
    /// terminal status (Claude's background dispatch, `async_launched`).
    fn dispatched(&self, _view: &FrameView<'_>) -> bool {
        false
    }

    /// A session update of another kind that moves an existing row's agent status
    /// (Qwen's background end, Claude's peer hand-back). Never creates a row.
    fn row_signal(&self, _update_kind: &str, _update: &Value) -> Option<RowSignal> {
        None
    }

    /// The caller a child's message chunk on the parent session names (Qwen).
    fn caller<'a>(&self, _update: &'a Value) -> Option<Caller<'a>> {
        None
    }

    /// How this agent fills `subagent_update`'s `title` and `description`.
    fn native_fields(&self) -> NativeFields {
        NativeFields::PROTOCOL
    }

    /// A child session a frame links by this dialect's own field (besides ACP's
    /// `{"type":"session"}` content blocks): a recognised call's row owns that child's
    /// traffic (fanout's `childSessionId`).
    fn child_session(&self, _view: &FrameView<'_>) -> Option<String> {
        None
    }

    /// The dialect's state on one new connection, for what it correlates across frames
    /// ([`DialectState`]); `me` is the dialect itself, for the rows it recognises.
    fn state(&self, _me: Dialect) -> Option<Box<dyn DialectState>> {
        None
    }

    /// Whether an agent command line (lower case) runs this agent, for the harness a
    /// session names: by default, when it contains the dialect's name.
    fn command_names_it(&self, command: &str) -> CommandMatch {
        if command.contains(self.name()) {
            CommandMatch::Names
        } else {
            CommandMatch::No
        }
    }
}

/// Which dialects read one connection: the named agent's alone, or all of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Rules {
    agent: Option<Dialect>,
}

impl Rules {
    /// After the agent's `initialize` response: its `agentInfo.name`.
    pub(crate) fn for_agent(name: Option<&str>) -> Self {
        Self {
            agent: name.and_then(Dialect::for_agent_name),
        }
    }

    /// The agent's own dialect, when it named itself with a known name.
    pub(crate) fn agent(self) -> Option<Dialect> {
        self.agent
    }

    /// The dialects that apply, in registry order.
    pub(crate) fn active(self) -> impl Iterator<Item = (Dialect, &'static dyn DialectRules)> {
        registered().filter(move |(dialect, _)| self.agent.is_none_or(|agent| *dialect == agent))
    }

    /// Whether a dialect's rules and state read this connection: ACP's own subagent
    /// sessions always, an agent's dialect when the agent named no other.
    pub(crate) fn reads(self, dialect: Dialect) -> bool {
        dialect == Dialect::ACP_NATIVE || self.agent.is_none_or(|agent| agent == dialect)
    }

    /// The dialect of the first launch signal that matches, on a `tool_call` (`is_call`)
    /// or, for the dialects that launch on updates, on the first frame of an unknown call.
    pub(crate) fn recognise(self, view: &FrameView<'_>, is_call: bool) -> Option<Dialect> {
        self.active()
            .filter(|(_, rules)| is_call || rules.launches_on_updates())
            .find(|(_, rules)| rules.is_launch(view))
            .map(|(dialect, _)| dialect)
    }

    /// A recognised launch and its payload from that frame.
    pub(crate) fn launch(
        self,
        view: &FrameView<'_>,
        is_call: bool,
    ) -> Option<(Dialect, SubagentTask)> {
        let dialect = self.recognise(view, is_call)?;
        let mut task = SubagentTask::default();
        enrich(&mut task, dialect, view);
        Some((dialect, task))
    }

    /// The parent tool call a frame names, by the first active rule that reads one.
    pub(crate) fn parent<'a>(self, view: &FrameView<'a>) -> Option<&'a str> {
        self.active().find_map(|(_, rules)| rules.parent(view))
    }

    /// The row signals a session update carries, with the dialect whose rows they touch.
    pub(crate) fn row_signals(self, kind: &str, update: &Value) -> Vec<(Dialect, RowSignal)> {
        self.active()
            .filter_map(|(dialect, rules)| Some((dialect, rules.row_signal(kind, update)?)))
            .collect()
    }

    /// The caller a non-tool session update names, by the first active rule that reads one.
    pub(crate) fn caller<'a>(self, update: &'a Value) -> Option<Caller<'a>> {
        self.active().find_map(|(_, rules)| rules.caller(update))
    }

    /// How `subagent_update` fields map on this connection.
    pub(crate) fn native_fields(self) -> NativeFields {
        self.agent
            .and_then(Dialect::rules)
            .map_or(NativeFields::PROTOCOL, DialectRules::native_fields)
    }

    /// The child session a frame links by a dialect's own field, by the first active rule
    /// that reads one.
    pub(crate) fn child_session(self, view: &FrameView<'_>) -> Option<String> {
        self.active()
            .find_map(|(_, rules)| rules.child_session(view))
    }
}

/// Enriches a payload by its own dialect's rules.
pub(crate) fn enrich(task: &mut SubagentTask, dialect: Dialect, view: &FrameView<'_>) {
    if let Some(rules) = dialect.rules() {
        rules.enrich(task, view);
    }
}

/// Whether a frame of a call of `dialect` ends it without a terminal status.
pub(crate) fn dispatched(dialect: Dialect, view: &FrameView<'_>) -> bool {
    dialect.rules().is_some_and(|rules| rules.dispatched(view))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn recognised(rules: Rules, update: Value) -> Option<&'static str> {
        rules
            .recognise(&FrameView::parse(&update), true)
            .map(Dialect::name)
    }

    #[test]
    fn agent_names_select_one_dialect() {
        for (name, dialect) in [
            ("@agentclientprotocol/claude-agent-acp", "claude"),
            ("@zed-industries/claude-agent-acp", "claude"),
            ("@agentclientprotocol/codex-acp", "codex"),
            ("qwen-code", "qwen"),
            ("gemini-cli", "gemini"),
            ("Copilot", "copilot"),
            ("OpenCode", "opencode"),
            ("opencode", "opencode"),
            ("fanout-agent", "fanout"),
        ] {
            assert_eq!(
                Dialect::for_agent_name(name).map(Dialect::name),
                Some(dialect),
                "{name}"
            );
        }
        assert_eq!(Dialect::for_agent_name("some-agent"), None);
        assert_eq!(Rules::for_agent(Some("some-agent")), Rules::default());
    }

    /// Names are unique, each names its dialect back, and ACP's subagent sessions are
    /// protocol, not a registered dialect.
    #[test]
    fn every_dialect_is_in_the_registry_once_by_its_name() {
        let mut seen = Vec::new();
        for dialect in Dialect::registered() {
            assert!(!seen.contains(&dialect.name()), "{dialect}");
            seen.push(dialect.name());
            assert_eq!(Dialect::named(dialect.name()), Some(dialect));
        }
        assert_eq!(seen.len(), REGISTRY.len());
        assert!(!Dialect::registered().any(|dialect| dialect == Dialect::ACP_NATIVE));
        assert_eq!(Dialect::named("acp-native"), Some(Dialect::ACP_NATIVE));
        assert_eq!(Dialect::ACP_NATIVE.name(), "acp-native");
        assert_eq!(Dialect::named("no-such-dialect"), None);
    }

    /// The harness a command runs: a dialect's name anywhere in it; fanout's own name
    /// only for `fanout agent` and only when no other agent is named (its checkouts' paths
    /// hold it).
    #[test]
    fn agent_commands_name_their_dialect() {
        let named = |command: &str| Dialect::for_agent_command(command).map(Dialect::name);
        assert_eq!(
            named("npx @agentclientprotocol/claude-agent-acp"),
            Some("claude")
        );
        assert_eq!(named("/usr/bin/Qwen --acp"), Some("qwen"));
        assert_eq!(
            named("/work/fanout/node_modules/.bin/codex-acp"),
            Some("codex")
        );
        assert_eq!(
            named("/work/fanout/target/debug/fanout agent --mock"),
            Some("fanout")
        );
        assert_eq!(named("/work/fanout/bin/claude-agent-acp"), Some("claude"));
        assert_eq!(named("fanout proxy"), None);
        assert_eq!(named("some-agent --acp"), None);
    }

    /// A Copilot `task` launch titled `task` is Copilot's with or without the agent's
    /// name; a bare `task` title from Copilot is nobody's launch.
    #[test]
    fn a_shape_of_one_agent_is_not_claimed_by_another() {
        let copilot_titled_task = json!({"toolCallId": "c", "title": "task", "rawInput": {
            "description": "task", "prompt": "p", "agent_type": "general-purpose"}});
        assert_eq!(
            recognised(Rules::default(), copilot_titled_task.clone()),
            Some("copilot")
        );
        let copilot = Rules::for_agent(Some("Copilot"));
        assert_eq!(recognised(copilot, copilot_titled_task), Some("copilot"));
        assert_eq!(recognised(copilot, json!({"title": "task"})), None);
        assert_eq!(
            recognised(Rules::default(), json!({"title": "task"})),
            Some("opencode")
        );
        let opencode = Rules::for_agent(Some("OpenCode"));
        assert_eq!(
            recognised(opencode, json!({"title": "task"})),
            Some("opencode")
        );
        // Qwen's `_meta.toolName` is not Claude's `_meta.claudeCode.toolName`.
        let qwen_agent = json!({"title": "Agent", "_meta": {"toolName": "agent"}});
        let claude = Rules::for_agent(Some("@agentclientprotocol/claude-agent-acp"));
        assert_eq!(recognised(claude, qwen_agent.clone()), None);
        assert_eq!(recognised(Rules::default(), qwen_agent), Some("qwen"));
        // A title that reads like Auggie's from Gemini is not a launch of Gemini's.
        let gemini = Rules::for_agent(Some("gemini-cli"));
        assert_eq!(recognised(gemini, json!({"title": "sub-agent-x: y"})), None);
    }

    #[test]
    fn only_launch_on_update_dialects_recognise_updates() {
        let denied = json!({"toolCallId": "invoke_agent__1", "status": "failed"});
        let view = FrameView::parse(&denied);
        assert_eq!(
            Rules::default().recognise(&view, false).map(Dialect::name),
            Some("gemini")
        );
        let claude_update = json!({"_meta": {"claudeCode": {"toolName": "Agent"}}});
        assert!(
            Rules::default()
                .recognise(&FrameView::parse(&claude_update), false)
                .is_none()
        );
    }

    #[test]
    fn native_fields_follow_the_named_agent() {
        assert_eq!(Rules::default().native_fields(), NativeFields::PROTOCOL);
        assert_eq!(
            Rules::for_agent(Some("@zed-industries/claude-agent-acp")).native_fields(),
            claude::Claude.native_fields()
        );
        assert_eq!(
            Rules::for_agent(Some("@agentclientprotocol/codex-acp")).native_fields(),
            codex::Codex.native_fields()
        );
        assert_ne!(claude::Claude.native_fields(), NativeFields::PROTOCOL);
        assert_ne!(codex::Codex.native_fields(), NativeFields::PROTOCOL);
        assert_eq!(
            Rules::for_agent(Some("qwen-code")).native_fields(),
            NativeFields::PROTOCOL
        );
    }
}
