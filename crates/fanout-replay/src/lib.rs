//! The binding of recorded conversations to live callers: the core of keyless
//! replay (DESIGN 5.3, 5.5), shared by the reference agent's `replay` provider
//! and the HTTP replay servers of `fanout-harness`.
//!
//! Owns:
//! - **session-log scripts** ([`ScenarioScripts`], DESIGN 5.3): every session
//!   log of a scenario turned into one script per recorded session (its own
//!   model responses, from its `assistant/chunk` runs; a fork child's from its
//!   `seedBoundary` on), ordered by `createdAt`, then id; and the scenario's
//!   log file names (`session.jsonl`, `session.1.jsonl`, …);
//! - **the session binding** ([`ReplayBinding`]): live sessions claim scripts
//!   by first-call order and keep their own cursors; thread-safe, shared by
//!   concurrent sessions; loud errors naming the live session, the script and
//!   the call;
//! - **conversation identity** (DESIGN 5.5), by rungs: the identity headers an
//!   agent sends ([`identify`]: fanout, Claude Code, Codex, OpenCode), else the
//!   request's content root ([`request_content`]: system prompt and first user
//!   turn per wire format, with the declared [`VolatileRules`] applied, hashed),
//!   and the step a request is at;
//! - **the cassette binding** ([`CassetteBinding`]): live requests bound to
//!   recorded conversations (identities by first-call order within their
//!   parent, content by hash), each conversation with its own cursor,
//!   interleaving-safe, with loud [`Miss`]es naming the rung, the live key and
//!   the closest recorded conversation;
//! - [`SESSION_ID_HEADER`], the HTTP header that names the calling session, so
//!   the agent's providers and the replay server cannot drift apart.
//!
//! Must not know: HTTP servers and clients, provider stream encodings
//! (Anthropic or OpenAI SSE), cassette or scenario files, ACP, the snapshot
//! harness (all in `fanout-harness`), the reference agent's insides, fanout's
//! capture path or store. It reads session logs through `fanout-sessionlog`,
//! and request bodies as JSON values handed to it.

mod binding;
mod cassette;
mod content;
mod error;
mod identity;
mod script;
mod volatile;

pub use binding::{ANONYMOUS_SESSION, BindingError, ReplayBinding, ReplayedResponse};
pub use cassette::{
    CassetteBinding, CassetteScripts, Closest, Difference, LiveRequest, Miss, MissReason,
    RecordedConversation, RecordedIdentity, Rung, ScriptsError, Served, Span,
};
pub use content::{ContentRoot, RequestContent, WireFormat, request_content};
pub use error::ReplayError;
pub use identity::{Identity, IdentityError, IdentityRung, headers, identify};
pub use script::{
    ScenarioScripts, SessionScript, indexed_log_files, scenario_log_files, session_file_index,
    session_file_name,
};
pub use volatile::{VOLATILE_RULES, VolatileRules};

/// The HTTP header naming the calling session: what `fanout agent`'s HTTP
/// providers send and what the replay server binds by.
pub const SESSION_ID_HEADER: &str = "x-fanout-session-id";
