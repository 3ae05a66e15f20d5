//! fanout-capture: what fanout records from an agent's ACP traffic, and how.
//!
//! Owns the "orchestrator" half of capture (DESIGN 3.2): from [`fanout_acp`] events
//! it keeps one `task_sessions` row per ACP session, one `task_session_turns` row per
//! `session/prompt`, and one `task_session_messages` row per tool call (the metadata
//! contract of DESIGN 4.1).
//! Then it hands every subagent snapshot to the subagent writer (DESIGN 4.2) with
//! the turn open at that moment, never creating one. It also owns [`import`]: reading
//! fanout transcripts and Claude Code's native session folders into the same rows.
//!
//! Must not know: processes, pipes, HTTP, terminals or any presentation. Callers hand
//! it complete lines with their observation time ([`Capture::observe`]); it hands
//! typed records to [`fanout_store::Store`], the store's write seam (it reads back only
//! how far a transcript is applied). Nothing here fails its caller: store errors are
//! WARN logs and counters, and writes the store cannot take now are held for it
//! ([`Capture::apply_batch`]).
//!
//! Identities are deterministic (UUID v5), so replaying the same traffic (re-import)
//! lands on the same rows:
//! - session = (execution id or `'unknown'`, ACP session id) — [`session_row_id`];
//! - turn = (session row id, prompt request id) — [`turn_row_id`];
//! - tool-call message = (session row id, tool_call_id) — [`message_row_id`].
//!
//! Task: [`CaptureConfig::task_id`], else the `cwd` sent in `session/new`. A frame of a
//! session with no task is not recorded (a subagent frame still moves the writer's
//! `skipped_no_identity`). A session first seen through its traffic gets its row on
//! first need, so every foreign key holds. Sessions are never marked completed: ACP has
//! no session end, so `completed_at` stays NULL and `updated_at` follows turn activity,
//! identically live and imported.
//!
//! Metrics (through the [`metrics`] facade; stable names):
//! - `fanout_subagent_context_total{outcome}` with `outcome` one of `attempted`,
//!   `persisted`, `skipped_no_identity`, `anomalous_value`, `failed`,
//!   `unknown_execution` (AC-26; `attempted = skipped_no_identity + persisted + failed`);
//! - `fanout_capture_frames_total`: lines offered to capture;
//! - `fanout_capture_frames_not_understood_total`: lines that were not JSON-RPC;
//! - `fanout_capture_frames_without_task_total`: frames not recorded for want of a task;
//! - `fanout_capture_dialect_anomalies_total{reason}`: frames a dialect could not place;
//! - `fanout_capture_store_errors_total{table}`: failed session, turn and message writes.
//!
//! Each writer also keeps its own counters ([`Capture::counters`]), which tests read.

mod capture;
mod counters;
mod ids;
pub mod import;
#[cfg(feature = "testing")]
pub mod testing;
pub mod transcript;
mod writer;

pub use capture::{Capture, CaptureConfig, CaptureStats, Held};
pub use counters::{
    CounterSnapshot, DIALECT_ANOMALIES_METRIC, FRAMES_NOT_UNDERSTOOD_METRIC, FRAMES_SEEN_METRIC,
    FRAMES_WITHOUT_TASK_METRIC, Outcome, STORE_ERRORS_METRIC, SUBAGENT_CONTEXT_METRIC,
    WriterCounters,
};
pub use ids::{message_row_id, session_row_id, turn_row_id};
