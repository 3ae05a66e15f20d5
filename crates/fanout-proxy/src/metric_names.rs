//! The names of the proxy's own metrics (fanout-capture adds its `fanout_capture_*`
//! and `fanout_subagent_context_total`; summing the stats files adds
//! [`fanout_metrics::EXECUTIONS_METRIC`]). Labels: `direction` is `c2a` or `a2c`.

/// Complete lines seen by the tap, `direction`.
pub const FRAMES: &str = "fanout_proxy_frames_total";
/// Bytes forwarded, `direction`.
pub const BYTES: &str = "fanout_proxy_bytes_total";
/// Lines in neither the store nor the transcript: the tap queue was full, or capture
/// was behind and there was no transcript (forwarding went on), `direction`.
pub const FRAMES_DROPPED: &str = "fanout_proxy_frames_dropped_total";
/// Lines in the transcript that capture was too far behind to take (a slow store);
/// `fanout import` of the transcript records them, `direction`.
pub const FRAMES_TRANSCRIPT_ONLY: &str = "fanout_proxy_frames_transcript_only_total";
/// Lines longer than the framing bound: forwarded, not observed, `direction`.
pub const FRAMES_OVERSIZED: &str = "fanout_proxy_frames_oversized_total";
/// Lines queued when the proxy stopped that the store did not get in time (they are
/// in the transcript).
pub const FRAMES_UNPROCESSED: &str = "fanout_proxy_frames_unprocessed_total";
/// Store operations that failed in the proxy's hands, `op` (`open`, `write`).
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
    metrics::describe_counter!(
        FRAMES_TRANSCRIPT_ONLY,
        "Lines capture was too far behind to take; they are in the transcript (fanout import records them)."
    );
    metrics::describe_counter!(
        FRAMES_OVERSIZED,
        "Lines longer than the framing bound: forwarded but not observed."
    );
    metrics::describe_counter!(
        FRAMES_UNPROCESSED,
        "Queued lines the store did not get before the proxy stopped (kept in the transcript)."
    );
    metrics::describe_counter!(STORE_ERRORS, "Store operations that failed, by op.");
    metrics::describe_gauge!(STORE_AVAILABLE, "1 while the store is connected, else 0.");
    metrics::describe_counter!(
        TRANSCRIPT_ERRORS,
        "Transcript lines that could not be written."
    );
}
