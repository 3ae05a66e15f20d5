//! The small primitives every fanout crate shares, each with exactly one home.
//!
//! This crate owns:
//! - [`Timestamp`], the one time type of DESIGN 4.3: UTC, whole microseconds, one
//!   canonical fixed-width text form `YYYY-MM-DDTHH:MM:SS.ffffffZ` (so text order is
//!   time order), and a [`Timestamp::now`] that never repeats within a process;
//! - the private-file rule of DESIGN 7 ("files fanout writes are 0600"):
//!   [`private_open_options`] for files and [`create_private_dir`] (0700) for the
//!   directories fanout makes for them;
//! - [`default_data_dir`], the one place fanout keeps its own files (session logs,
//!   transcripts, stats files);
//! - [`in_ci`], the one reading of `CI` that turns a would-be skip into a failure, and
//!   [`skip_unless_ci`], the skip that does;
//! - [`bench`](mod@bench), how a bench target was started (quick under `cargo test`) and its sizes.
//!
//! It must not know anything of fanout's domain (ACP, rows, sessions, agents, the
//! store): it is the bottom of the crate graph, and every other crate may use it.

pub mod bench;
mod ci;
mod data_dir;
mod private;
mod time;

pub use ci::{in_ci, skip_unless_ci};
pub use data_dir::default_data_dir;
pub use private::{create_private_dir, private_open_options};
pub use time::{Timestamp, TimestampError};
