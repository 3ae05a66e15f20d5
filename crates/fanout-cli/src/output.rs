//! Presentation helpers shared by subcommands: the `--db` flag and output formats.

use clap::{Args, ValueEnum};

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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}
