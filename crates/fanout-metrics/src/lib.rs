//! fanout-metrics: the counters fanout keeps about itself, and how they are read.
//!
//! Owns:
//! - [`Registry`], the process's [`metrics::Recorder`] (atomic counters and gauges,
//!   histograms kept as count and sum), read as a [`Snapshot`];
//! - summing snapshots across processes ([`Snapshot::add`]: counters and summaries
//!   always, gauges only of live processes);
//! - the two renderings: Prometheus text ([`render_prometheus`]) and an expvar JSON
//!   document ([`render_expvar`]) that always carries the AC-26 map
//!   ([`SUBAGENT_CONTEXT_METRIC`] by [`SUBAGENT_OUTCOMES`]), so those names live here
//!   and fanout-capture, which moves them, takes them from here;
//! - stats files: each proxy writes its snapshot to `<stats dir>/<executionId>.json`
//!   ([`StatsFile`]) and `fanout serve` sums the directory ([`StatsDir`]); the default
//!   directory is [`default_stats_dir`];
//! - with the `http` feature (on by default), the read-only routes `/metrics`,
//!   `/debug/vars` and `/healthz` over any [`MetricsSource`] ([`router`],
//!   [`serve_http`]).
//!
//! Must not know: processes and their supervision, pipes, ACP, capture, the store.
//! Producers move their counters through the [`metrics`] facade under names they own;
//! this crate only reads what was recorded. The data directory, the timestamp type and
//! private directories come from fanout-sessionlog, for now their one home.

mod exposition;
#[cfg(feature = "http")]
mod http;
mod registry;
mod snapshot;
mod stats;

pub use exposition::{
    SUBAGENT_CONTEXT_METRIC, SUBAGENT_OUTCOMES, render_expvar, render_prometheus,
};
#[cfg(feature = "http")]
pub use http::{MetricsSource, ServeError, router, serve_http};
pub use registry::Registry;
pub use snapshot::{Series, SeriesValue, Snapshot};
pub use stats::{EXECUTIONS_METRIC, StatsDir, StatsFile, default_stats_dir};
