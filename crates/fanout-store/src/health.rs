//! Writer health from the database alone (AC-28, AC-28a, AC-29), and row counts.

use crate::error::StoreError;
use crate::exec::Reader;
use crate::migrate;
use crate::model::{Health, HealthFigures, TableCounts};
use crate::sql;
use fanout_types::Timestamp;

/// The op every health and count read fails as.
const OP: &str = "health query";

pub(crate) async fn health(reader: Reader<'_>) -> Result<Health, StoreError> {
    let activation = migrate::activation(reader).await?;
    let Some(since_text) = activation.capture_since.clone() else {
        return Ok(Health {
            activation,
            figures: None,
        });
    };
    let since = Timestamp::parse(&since_text).map_err(|cause| StoreError::BadTimestamp {
        what: format!("fanout_meta.{}", sql::KEY_CAPTURE_SINCE),
        cause,
    })?;
    let e = reader.engine();
    let since_bind = since.canonical();
    let binds = [Some(since_bind.as_str())];
    let shortfall = reader.count(OP, &sql::health_shortfall(e), &binds).await?;
    let excess = reader.count(OP, &sql::health_excess(e), &binds).await?;
    let (last,): (Option<String>,) = reader
        .fetch_one(OP, &sql::health_last_observed(e), &binds)
        .await?;
    let last_observed_at = last
        .map(|t| Timestamp::parse(&t))
        .transpose()
        .map_err(|cause| StoreError::BadTimestamp {
            what: "task_session_subagents.observed_at".to_owned(),
            cause,
        })?;
    Ok(Health {
        activation,
        figures: Some(HealthFigures {
            since,
            shortfall,
            excess,
            last_observed_at,
        }),
    })
}

pub(crate) async fn counts(reader: Reader<'_>) -> Result<TableCounts, StoreError> {
    let all = |table: &'static str| format!("SELECT COUNT(*) FROM {table}");
    let by_source = "SELECT COUNT(*) FROM task_session_subagents WHERE source = $1";
    Ok(TableCounts {
        sessions: reader.count(OP, &all("task_sessions"), &[]).await?,
        turns: reader.count(OP, &all("task_session_turns"), &[]).await?,
        messages: reader.count(OP, &all("task_session_messages"), &[]).await?,
        subagents: reader
            .count(OP, &all("task_session_subagents"), &[])
            .await?,
        subagents_live: reader.count(OP, by_source, &[Some("live")]).await?,
        subagents_backfill: reader.count(OP, by_source, &[Some("backfill")]).await?,
        subagents_import: reader.count(OP, by_source, &[Some("import")]).await?,
        usage: reader.count(OP, &all("task_session_usage"), &[]).await?,
        import_files: reader.count(OP, &all("import_files"), &[]).await?,
    })
}
