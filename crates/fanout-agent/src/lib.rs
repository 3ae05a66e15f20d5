//! The reference nested ACP agent behind `fanout agent` (DESIGN 5.2).
//!
//! This crate owns:
//! - the model layer ([`model`]): the [`LanguageModel`] trait, [`GenerateOptions`]
//!   (which carries the calling session's id), and the providers: Anthropic
//!   Messages and OpenAI-compatible chat completions over `reqwest`/rustls, an
//!   in-process [`scripted`](model::scripted) provider, and the
//!   [`replay`](model::replay) provider, which serves a recorded scenario
//!   through `fanout-replay`'s per-session binding;
//! - the agent loop: model stream -> tool calls -> results -> … until the turn
//!   ends, with the `subagent` tool (spawn / fork children, each a session with
//!   its own log and its own model calls) and the read-only workspace tools
//!   `read_file` / `list_dir`, confined to the session cwd; subagent calls carry
//!   `_meta.fanout.subagent` as [`fanout_acp::FanoutSubagentMeta`], the type
//!   the capture side reads it with;
//! - the ACP server over stdio ([`serve`], [`run_stdio`]), one JSON-RPC message
//!   per line on stdout and nothing else (diagnostics go to `tracing`);
//! - the provider registry ([`ProviderRegistry`]) through which other crates
//!   add providers without this crate knowing them.
//!
//! A fork child starts from the parent's conversation as it stood just before
//! the model call that asked for the fork (complete messages only, so no tool
//! use is left unanswered), followed by its prompt; its log begins with the
//! parent's events up to that call's `model/request`, and its header's
//! `seedBoundary` is their count. A spawn child starts from its prompt alone.
//!
//! Session logs are written with `fanout-sessionlog`. This crate knows nothing
//! about fanout's capture path, proxy, or store: it is just an ACP agent, and
//! API keys are read from the environment only and never logged or written.

mod agent;
mod cli;
mod error;
pub mod model;
mod server;
pub mod tools;
mod wire;

pub use agent::{AgentConfig, DEFAULT_SYSTEM_PROMPT};
pub use cli::{
    AgentArgs, ProviderFactory, ProviderRegistry, agent_config, run_stdio, run_stdio_with,
};
pub use error::AgentError;
pub use model::{
    ChunkStream, GenerateOptions, LanguageModel, ModelError, ModelRequest, ProviderConfigError,
    SESSION_ID_HEADER,
};
pub use server::serve;
