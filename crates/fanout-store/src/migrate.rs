//! The named migration steps (AC-18, AC-20) and the activation keys they write: today
//! one step, the backfill of AC-21…AC-24.

use crate::error::StoreError;
use crate::exec::{Pools, Reader, retry_lost_insert_race, with_writer};
use crate::model::{Activation, StepOutcome, StepStatus};
use crate::sql;
use fanout_types::Timestamp;

/// The migration steps, by name. A failed step logs WARN with its name and start-up
/// goes on (AC-20); the step retries at the next open because it wrote nothing.
const BACKFILL_STEP: &str = "task_session_subagents.backfill";

/// Runs every step; a failure is a WARN and a [`StepStatus::Failed`], never an error.
pub(crate) async fn run_migrations(pools: &Pools) -> Vec<StepOutcome> {
    // Two stores activating one database at once race on the backfilled rows' ids;
    // the loser's second run finds the winner's activation keys.
    let status = match retry_lost_insert_race(|| backfill(pools)).await {
        Ok(status) => status,
        Err(err) => {
            tracing::warn!(migration = BACKFILL_STEP, error = %err, "migration failed");
            StepStatus::Failed {
                error: err.to_string(),
            }
        }
    };
    vec![StepOutcome {
        name: BACKFILL_STEP,
        status,
    }]
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
