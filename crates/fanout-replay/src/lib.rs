//! The per-session binding of recorded conversations (DESIGN 5.3): the core of
//! keyless replay, shared by the reference agent's `replay` provider and the
//! HTTP replay server.
//!
//! Owns:
//! - **scripts** ([`ScenarioScripts`]): every session log of a scenario turned
//!   into one script per recorded session (its own model responses, from its
//!   `assistant/chunk` runs; a fork child's from its `seedBoundary` on),
//!   ordered by `createdAt`, then id; and the scenario's log file names
//!   (`session.jsonl`, `session.1.jsonl`, …);
//! - **the binding** ([`ReplayBinding`]): live sessions claim scripts by
//!   first-call order and keep their own cursors; thread-safe, shared by
//!   concurrent sessions; loud errors naming the live session, the script and
//!   the call;
//! - [`SESSION_ID_HEADER`], the HTTP header that names the calling session, so
//!   the agent's providers and the replay server cannot drift apart.
//!
//! Must not know: HTTP, provider wire formats (Anthropic or OpenAI streams),
//! scenario files, ACP, the snapshot harness (all in `fanout-harness`), the
//! reference agent's insides, fanout's capture path or store. It reads session
//! logs through `fanout-sessionlog` and nothing else.

mod binding;
mod error;
mod script;

pub use binding::{ANONYMOUS_SESSION, BindingError, ReplayBinding, ReplayedResponse};
pub use error::ReplayError;
pub use script::{
    ScenarioScripts, SessionScript, indexed_log_files, scenario_log_files, session_file_index,
    session_file_name,
};

/// The HTTP header naming the calling session: what `fanout agent`'s HTTP
/// providers send and what the replay server binds by.
pub const SESSION_ID_HEADER: &str = "x-fanout-session-id";
