//! The first rung of conversation identity (DESIGN 3.5, 5.5): the identity
//! headers an agent already sends on its model requests.
//!
//! | agent | headers | identity | parent |
//! |---|---|---|---|
//! | fanout's reference agent | `x-fanout-session-id` | the session | none |
//! | Claude Code ≥ 2.1.139 | `x-claude-code-session-id`, `-agent-id`, `-parent-agent-id` | the agent id, else the session | the parent agent, else the session (for an agent) |
//! | Codex | `session-id`, `thread-id`, `x-codex-parent-thread-id` | the thread (else the session) | the parent thread |
//! | OpenCode | `x-session-id`, `x-parent-session-id` | the session | the parent session |
//!
//! Header names are matched without regard to case (Claude Code sends
//! `X-Claude-Code-Session-Id`). An agent that sends none of them (Claude Code
//! 2.1.83, Qwen, Gemini, Copilot) is identified by its content root instead.

use crate::SESSION_ID_HEADER;

/// Which identity headers identified a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IdentityRung {
    /// `x-fanout-session-id`.
    FanoutSession,
    /// `x-claude-code-session-id` without an agent id: the main agent.
    ClaudeSession,
    /// `x-claude-code-agent-id`: a subagent.
    ClaudeAgent,
    /// Codex `thread-id` (or `session-id`).
    CodexThread,
    /// OpenCode `x-session-id`.
    OpenCodeSession,
}

impl IdentityRung {
    /// Every identity rung.
    pub const ALL: [IdentityRung; 5] = [
        IdentityRung::FanoutSession,
        IdentityRung::ClaudeSession,
        IdentityRung::ClaudeAgent,
        IdentityRung::CodexThread,
        IdentityRung::OpenCodeSession,
    ];

    /// The rung's name in cassettes and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            IdentityRung::FanoutSession => "fanout-session",
            IdentityRung::ClaudeSession => "claude-session",
            IdentityRung::ClaudeAgent => "claude-agent",
            IdentityRung::CodexThread => "codex-thread",
            IdentityRung::OpenCodeSession => "opencode-session",
        }
    }

    /// The rung named `name` ([`IdentityRung::as_str`]).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|rung| rung.as_str() == name)
    }
}

/// A caller's identity: its own key and its parent's, both
/// `<rung>:<id>` so that ids of different agents never collide.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// The rung that identified it.
    pub rung: IdentityRung,
    /// `<rung>:<id>`.
    pub key: String,
    /// The parent's key, when the caller named one.
    pub parent: Option<String>,
}

impl Identity {
    fn new(rung: IdentityRung, id: &str, parent: Option<(IdentityRung, &str)>) -> Self {
        Self {
            rung,
            key: key(rung, id),
            parent: parent.map(|(rung, id)| key(rung, id)),
        }
    }

    /// The id without its rung prefix.
    pub fn id(&self) -> &str {
        self.key
            .split_once(':')
            .map(|(_, id)| id)
            .unwrap_or(&self.key)
    }
}

fn key(rung: IdentityRung, id: &str) -> String {
    format!("{}:{id}", rung.as_str())
}

/// An identity header carries something other than visible ASCII.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {header} header is not visible ASCII")]
pub struct IdentityError {
    /// The header's name.
    pub header: &'static str,
}

/// Header names this module reads, lower case.
pub mod headers {
    /// Claude Code: the session (every request of the run).
    pub const CLAUDE_SESSION: &str = "x-claude-code-session-id";
    /// Claude Code: the subagent making the request.
    pub const CLAUDE_AGENT: &str = "x-claude-code-agent-id";
    /// Claude Code: the subagent that spawned this one (nested subagents).
    pub const CLAUDE_PARENT_AGENT: &str = "x-claude-code-parent-agent-id";
    /// Codex: the root session.
    pub const CODEX_SESSION: &str = "session-id";
    /// Codex: the calling thread.
    pub const CODEX_THREAD: &str = "thread-id";
    /// Codex: the spawning thread (child threads only).
    pub const CODEX_PARENT_THREAD: &str = "x-codex-parent-thread-id";
    /// OpenCode: the calling session (a child's own id on its requests).
    pub const OPENCODE_SESSION: &str = "x-session-id";
    /// OpenCode: the parent session (child sessions only).
    pub const OPENCODE_PARENT_SESSION: &str = "x-parent-session-id";
}

