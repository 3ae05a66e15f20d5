//! The named migration steps (AC-18, AC-20) and the activation keys they write: the
//! backfill of AC-21…AC-24, then the `otlp_exports` table of the continuous OTLP export
//! (DESIGN 12).

use crate::error::StoreError;
use crate::exec::{Pools, Reader, retry_lost_insert_race, with_writer};
use crate::model::{Activation, StepOutcome, StepStatus};
use crate::sql;
use fanout_types::Timestamp;

/// The migration steps, by name. A failed step logs WARN with its name and start-up
/// goes on (AC-20); the step retries at the next open because it wrote nothing.
const BACKFILL_STEP: &str = "task_session_subagents.backfill";
const OTLP_EXPORTS_STEP: &str = "otlp_exports.create";

/// Runs every step; a failure is a WARN and a [`StepStatus::Failed`], never an error.
pub(crate) async fn run_migrations(pools: &Pools) -> Vec<StepOutcome> {
    // Two stores activating one database at once race on the backfilled rows' ids;
    // the loser's second run finds the winner's activation keys.
    let status = outcome(
        BACKFILL_STEP,
        retry_lost_insert_race(|| backfill(pools)).await,
    );
    vec![
        StepOutcome {
            name: BACKFILL_STEP,
            status,
        },
        StepOutcome {
            name: OTLP_EXPORTS_STEP,
            status: outcome(OTLP_EXPORTS_STEP, create_otlp_exports(pools).await),
        },
    ]
}

fn outcome(step: &'static str, result: Result<StepStatus, sqlx::Error>) -> StepStatus {
    result.unwrap_or_else(|err| {
        tracing::warn!(migration = step, error = %err, "migration failed");
        StepStatus::Failed {
            error: err.to_string(),
        }
    })
}

/// What the continuous OTLP export sent, per receiver (DESIGN 12): idempotent DDL, so a
/// database from before the table (any schema version 2) gets it at its next writing
/// open, and a second run only finds it there.
async fn create_otlp_exports(pools: &Pools) -> Result<StepStatus, sqlx::Error> {
    if table_exists(pools, "otlp_exports").await? {
        return Ok(StepStatus::AlreadyApplied);
    }
    for statement in sql::otlp_exports_schema(pools.engine()) {
        if let Err(err) = pools.execute(&statement, &[]).await {
            // Two PostgreSQL stores creating it at once: one of them loses on the
            // catalog's unique index, and finds the winner's table.
            return match table_exists(pools, "otlp_exports").await {
                Ok(true) => Ok(StepStatus::AlreadyApplied),
                _ => Err(err),
            };
        }
    }
    Ok(StepStatus::Applied { rows: 0 })
}

async fn table_exists(pools: &Pools, table: &str) -> Result<bool, sqlx::Error> {
    let found: Vec<(i64,)> = with_writer!(pools, pool => {
        sqlx::query_as(sql::table_exists(pools.engine())).bind(table).fetch_all(pool).await
    })?;
    Ok(found.first().is_some_and(|(n,)| *n > 0))
}

/// AC-21…AC-24: the backfill and both activation keys in one transaction.
async fn backfill(pools: &Pools) -> Result<StepStatus, sqlx::Error> {
    let activation = read_activation(pools.reader()).await?;
    if activation.is_active() {
        return Ok(StepStatus::AlreadyApplied);
    }
    let e = pools.engine();
    let high_water_sql = sql::backfill_high_water(e);
    let insert_sql = sql::backfill_insert(e);
    with_writer!(pools, pool => {
        // BEGIN IMMEDIATE on SQLite: the read below must not start a transaction that
        // cannot take the write lock later (a second store activating the same file).
        let mut tx = pool.begin_with(sql::begin_write(e)).await?;
        // Before the INSERT, so it can only under-claim.
        let high_water: Option<String> = sqlx::query_scalar(&high_water_sql).fetch_optional(&mut *tx).await?;
        let rows = sqlx::query(&insert_sql).execute(&mut *tx).await?.rows_affected();
        // Sampled after the insert, inside the transaction (AC-24).
        let capture_since = Timestamp::now().canonical();
        let backfill_through = high_water.unwrap_or_default();
        for (key, value) in [
            (sql::KEY_CAPTURE_SINCE, capture_since.as_str()),
            (sql::KEY_BACKFILL_THROUGH, backfill_through.as_str()),
        ] {
            sqlx::query(sql::insert_meta_once()).bind(key).bind(value).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(StepStatus::Applied { rows })
    })
}

/// The two activation keys of AC-24, as stored.
pub(crate) async fn activation(reader: Reader<'_>) -> Result<Activation, StoreError> {
    read_activation(reader)
        .await
        .map_err(StoreError::query("reading the activation keys"))
}

async fn read_activation(reader: Reader<'_>) -> Result<Activation, sqlx::Error> {
    let rows: Vec<(String, String)> = reader
        .fetch_all_raw(
            "SELECT key, value FROM fanout_meta WHERE key IN ($1, $2)",
            &[
                Some(sql::KEY_CAPTURE_SINCE),
                Some(sql::KEY_BACKFILL_THROUGH),
            ],
        )
        .await?;
    let mut activation = Activation::default();
    for (key, value) in rows {
        if key == sql::KEY_CAPTURE_SINCE {
            activation.capture_since = Some(value);
        } else {
            activation.backfill_through = Some(value);
        }
    }
    Ok(activation)
}
