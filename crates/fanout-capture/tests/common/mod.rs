//! Shared test support: open a store, read whole tables as text on either engine.

#![allow(dead_code)]

use std::sync::Arc;

use fanout_store::testing::TestDb;
#[allow(unused_imports)]
pub use fanout_store::testing::copy_tree;
use fanout_store::{
    ImportFileRecord, MessageRecord, SessionRecord, SqlStore, Store, StoreError, SubagentRecord,
    Timestamp, TurnRecord, UsageRecord, WriteOp,
};
use sqlx::Row;

pub const TABLES: [&str; 5] = [
    "task_sessions",
    "task_session_turns",
    "task_session_messages",
    "task_session_subagents",
    "task_session_usage",
];

pub async fn open(db: &TestDb) -> Arc<SqlStore> {
    Arc::new(db.open().await.expect("open store"))
}

pub fn as_store(store: &Arc<SqlStore>) -> Arc<dyn Store> {
    Arc::clone(store) as Arc<dyn Store>
}

pub fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("test timestamp")
}

/// Every row of `sql` with every column read as text (`CAST(… AS TEXT)` in the query).
pub async fn text_rows(url: &str, sql: &str) -> Vec<Vec<Option<String>>> {
    fn decode<R: Row>(row: &R) -> Vec<Option<String>>
    where
        for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        usize: sqlx::ColumnIndex<R>,
    {
        (0..row.len())
            .map(|i| {
                row.try_get::<Option<String>, usize>(i)
                    .expect("text column")
            })
            .collect()
    }
    if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url)
            .await
            .expect("connect sqlite");
        let rows = sqlx::query(sql).fetch_all(&pool).await.expect(sql);
        pool.close().await;
        rows.iter().map(decode).collect()
    } else {
        let pool = sqlx::PgPool::connect(url).await.expect("connect postgres");
        let rows = sqlx::query(sql).fetch_all(&pool).await.expect(sql);
        pool.close().await;
        rows.iter().map(decode).collect()
    }
}

/// The column names of a table, in order.
pub async fn columns(url: &str, table: &str) -> Vec<String> {
    let sql = if url.starts_with("sqlite:") {
        format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid")
    } else {
        format!(
            "SELECT CAST(column_name AS TEXT) FROM information_schema.columns WHERE table_name = '{table}' AND table_schema = current_schema() ORDER BY ordinal_position"
        )
    };
    text_rows(url, &sql)
        .await
        .into_iter()
        .filter_map(|row| row.into_iter().next().flatten())
        .collect()
}

/// A whole table as text rows ordered by id; `except` columns are left out.
pub async fn dump_table(url: &str, table: &str, except: &[&str]) -> Vec<Vec<Option<String>>> {
    let cols: Vec<String> = columns(url, table)
        .await
        .into_iter()
        .filter(|c| !except.contains(&c.as_str()))
        .map(|c| format!("CAST({c} AS TEXT)"))
        .collect();
    text_rows(
        url,
        &format!("SELECT {} FROM {table} ORDER BY id", cols.join(", ")),
    )
    .await
}

/// Every capture table. A subagent row's `updated_at` is left out: the store sets it
/// to the wall-clock time of the last write (it "moves with every write"), so it is
/// the one column a replay is allowed to move.
pub async fn dump_all(url: &str) -> Vec<Vec<Vec<Option<String>>>> {
    let mut all = Vec::new();
    for table in TABLES {
        let except: &[&str] = if table == "task_session_subagents" {
            &["updated_at"]
        } else {
            &[]
        };
        all.push(dump_table(url, table, except).await);
    }
    all
}

pub async fn count(url: &str, table: &str) -> usize {
    text_rows(url, &format!("SELECT CAST(id AS TEXT) FROM {table}"))
        .await
        .len()
}

/// One message row by id: (turn_id, content, metadata JSON).
pub async fn message(
    url: &str,
    id: &str,
) -> Option<(Option<String>, Option<String>, serde_json::Value)> {
    let rows = text_rows(
        url,
        &format!(
            "SELECT CAST(turn_id AS TEXT), CAST(content AS TEXT), CAST(metadata AS TEXT) FROM task_session_messages WHERE id = '{id}'"
        ),
    )
    .await;
    let row = rows.into_iter().next()?;
    let metadata = serde_json::from_str(row[2].as_deref().unwrap_or("{}")).expect("metadata JSON");
    Some((row[0].clone(), row[1].clone(), metadata))
}

/// AC-26: attempted = skipped_no_identity + persisted + failed.
pub fn assert_invariant(c: &fanout_capture::CounterSnapshot) {
    assert_eq!(
        c.attempted,
        c.skipped_no_identity + c.persisted + c.failed,
        "AC-26 invariant: {c:?}"
    );
}

/// Every file under `dir` whose name ends with `suffix`, sorted.
pub fn files_ending(dir: &std::path::Path, suffix: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.to_string_lossy().ends_with(suffix) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// A store that passes every call to `inner` but group commits, which `batch` sees
/// first: `Some(outcome)` answers the batch instead of the store (a refusal, as a
/// failed transaction: nothing written), `None` lets it through.
pub struct BatchHook<F> {
    pub inner: Arc<SqlStore>,
    pub batch: F,
}

#[async_trait::async_trait]
impl<F> Store for BatchHook<F>
where
    F: Fn(&[WriteOp<'_>]) -> Option<Result<(), StoreError>> + Send + Sync,
{
    async fn upsert_session(&self, s: &SessionRecord) -> Result<(), StoreError> {
        self.inner.upsert_session(s).await
    }
    async fn upsert_turn(&self, t: &TurnRecord) -> Result<(), StoreError> {
        self.inner.upsert_turn(t).await
    }
    async fn upsert_message(&self, m: &MessageRecord) -> Result<(), StoreError> {
        self.inner.upsert_message(m).await
    }
    async fn upsert_subagent(&self, r: &SubagentRecord) -> Result<(), StoreError> {
        self.inner.upsert_subagent(r).await
    }
    async fn upsert_usage(&self, u: &UsageRecord) -> Result<(), StoreError> {
        self.inner.upsert_usage(u).await
    }
    async fn upsert_import_file(&self, f: &ImportFileRecord) -> Result<(), StoreError> {
        self.inner.upsert_import_file(f).await
    }
    async fn write_batch(&self, ops: &[WriteOp<'_>]) -> Result<(), StoreError> {
        match (self.batch)(ops) {
            Some(outcome) => outcome,
            None => self.inner.write_batch(ops).await,
        }
    }
    async fn transcript_applied(&self, execution_id: &str) -> Result<Option<u64>, StoreError> {
        self.inner.transcript_applied(execution_id).await
    }
}
