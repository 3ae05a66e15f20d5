//! Keyless testing of nested agents (DESIGN 5.3, 5.4).
//!
//! This crate owns:
//! - **scripts** ([`ScenarioScripts`]): every session log of a scenario turned
//!   into one script per recorded session (its own model responses, from its
//!   `assistant/chunk` runs; a fork child's from its `seedBoundary` on),
//!   ordered by `createdAt`, then id;
//! - **the binding** ([`ReplayBinding`]): live sessions claim scripts by
//!   first-call order and keep their own cursors; thread-safe, shared by
//!   concurrent sessions; loud errors naming the live session, the script and
//!   the call;
//! - **the HTTP replay server** ([`server`]): the binding behind Anthropic
//!   Messages and OpenAI chat-completions streaming, keyed by the
//!   `x-fanout-session-id` header, on loopback by default;
//! - **the snapshot harness** ([`scenario`], [`acp`], [`normalize`],
//!   [`snapshot`]): `scenario.toml`, an ACP client that drives an agent
//!   process, normalisation, harvesting every log primary-first, unified diffs.
//!
//! It reads and compares session logs through `fanout-sessionlog`, runs
//! agents as processes, and reads their JSON-RPC lines with `fanout-acp`. It knows nothing about the reference agent's insides
//! (the agent depends on this crate for its `replay` provider, not the other
//! way round), nor about fanout's capture path or store.

pub mod acp;
mod binding;
mod error;
pub mod normalize;
pub mod scenario;
mod script;
pub mod server;
pub mod snapshot;
mod wire;

pub use binding::{ANONYMOUS_SESSION, BindingError, ReplayBinding, ReplayedResponse};
pub use error::ReplayError;
pub use scenario::Scenario;
pub use script::{
    ScenarioScripts, SessionScript, scenario_log_files, session_file_index, session_file_name,
};
pub use wire::{anthropic_events, openai_events};