/// The identity a request's headers carry, if any. `header` looks a header up
/// by its lower-case name (case-insensitively) and returns its raw bytes.
pub fn identify<'a>(
    header: impl Fn(&str) -> Option<&'a [u8]>,
) -> Result<Option<Identity>, IdentityError> {
    let get = |name: &'static str| -> Result<Option<&'a str>, IdentityError> {
        match header(name) {
            None => Ok(None),
            Some(raw) => match std::str::from_utf8(raw) {
                Ok(text) if text.bytes().all(|b| b.is_ascii_graphic()) && !text.is_empty() => {
                    Ok(Some(text))
                }
                Ok(text) if text.trim().is_empty() => Ok(None),
                _ => Err(IdentityError { header: name }),
            },
        }
    };
    use IdentityRung::*;
    if let Some(id) = get(SESSION_ID_HEADER)? {
        return Ok(Some(Identity::new(FanoutSession, id, None)));
    }
    if let Some(session) = get(headers::CLAUDE_SESSION)? {
        return Ok(Some(match get(headers::CLAUDE_AGENT)? {
            None => Identity::new(ClaudeSession, session, None),
            Some(agent) => {
                let parent = match get(headers::CLAUDE_PARENT_AGENT)? {
                    Some(parent) => (ClaudeAgent, parent),
                    None => (ClaudeSession, session),
                };
                Identity::new(ClaudeAgent, agent, Some(parent))
            }
        }));
    }
    let thread = match get(headers::CODEX_THREAD)? {
        Some(thread) => Some(thread),
        None => get(headers::CODEX_SESSION)?,
    };
    if let Some(thread) = thread {
        let parent = get(headers::CODEX_PARENT_THREAD)?.map(|p| (CodexThread, p));
        return Ok(Some(Identity::new(CodexThread, thread, parent)));
    }
    if let Some(session) = get(headers::OPENCODE_SESSION)? {
        let parent = get(headers::OPENCODE_PARENT_SESSION)?.map(|p| (OpenCodeSession, p));
        return Ok(Some(Identity::new(OpenCodeSession, session, parent)));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(pairs: &[(&str, &str)]) -> Result<Option<Identity>, IdentityError> {
        let owned: Vec<(String, Vec<u8>)> = pairs
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.as_bytes().to_vec()))
            .collect();
        identify(|name| {
            owned
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_slice())
        })
    }

    fn keys(identity: Option<Identity>) -> (IdentityRung, String, Option<String>) {
        let identity = identity.expect("an identity");
        (identity.rung, identity.key, identity.parent)
    }

    #[test]
    fn claude_session_agent_and_nested_agent() {
        use IdentityRung::*;
        assert_eq!(
            keys(from(&[("X-Claude-Code-Session-Id", "S")]).unwrap()),
            (ClaudeSession, "claude-session:S".into(), None)
        );
        assert_eq!(
            keys(
                from(&[
                    ("x-claude-code-session-id", "S"),
                    ("x-claude-code-agent-id", "A")
                ])
                .unwrap()
            ),
            (
                ClaudeAgent,
                "claude-agent:A".into(),
                Some("claude-session:S".into())
            )
        );
        assert_eq!(
            keys(
                from(&[
                    ("x-claude-code-session-id", "S"),
                    ("X-CLAUDE-CODE-AGENT-ID", "N"),
                    ("x-claude-code-parent-agent-id", "A")
                ])
                .unwrap()
            ),
            (
                ClaudeAgent,
                "claude-agent:N".into(),
                Some("claude-agent:A".into())
            )
        );
    }

    #[test]
    fn codex_threads_opencode_sessions_and_fanout() {
        use IdentityRung::*;
        assert_eq!(
            keys(from(&[("session-id", "R"), ("thread-id", "R")]).unwrap()),
            (CodexThread, "codex-thread:R".into(), None)
        );
        assert_eq!(
            keys(
                from(&[
                    ("session-id", "R"),
                    ("thread-id", "T"),
                    ("x-codex-parent-thread-id", "R")
                ])
                .unwrap()
            ),
            (
                CodexThread,
                "codex-thread:T".into(),
                Some("codex-thread:R".into())
            )
        );
        assert_eq!(
            keys(from(&[("session-id", "R")]).unwrap()),
            (CodexThread, "codex-thread:R".into(), None)
        );
        assert_eq!(
            keys(from(&[("x-session-id", "ses_c"), ("x-parent-session-id", "ses_p")]).unwrap()),
            (
                OpenCodeSession,
                "opencode-session:ses_c".into(),
                Some("opencode-session:ses_p".into())
            )
        );
        assert_eq!(
            keys(from(&[("x-fanout-session-id", "f1"), ("x-session-id", "other")]).unwrap()),
            (FanoutSession, "fanout-session:f1".into(), None)
        );
    }

    #[test]
    fn no_headers_is_no_identity_and_bad_bytes_are_named() {
        assert_eq!(
            from(&[("x-initiator", "user"), ("user-agent", "qwen")]).unwrap(),
            None
        );
        assert_eq!(from(&[("x-session-id", "  ")]).unwrap(), None);
        assert_eq!(
            from(&[("x-claude-code-session-id", "a b")])
                .unwrap_err()
                .to_string(),
            "the x-claude-code-session-id header is not visible ASCII"
        );
    }

    #[test]
    fn rung_names_round_trip() {
        for rung in IdentityRung::ALL {
            assert_eq!(IdentityRung::parse(rung.as_str()), Some(rung));
        }
        assert_eq!(IdentityRung::parse("content"), None);
    }
}
