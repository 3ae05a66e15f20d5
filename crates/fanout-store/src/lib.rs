//! fanout-store owns fanout's data contract (DESIGN 4): the schema of both engines,
//! the named migration steps and the backfill, the one-statement subagent and
//! usage-ledger merges, the import state of source files, the reads in AC-13 order,
//! the usage totals and the health queries. It is driven by typed values.
//!
//! It must not know about agents, dialects, processes or presentation (of ACP it uses
//! only the tool-status vocabulary, whose terminal set fanout-acp owns; the words people
//! read about its figures, such as the unknown fan-out rule and the health explanation,
//! are fanout-cli's): callers hand it records that are already shaped like rows. The value rules it can enforce
//! on its own ('' -> NULL, unreported or negative metrics -> NULL, `'unknown'`
//! execution) it enforces again, so no caller can store a fake 0.
//!
//! Layout: `sql` generates every statement for both engines from one generator;
//! `exec` holds the pools and is the only code that matches on the engine's pools
//! (every read goes through its `Reader`); `open`, `write`, `migrate`, `read`, `health`,
//! `report` and `usage` each own one concern on top of it; `read_sessions` reads what
//! looking at runs needs (DESIGN 8), `cost` prices the ledger from the table shipped in
//! the binary (DESIGN 4.1a, computed when read, never stored), `view` builds a
//! session's invocation tree and the usage report with each response counted once, and
//! `exports` reads what an OTLP export sends and remembers what a receiver took
//! (DESIGN 12; the spans themselves are `fanout-otel`'s); [`SqlStore`] is the handle
//! that ties them together. [`Store`] is the write seam (the upserts capture drives),
//! the one interface a wrapper implements; reads, deletes, migrations, health, counts
//! and the report are inherent methods of [`SqlStore`].

mod api;
mod bulk;
mod change_probe;
mod cost;
mod error;
mod exec;
mod exports;
mod health;
mod migrate;
mod model;
mod open;
mod read;
mod read_sessions;
mod report;
mod sql;
mod store;
mod usage;
mod view;
mod write;

#[cfg(feature = "testing")]
pub mod testing;

pub use api::{Store, WriteOp};
pub use cost::{Cost, ModelPrice, PRICES_ENV, PriceError, PriceTable, Usage, UsageCell};
pub use error::{StoreError, redact_url};
pub use exports::{ExportKey, ExportMark, ExportScope, ExportSession};
/// The canonical timestamp every record carries (its one home is `fanout-types`).
pub use fanout_types::{Timestamp, TimestampError};
pub use model::*;
pub use open::{OpenOptions, store_identity};
pub use read_sessions::{SessionFilter, SessionRow, TurnRow};
pub use report::{
    CountBy, DepthBucket, FanoutBucket, FanoutReport, MetricStats, Nesting, Provenance,
    ReportScope, SubagentSummary, TurnFanout, UnknownFanout,
};
pub use store::SqlStore;
pub use usage::{InvocationUsage, SessionUsage, TokenTotals, UsageGroup, UsageGrouping};
pub use view::{
    GroupUsageLine, InvocationNode, InvocationUsageLine, SessionUsageLine, SessionUsageSplit,
    SessionView, TurnView, UsageReport, counted_rows, session_view, usage_report,
};
pub use write::{subagent_row_id, usage_row_id};

/// The URL used when none is given: the embedded SQLite default.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://fanout.db";
