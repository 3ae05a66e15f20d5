//! The harness around keyless replay (DESIGN 5.3, 5.4, 5.5): what serves a
//! recorded scenario or cassette to a running agent, what records one, and
//! what checks an agent against it.
//!
//! Owns:
//! - **the HTTP replay server** ([`server`]): `fanout-replay`'s per-session
//!   binding behind Anthropic Messages and OpenAI chat-completions streaming,
//!   keyed by the `x-fanout-session-id` header, on loopback by default;
//! - **cassettes** ([`cassette`]): the on-disk format, the recording proxy
//!   (`fanout replay record`: forwards untouched, streams back, never writes a
//!   secret) and the cassette replay server (each live conversation bound by
//!   `fanout-replay`'s cassette binding, run values and ids replaced, misses
//!   as HTTP 599);
//! - **the provider wire encoders** ([`anthropic_events`], [`openai_events`]):
//!   a replayed response as the exact SSE bytes a provider would send;
//! - **the snapshot harness** ([`scenario`], [`acp`], [`normalize`],
//!   [`snapshot`]): `scenario.toml`, an ACP client that drives an agent
//!   process (fanout's own, or a third-party agent against a cassette with a
//!   fresh home), normalisation, harvesting every log primary-first, unified
//!   diffs.
//!
//! Must not know: the reference agent's insides (it runs agents as processes
//! named by a scenario and talks to them over ACP and HTTP only), fanout's
//! capture path or store. Which recorded response a live session gets is
//! `fanout-replay`'s rule, not this crate's; session logs are read and
//! compared through `fanout-sessionlog`, and JSON-RPC lines classified with
//! `fanout-acp`.

pub mod acp;
pub mod cassette;
mod error;
pub mod normalize;
mod private_file;
pub mod scenario;
pub mod server;
pub mod snapshot;
mod wire;

pub use error::HarnessError;
pub use scenario::Scenario;
pub use wire::{anthropic_events, openai_events};
