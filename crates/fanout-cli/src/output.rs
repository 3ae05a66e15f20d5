//! Presentation helpers shared by subcommands: the `--db` flag and output formats.

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use fanout_store::SqlStore;

#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    /// Database URL: sqlite://PATH (the embedded default) or postgres://USER@HOST:PORT/DB.
    #[arg(long = "db", env = "FANOUT_DATABASE_URL", default_value = fanout_store::DEFAULT_DATABASE_URL)]
    pub db: String,
}

impl DbArgs {
    pub fn url(&self) -> String {
        self.db.clone()
    }

    /// Opens the store for a writing command, creating and migrating it as needed.
    pub async fn open(&self) -> Result<SqlStore> {
        SqlStore::open(&self.db)
            .await
            .with_context(|| format!("opening {}", fanout_store::redact_url(&self.db)))
    }

    /// Opens the store for a read-only command. A SQLite file that does not exist is an
    /// error here: opening would create an empty database, and a typo in `--db` would
    /// then read as "nothing written" instead of "wrong path".
    pub async fn open_existing(&self) -> Result<SqlStore> {
        let url = &self.db;
        if let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            && !path.is_empty()
            && !std::path::Path::new(path).exists()
        {
            let shown = fanout_store::redact_url(url);
            bail!("no database at {shown}: the SQLite file {path} does not exist");
        }
        self.open().await
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}
