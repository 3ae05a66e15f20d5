//! The agent dialects of DESIGN 3.3: one module per agent, each behind [`DialectRules`],
//! and the rule that decides which of them reads a connection.
//!
//! Which rules apply is decided per connection ([`Rules`]). The agent names itself in its
//! `initialize` response (`agentInfo.name`); when that name belongs to a dialect, only that
//! dialect's rules read the connection, because the same shape can mean different things
//! for two agents (a Copilot tool titled `task` is not OpenCode's launch). Without a known
//! name (an old transcript, an import of a partial stream, an agent we do not know) every
//! dialect's shape rules apply, in the fixed order of [`PRECEDENCE`]: the first dialect
//! whose launch signal matches a `tool_call` owns the row.
//!
//! ACP's own subagent sessions (`subagent_update`) are protocol, not an agent's dialect:
//! they apply on every connection, with the field mapping of the named agent
//! ([`NativeFields`]).
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

use serde_json::Value;

use crate::frame::FrameView;
use crate::subagent::SubagentTask;

pub(crate) use native::{NativeField, NativeFields};
pub(crate) use state::DialectState;

/// Which rule recognised a tool call (or a child session) as a subagent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// claude-agent-acp: `_meta.claudeCode.toolName == "Agent"`.
    Claude,
    /// OpenCode: title `task` (trimmed, any case).
    OpenCode,
    /// Cursor: `rawInput._toolName` `task` (any case), plus the `cursor/task` side request.
    Cursor,
    /// Auggie: title `sub-agent-<type>: <description>`.
    Auggie,
    /// codex-acp: `spawnAgent` collaboration or `subagent` lifecycle frames (v1 and v2).
    Codex,
    /// Qwen Code: `_meta.toolName == "agent"`.
    Qwen,
    /// Gemini CLI: tool call id `invoke_agent__…` or title `Delegating to agent '<name>'`.
    Gemini,
    /// Copilot CLI: `rawInput` with string `prompt` and string `agent_type`.
    Copilot,
    /// ACP's own subagent sessions (`subagent_update`), one row per work cycle.
    AcpNative,
    /// fanout's reference agent: `_meta.fanout.subagent`.
    Fanout,
}

impl Dialect {
    /// A short stable name, for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::OpenCode => "opencode",
            Self::Cursor => "cursor",
            Self::Auggie => "auggie",
            Self::Codex => "codex",
            Self::Qwen => "qwen",
            Self::Gemini => "gemini",
            Self::Copilot => "copilot",
            Self::AcpNative => "acp-native",
            Self::Fanout => "fanout",
        }
    }

    /// The dialect an agent's `initialize` `agentInfo.name` belongs to (ASCII case is
    /// ignored), if any.
    pub fn for_agent_name(name: &str) -> Option<Self> {
        PRECEDENCE
            .iter()
            .find(|rules| {
                rules
                    .agent_names()
                    .iter()
                    .any(|known| known.eq_ignore_ascii_case(name.trim()))
            })
            .map(|rules| rules.dialect())
    }
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

/// One agent's dialect. Every method reads one frame; nothing here keeps state.
pub(crate) trait DialectRules: Sync {
    /// The dialect rows recognised by these rules carry.
    fn dialect(&self) -> Dialect;

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
}

/// Every agent dialect, in the order their launch signals are tried when the agent did
/// not name itself. The order goes from the most specific signal to the least:
/// 1. fanout: its own `_meta.fanout` namespace;
/// 2. Claude: `_meta.claudeCode.toolName`;
/// 3. Codex: `_meta.codex` or `spawnAgent` with thread ids, lifecycle inputs (the tracker
///    checks it before the others, as its frames correlate across wire ids);
/// 4. Qwen: `_meta.toolName == "agent"`;
/// 5. Copilot: `rawInput.prompt` and `rawInput.agent_type` (its title is free text, the
///    description, so it goes before every title rule);
/// 6. Cursor: `rawInput._toolName`;
/// 7. Gemini: the `invoke_agent__` id prefix or its `Delegating to agent '…'` title;
/// 8. Auggie: the `sub-agent-<type>: …` title;
/// 9. OpenCode: the bare title `task`, the weakest signal.
pub(crate) const PRECEDENCE: [&dyn DialectRules; 9] = [
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

/// The rules of one dialect.
pub(crate) fn rules_of(dialect: Dialect) -> Option<&'static dyn DialectRules> {
    PRECEDENCE
        .iter()
        .copied()
        .find(|rules| rules.dialect() == dialect)
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

    /// The dialects that apply, in precedence order.
    pub(crate) fn active(self) -> impl Iterator<Item = &'static dyn DialectRules> {
        PRECEDENCE
            .iter()
            .copied()
            .filter(move |rules| self.agent.is_none_or(|agent| rules.dialect() == agent))
    }

    /// Whether a dialect's rules and state read this connection: ACP's own subagent
    /// sessions always, an agent's dialect when the agent named no other.
    pub(crate) fn reads(self, dialect: Dialect) -> bool {
        dialect == Dialect::AcpNative || self.agent.is_none_or(|agent| agent == dialect)
    }

    /// The dialect of the first launch signal that matches, on a `tool_call` (`is_call`)
    /// or, for the dialects that launch on updates, on the first frame of an unknown call.
    pub(crate) fn recognise(self, view: &FrameView<'_>, is_call: bool) -> Option<Dialect> {
        self.active()
            .filter(|rules| is_call || rules.launches_on_updates())
            .find(|rules| rules.is_launch(view))
            .map(DialectRules::dialect)
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
        self.active().find_map(|rules| rules.parent(view))
    }

    /// The row signals a session update carries, with the dialect whose rows they touch.
    pub(crate) fn row_signals(self, kind: &str, update: &Value) -> Vec<(Dialect, RowSignal)> {
        self.active()
            .filter_map(|rules| Some((rules.dialect(), rules.row_signal(kind, update)?)))
            .collect()
    }

    /// The caller a non-tool session update names, by the first active rule that reads one.
    pub(crate) fn caller<'a>(self, update: &'a Value) -> Option<Caller<'a>> {
        self.active().find_map(|rules| rules.caller(update))
    }

    /// How `subagent_update` fields map on this connection.
    pub(crate) fn native_fields(self) -> NativeFields {
        self.agent
            .and_then(rules_of)
            .map_or(NativeFields::PROTOCOL, DialectRules::native_fields)
    }

    /// The child session a frame links by a dialect's own field, by the first active rule
    /// that reads one.
    pub(crate) fn child_session(self, view: &FrameView<'_>) -> Option<String> {
        self.active().find_map(|rules| rules.child_session(view))
    }
}

