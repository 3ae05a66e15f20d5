//! The names of the proxy's own metrics (fanout-capture adds its `fanout_capture_*`
//! and `fanout_subagent_context_total`; summing the stats files adds
//! [`fanout_metrics::EXECUTIONS_METRIC`]). Labels: `direction` is `c2a` or `a2c`.

/// Complete lines seen (recorded in the transcript, or framed by capture without one),
/// `direction`.
pub const FRAMES: &str = "fanout_proxy_frames_total";
/// Bytes forwarded, `direction`.
pub const BYTES: &str = "fanout_proxy_bytes_total";
/// Lines in neither the store nor the transcript: the tap queue was full (the
/// transcript could not keep up, or, without a transcript, capture could not), or the
/// transcript could not be written (forwarding went on), `direction`.
pub const FRAMES_DROPPED: &str = "fanout_proxy_frames_dropped_total";
/// Bytes of the transcript capture has not read yet (it falls behind while the store
/// is away or slow, and steps aside under a flood; it catches up from the transcript).
pub const CAPTURE_BACKLOG: &str = "fanout_proxy_capture_backlog_bytes";
/// Lines of earlier runs' transcripts written to the store by this run's catch-up.
pub const FRAMES_CAUGHT_UP: &str = "fanout_proxy_frames_caught_up_total";
/// Lines longer than the framing bound: forwarded, not observed, `direction`.
pub const FRAMES_OVERSIZED: &str = "fanout_proxy_frames_oversized_total";
/// Lines seen when the proxy stopped that the store did not get in time; with a
/// transcript they are in it, and the next proxy or import on the store writes them.
pub const FRAMES_UNPROCESSED: &str = "fanout_proxy_frames_unprocessed_total";
/// Store operations that failed in the proxy's hands, `op` (`open`, `write`, `read`).
pub const STORE_ERRORS: &str = "fanout_proxy_store_errors_total";
/// 1 while the store is connected, 0 while it is being retried.
pub const STORE_AVAILABLE: &str = "fanout_proxy_store_available";
/// Transcript lines that could not be written.
pub const TRANSCRIPT_ERRORS: &str = "fanout_proxy_transcript_errors_total";

/// Registers the help text of every proxy metric with the installed recorder.
pub(crate) fn describe_all() {
    metrics::describe_counter!(FRAMES, "Complete lines seen by the tap, by direction.");
    metrics::describe_counter!(BYTES, "Bytes forwarded, by direction.");
    metrics::describe_counter!(
        FRAMES_DROPPED,
        "Lines in neither the store nor the transcript (a queue was full); forwarding was not affected."
    );
    metrics::describe_gauge!(
        CAPTURE_BACKLOG,
        "Bytes of the transcript capture has not read yet."
    );
    metrics::describe_counter!(
        FRAMES_CAUGHT_UP,
        "Lines of earlier runs' transcripts this run wrote to the store."
    );
    metrics::describe_counter!(
        FRAMES_OVERSIZED,
        "Lines longer than the framing bound: forwarded but not observed."
    );
    metrics::describe_counter!(
        FRAMES_UNPROCESSED,
        "Lines the store did not get before the proxy stopped (kept in the transcript for catch-up)."
    );
    metrics::describe_counter!(STORE_ERRORS, "Store operations that failed, by op.");
    metrics::describe_gauge!(STORE_AVAILABLE, "1 while the store is connected, else 0.");
    metrics::describe_counter!(
        TRANSCRIPT_ERRORS,
        "Transcript lines that could not be written."
    );
}
