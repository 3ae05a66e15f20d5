//! fanout-otel owns fanout's OpenTelemetry export (DESIGN 12): the mapping of a
//! session's rows to spans (a trace per turn, the turn as root span `invoke_agent
//! <harness>`, each invocation a child span `invoke_agent <subagent type>`, nested ones
//! under their parent's span; the GenAI semantic conventions' attributes, OpenInference's
//! and fanout's), the ids derived from the rows' keys, and the two exporters over
//! `opentelemetry-otlp` (OTLP over HTTP, protobuf): [`export_once`], which sends what a
//! scope holds, and [`ContinuousExporter`], which sends each span once it is ready,
//! remembers in the store what a receiver took, and never blocks whoever runs it.
//!
//! It reads rows through `fanout-store`'s read API and must not know SQL, presentation
//! (progress bars, the summary's words) or where rows come from (the proxy, an import,
//! a watcher): its callers in `fanout-cli` wire it.

mod attributes;
mod continuous;
mod export;
pub mod ids;
mod mapping;
mod receiver;

pub use attributes::*;
pub use continuous::{ContinuousConfig, ContinuousExporter, ExportCounters};
pub use export::{ExportFailed, ExportProgress, ExportSummary, RetryPolicy, export_once};
pub use mapping::{PlannedSpan, TracePlan, harness_name, plan_session};
pub use receiver::{Receiver, ReceiverConfig, SendError};

/// What stops an export.
#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    /// The endpoint is not an OTLP/HTTP URL.
    #[error("the OTLP endpoint {endpoint} cannot be used: {reason}")]
    Endpoint {
        /// The endpoint, credentials redacted.
        endpoint: String,
        /// Why.
        reason: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    /// Reading rows (or writing marks) failed.
    #[error(transparent)]
    Store(#[from] fanout_store::StoreError),
    /// The receiver did not take a batch within the retry window.
    #[error("the receiver {receiver} did not take the spans within {waited_secs} s: {last_error}")]
    Unreachable {
        /// The receiver.
        receiver: String,
        /// How long it was tried.
        waited_secs: u64,
        /// The last failure.
        last_error: String,
    },
    /// The receiver refused a batch for what it is.
    #[error("the receiver {receiver} refused the spans: {error}")]
    Refused {
        /// The receiver.
        receiver: String,
        /// What it said.
        error: SendError,
    },
}
