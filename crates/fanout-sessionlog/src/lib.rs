//! The JSONL session-log format of DESIGN 5.1, shared by the reference agent
//! (`fanout-agent`, which writes logs) and replay (`fanout-replay`, which reads them).
//!
//! This crate owns:
//! - the typed lines of a log: one [`Header`] then [`Event`]s, including the
//!   [`Chunk`]s of a streamed model response (enough to reconstruct it exactly);
//! - (re-exported, its home is `fanout-types`) the canonical [`Timestamp`] every
//!   line carries;
//! - the on-disk layout: one `<session id>.jsonl` per session under a sessions
//!   root, in a bucket named after the session's cwd ([`layout`]);
//! - a [`SessionLogWriter`] (append-only, one write per event, files 0600) and a
//!   strict reader ([`read_log`]) that names `file:line` for every bad line;
//! - helpers to harvest every log under a root ([`list_logs`]) and to derive the
//!   recorded model responses of a session ([`SessionLog::recorded_responses`]).
//!
//! It knows nothing about ACP, model providers, the agent loop, or fanout's
//! capture and store: it is only a file format.

mod error;
pub mod layout;
mod reader;
mod types;
mod writer;

pub use error::{ReadError, WriteError};
pub use fanout_types::{Timestamp, TimestampError};
pub use layout::{
    LogEntry, bucket_dir, bucket_name, creation_order, default_sessions_root, list_logs, log_path,
    sort_primary_first,
};
pub use reader::{parse_log, read_header, read_log};
pub use types::{
    Backend, Chunk, Event, FORMAT_VERSION, Header, ModelStopReason, RecordedResponse, SessionLog,
    SubagentMode, Usage,
};
pub use writer::SessionLogWriter;
