//! Presentation helpers shared by subcommands: the `--db` flag and output formats.

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use fanout_store::{Activation, OpenOptions, SqlStore};

/// The exit status of a usage error (EX_USAGE), for clap's refusals and contradictory
/// flags alike; clap's own 2 means "no verdict" to `fanout health`.
pub const EXIT_USAGE: u8 = 64;

/// The environment variable `--db` falls back to.
pub const DATABASE_URL_ENV: &str = "FANOUT_DATABASE_URL";

#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    /// Database URL: sqlite://PATH (the embedded default) or postgres://USER@HOST:PORT/DB.
    #[arg(long = "db", env = DATABASE_URL_ENV, default_value = fanout_store::DEFAULT_DATABASE_URL)]
    pub db: String,
}

impl DbArgs {
    pub fn url(&self) -> String {
        self.db.clone()
    }

    /// Opens the store for a writing command, creating and migrating it as needed.
    pub async fn open(&self) -> Result<SqlStore> {
        self.open_with(&OpenOptions::default()).await
    }

    /// Opens the store for a read-only command: nothing is created, migrated or
    /// backfilled, so what it reports is the database as it is (a missing SQLite file
    /// or an unmigrated database is an error that says so).
    pub async fn open_existing(&self) -> Result<SqlStore> {
        self.open_with(&OpenOptions {
            read_only: true,
            ..OpenOptions::default()
        })
        .await
    }

    async fn open_with(&self, options: &OpenOptions) -> Result<SqlStore> {
        SqlStore::open_with(&self.db, options)
            .await
            .with_context(|| format!("opening {}", fanout_store::redact_url(&self.db)))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// `capture_since` for people.
pub fn capture_since_label(activation: &Activation) -> &str {
    activation
        .capture_since
        .as_deref()
        .unwrap_or("(not activated)")
}

/// `backfill_through` for people: the `''` sentinel means nothing was backfilled.
pub fn backfill_through_label(activation: &Activation) -> &str {
    match activation.backfill_through.as_deref() {
        None => "(not activated)",
        Some("") => "(nothing backfilled)",
        Some(value) => value,
    }
}