/// Enriches a payload by its own dialect's rules.
pub(crate) fn enrich(task: &mut SubagentTask, dialect: Dialect, view: &FrameView<'_>) {
    if let Some(rules) = rules_of(dialect) {
        rules.enrich(task, view);
    }
}

/// Whether a frame of a call of `dialect` ends it without a terminal status.
pub(crate) fn dispatched(dialect: Dialect, view: &FrameView<'_>) -> bool {
    rules_of(dialect).is_some_and(|rules| rules.dispatched(view))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn recognised(rules: Rules, update: Value) -> Option<Dialect> {
        rules.recognise(&FrameView::parse(&update), true)
    }

    #[test]
    fn agent_names_select_one_dialect() {
        for (name, dialect) in [
            ("@agentclientprotocol/claude-agent-acp", Dialect::Claude),
            ("@zed-industries/claude-agent-acp", Dialect::Claude),
            ("@agentclientprotocol/codex-acp", Dialect::Codex),
            ("qwen-code", Dialect::Qwen),
            ("gemini-cli", Dialect::Gemini),
            ("Copilot", Dialect::Copilot),
            ("OpenCode", Dialect::OpenCode),
            ("opencode", Dialect::OpenCode),
            ("fanout-agent", Dialect::Fanout),
        ] {
            assert_eq!(Dialect::for_agent_name(name), Some(dialect), "{name}");
        }
        assert_eq!(Dialect::for_agent_name("some-agent"), None);
        assert_eq!(Rules::for_agent(Some("some-agent")), Rules::default());
    }

    #[test]
    fn every_dialect_is_in_the_precedence_once() {
        let mut seen = Vec::new();
        for rules in PRECEDENCE {
            assert!(!seen.contains(&rules.dialect()), "{:?}", rules.dialect());
            seen.push(rules.dialect());
        }
        assert!(
            !seen.contains(&Dialect::AcpNative),
            "protocol, not a dialect"
        );
    }

    /// A Copilot `task` launch titled `task` is Copilot's with or without the agent's
    /// name; a bare `task` title from Copilot is nobody's launch.
    #[test]
    fn a_shape_of_one_agent_is_not_claimed_by_another() {
        let copilot_titled_task = json!({"toolCallId": "c", "title": "task", "rawInput": {
            "description": "task", "prompt": "p", "agent_type": "general-purpose"}});
        assert_eq!(
            recognised(Rules::default(), copilot_titled_task.clone()),
            Some(Dialect::Copilot)
        );
        let copilot = Rules::for_agent(Some("Copilot"));
        assert_eq!(
            recognised(copilot, copilot_titled_task),
            Some(Dialect::Copilot)
        );
        assert_eq!(recognised(copilot, json!({"title": "task"})), None);
        assert_eq!(
            recognised(Rules::default(), json!({"title": "task"})),
            Some(Dialect::OpenCode)
        );
        let opencode = Rules::for_agent(Some("OpenCode"));
        assert_eq!(
            recognised(opencode, json!({"title": "task"})),
            Some(Dialect::OpenCode)
        );
        // Qwen's `_meta.toolName` is not Claude's `_meta.claudeCode.toolName`.
        let qwen_agent = json!({"title": "Agent", "_meta": {"toolName": "agent"}});
        let claude = Rules::for_agent(Some("@agentclientprotocol/claude-agent-acp"));
        assert_eq!(recognised(claude, qwen_agent.clone()), None);
        assert_eq!(
            recognised(Rules::default(), qwen_agent),
            Some(Dialect::Qwen)
        );
        // A title that reads like Auggie's from Gemini is not a launch of Gemini's.
        let gemini = Rules::for_agent(Some("gemini-cli"));
        assert_eq!(recognised(gemini, json!({"title": "sub-agent-x: y"})), None);
    }

    #[test]
    fn only_launch_on_update_dialects_recognise_updates() {
        let denied = json!({"toolCallId": "invoke_agent__1", "status": "failed"});
        let view = FrameView::parse(&denied);
        assert_eq!(
            Rules::default().recognise(&view, false),
            Some(Dialect::Gemini)
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
