//! Presentation helpers shared by subcommands: the `--db` flag, output formats, and the
//! words people read about the store's figures (labels, the scope, the health verdict,
//! the unknown fan-out rule). The store hands over values; every sentence is here.

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use fanout_store::{
    Activation, CountBy, Health, HealthVerdict, OpenOptions, ReportScope, SqlStore,
};

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

    /// Opens the store for a bulk writer (`import`): as [`DbArgs::open`], with SQLite's
    /// group commits on a connection of their own ([`OpenOptions::bulk_writes`]).
    pub async fn open_for_bulk_writes(&self) -> Result<SqlStore> {
        self.open_with(&OpenOptions {
            bulk_writes: true,
            ..OpenOptions::default()
        })
        .await
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

/// The label of a NULL grouping value (an agent that never said its type or model).
pub const UNREPORTED_LABEL: &str = "(unreported)";

/// A by-type or by-model group for people: [`UNREPORTED_LABEL`] for NULL.
pub fn group_label(group: &CountBy) -> &str {
    group.value.as_deref().unwrap_or(UNREPORTED_LABEL)
}

/// How `TurnFanout::unknown` is decided; printed with every report (in the JSON as
/// `turns.unknown.rule`) so the reader never has to guess.
pub const UNKNOWN_FANOUT_RULE: &str = "a turn that started before subagent_context_backfill_through and has no live subagent row has unknown fan-out: before that instant the only evidence is the backfill, which sees only messages that carried subagent metadata, so no row there means \"not recorded\", not \"none\"; such turns are left out of the distribution and their backfilled rows are a lower bound. A turn with a live row was seen by the capture path (proxy or import), which records every launch, so its count is known at any age.";

/// What a report covers, for people.
pub fn scope_label(scope: &ReportScope) -> String {
    match scope {
        ReportScope::All => "everything".to_owned(),
        ReportScope::Task { task_id } => format!("task {task_id}"),
        ReportScope::Session { session_id } => format!("session {session_id}"),
        ReportScope::Window { since, until } => {
            let bound = |t: &Option<fanout_store::Timestamp>, open: &str| {
                t.map(|t| t.canonical()).unwrap_or_else(|| open.to_owned())
            };
            format!(
                "window [{}, {})",
                bound(since, "the beginning"),
                bound(until, "now")
            )
        }
    }
}

/// The health verdict in one line a person can act on.
pub fn health_explanation(health: &Health) -> String {
    match (&health.figures, health.verdict()) {
        (None, _) => "no verdict: subagent_context_capture_since is not set, so capture was never activated on this database".to_owned(),
        (Some(f), HealthVerdict::Shortfall) => format!(
            "shortfall: {} subagent message(s) since {} have no subagent row; last row written {}",
            f.shortfall,
            f.since,
            f.last_observed_at.map(|t| t.to_string()).unwrap_or_else(|| "never since activation".to_owned())
        ),
        (Some(f), HealthVerdict::NoVerdict) => format!(
            "no verdict: nothing written since activation ({}); the writer may not be running",
            f.since
        ),
        (Some(f), _) => format!(
            "healthy: every subagent message since {} has its row ({} attributed excess)",
            f.since, f.excess
        ),
    }
}

#[cfg(test)]
mod tests {
    use fanout_store::{HealthFigures, Timestamp};

    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse(text).unwrap()
    }

    fn health(figures: Option<HealthFigures>) -> Health {
        Health {
            activation: Activation::default(),
            figures,
        }
    }

    fn figures(shortfall: i64, last: Option<&str>) -> HealthFigures {
        HealthFigures {
            since: at("2026-08-10T09:00:00Z"),
            shortfall,
            excess: 2,
            last_observed_at: last.map(at),
        }
    }

    #[test]
    fn every_verdict_is_explained() {
        assert_eq!(
            health_explanation(&health(None)),
            "no verdict: subagent_context_capture_since is not set, so capture was never activated on this database"
        );
        assert_eq!(
            health_explanation(&health(Some(figures(3, None)))),
            "shortfall: 3 subagent message(s) since 2026-08-10T09:00:00.000000Z have no subagent row; last row written never since activation"
        );
        assert_eq!(
            health_explanation(&health(Some(figures(0, None)))),
            "no verdict: nothing written since activation (2026-08-10T09:00:00.000000Z); the writer may not be running"
        );
        assert_eq!(
            health_explanation(&health(Some(figures(0, Some("2026-08-10T10:00:00Z"))))),
            "healthy: every subagent message since 2026-08-10T09:00:00.000000Z has its row (2 attributed excess)"
        );
    }

    #[test]
    fn scopes_and_groups_read_as_words() {
        assert_eq!(scope_label(&ReportScope::All), "everything");
        assert_eq!(
            scope_label(&ReportScope::Session {
                session_id: "s1".into()
            }),
            "session s1"
        );
        assert_eq!(
            scope_label(&ReportScope::Window {
                since: Some(at("2026-08-10T09:00:00Z")),
                until: None
            }),
            "window [2026-08-10T09:00:00.000000Z, now)"
        );
        let unreported = CountBy {
            value: None,
            subagents: 1,
        };
        assert_eq!(group_label(&unreported), UNREPORTED_LABEL);
    }
}
