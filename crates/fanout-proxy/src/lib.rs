//! The capture proxy (DESIGN 3.1): `fanout proxy -- <agent command…>` sits between an
//! ACP client and an ACP agent and records what it sees without changing a byte.
//!
//! Owns: supervising the agent process (own process group, signals forwarded, exit
//! status passed through, the group cleaned up), byte-exact forwarding in both
//! directions, the tap (a bounded chunk queue that never blocks forwarding), the
//! per-execution transcript and the thread that writes it, the capture follower that
//! reads the transcript behind it, the catch-up of earlier runs' transcripts, a store
//! connection that survives the store being down, and the names of its own counters
//! ([`metric_names`]).
//!
//! Uses fanout-metrics for the rest of its numbers: the caller's [`fanout_metrics::Registry`]
//! is served live (`--metrics-listen`: `/metrics`, `/debug/vars`, `/healthz`) and
//! written to this run's stats file, which `fanout serve` reads.
//!
//! Must not know: SQL, dialects, ACP semantics, metric exposition, the transcript's
//! format (fanout-capture's). Chunks go to [`fanout_capture::transcript::Applier`] as
//! bytes; rows are capture's business and the store's.
//!
//! Shape of a run ([`run`]):
//!
//! ```text
//! client stdin ──pump c2a──▶ agent stdin        (raw chunks, forwarded as read)
//! agent stdout ──pump a2c──▶ client stdout      (raw chunks, forwarded as read)
//! agent stderr ─────────────▶ our stderr         (inherited: not even copied)
//!        │ each pump queues the chunk before forwarding it (never waits): between
//!        │ pipes its length (the bytes are teed into a side pipe, crate::splice,
//!        │ whose room a stream waits for, briefly), otherwise a copy
//!        ▼
//!   chunk queue ──▶ recorder thread ──▶ transcript ──▶ follower task ──▶ Capture ──▶ store
//!                   (appends, nothing else)            (behind; holds a batch while the
//!                                                       store is away; drains at exit)
//! ```
//!
//! The pumps run on their own OS threads with blocking I/O, so a slow consumer can
//! never reach them. Between pipes they splice (no copy in this process); elsewhere
//! one read and one write per chunk is the least latency a copy can add. Without a
//! transcript the follower takes the chunk queue directly.

mod agent;
mod error;
mod follower;
pub mod metric_names;
mod priority;
mod proxy;
mod queue;
mod ratelimit;
mod recorder;
mod splice;
mod store;
mod tap;
mod transcript;

pub use agent::AgentExit;
pub use error::ProxyError;
pub use priority::{TELEMETRY_NICE, lower_telemetry_thread};
pub use proxy::{ClientStreams, EXECUTION_ID_ENV, ProxyConfig, ProxyOutcome, ProxyTuning, run};
pub use transcript::{TRANSCRIPT_VERSION, TranscriptHeader, TranscriptWriter};
