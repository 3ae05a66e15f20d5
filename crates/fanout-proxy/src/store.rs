//! A store that is allowed to be missing. The proxy must keep forwarding, and capture
//! must keep its session bookkeeping, while the database is down, locked, read-only or
//! full; so capture is handed this wrapper instead of a connection. It opens the real
//! store in the background and retries until it succeeds; until then every call fails
//! at once with [`StoreError::Unavailable`] (never waits), and capture counts it.
//! A store that opened and later fails (PostgreSQL restarting, SQLite locked or full)
//! stays in place: its pool reconnects by itself and each failed write is counted.
//!
//! It implements only the store's write seam ([`Store`]): capture writes (and reads how
//! far a transcript is applied, to catch it up), nothing else in the proxy reads the
//! database, and what the open store is (its engine) is the store's to say, never
//! guessed here from the URL.
//!
//! Failures are counted in `fanout_proxy_store_errors_total{op}` and summarised in a
//! WARN at most once per interval.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use fanout_store::{
    ImportFileRecord, MessageRecord, SessionRecord, SqlStore, Store, StoreError, SubagentRecord,
    TurnRecord, UsageRecord, WriteOp,
};
use tokio::sync::watch;

use crate::metric_names;
use crate::ratelimit::RateLimit;

enum Connection {
    /// Not open (yet); the last reason it could not be opened.
    Connecting {
        last_error: Option<String>,
    },
    Ready(Arc<SqlStore>),
}

/// What a failed call was, the `op` label of its error counter.
#[derive(Clone, Copy)]
enum Op {
    Open,
    Write,
    Read,
}

impl Op {
    const COUNT: usize = 3;

    fn label(self) -> &'static str {
        match self {
            Op::Open => "open",
            Op::Write => "write",
            Op::Read => "read",
        }
    }
}

pub(crate) struct ResilientStore {
    url: String,
    target: String,
    connection: RwLock<Connection>,
    /// Flips to true once the first open attempt has finished (either way).
    first_attempt: watch::Sender<bool>,
    /// Flips to true once the store is open.
    connected: watch::Sender<bool>,
    retry: Duration,
    warn: RateLimit,
    errors: AtomicU64,
    /// One error counter per [`Op`], looked up on its first error (not before, so a
    /// store that never fails shows no error series).
    op_errors: [OnceLock<metrics::Counter>; Op::COUNT],
    available: metrics::Gauge,
}

impl ResilientStore {
    pub(crate) fn new(url: &str, retry: Duration, warn_interval: Duration) -> Arc<Self> {
        let available = metrics::gauge!(metric_names::STORE_AVAILABLE);
        available.set(0.0);
        Arc::new(ResilientStore {
            url: url.to_owned(),
            target: fanout_store::redact_url(url),
            connection: RwLock::new(Connection::Connecting { last_error: None }),
            first_attempt: watch::Sender::new(false),
            connected: watch::Sender::new(false),
            retry,
            warn: RateLimit::new(warn_interval),
            errors: AtomicU64::new(0),
            op_errors: Default::default(),
            available,
        })
    }

    /// Opens the store, retrying every `retry` until it opens. Run it as a task.
    pub(crate) async fn connect(self: Arc<Self>) {
        loop {
            match SqlStore::open(&self.url).await {
                Ok(store) => {
                    let recovered = self.errors.load(Ordering::Relaxed) > 0;
                    *self
                        .connection
                        .write()
                        .unwrap_or_else(PoisonError::into_inner) =
                        Connection::Ready(Arc::new(store));
                    self.available.set(1.0);
                    self.first_attempt.send_replace(true);
                    self.connected.send_replace(true);
                    if recovered {
                        tracing::warn!(store = %self.target, "the store is available again: capture writes resume");
                    }
                    return;
                }
                Err(error) => {
                    let reason = error.to_string();
                    self.count_error(Op::Open, &reason);
                    *self
                        .connection
                        .write()
                        .unwrap_or_else(PoisonError::into_inner) = Connection::Connecting {
                        last_error: Some(reason),
                    };
                    self.first_attempt.send_replace(true);
                }
            }
            tokio::time::sleep(self.retry).await;
        }
    }

    /// Waits until the first open attempt has finished, at most `limit`, so a store that
    /// opens quickly sees the first frames (instead of them failing as "unavailable").
    pub(crate) async fn first_attempt_done(&self, limit: Duration) {
        let mut attempted = self.first_attempt.subscribe();
        let _ = tokio::time::timeout(limit, attempted.wait_for(|done| *done)).await;
    }

    /// Waits until the store is open (for ever if it never opens).
    pub(crate) async fn connected(&self) {
        let mut connected = self.connected.subscribe();
        let _ = connected.wait_for(|open| *open).await;
    }

    /// Closes the connection, if any (SQLite checkpoints its WAL).
    pub(crate) async fn close(&self) {
        let store = match &*self
            .connection
            .read()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Connection::Ready(store) => Some(Arc::clone(store)),
            Connection::Connecting { .. } => None,
        };
        if let Some(store) = store {
            store.close().await;
        }
    }

    pub(crate) fn is_connected(&self) -> bool {
        matches!(
            *self
                .connection
                .read()
                .unwrap_or_else(PoisonError::into_inner),
            Connection::Ready(_)
        )
    }

    /// Store errors so far (open attempts and failed calls).
    pub(crate) fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    fn current(&self) -> Result<Arc<SqlStore>, StoreError> {
        match &*self
            .connection
            .read()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Connection::Ready(store) => Ok(Arc::clone(store)),
            Connection::Connecting { last_error } => Err(StoreError::Unavailable {
                target: self.target.clone(),
                reason: last_error
                    .clone()
                    .unwrap_or_else(|| "still opening".to_owned()),
            }),
        }
    }

    fn count_error(&self, op: Op, reason: &str) {
        let total = self.errors.fetch_add(1, Ordering::Relaxed) + 1;
        self.op_errors[op as usize]
            .get_or_init(|| metrics::counter!(metric_names::STORE_ERRORS, "op" => op.label()))
            .increment(1);
        if self.warn.ready() {
            let retrying = if self.is_connected() {
                String::new()
            } else {
                format!("; retrying every {:?}", self.retry)
            };
            tracing::warn!(
                store = %self.target,
                op = op.label(),
                errors_so_far = total,
                "store error: {reason}{retrying}; forwarding continues, and capture writes what the store could not take once it can"
            );
        }
    }

    /// Runs `call` on the open store, counting a failure.
    async fn with_store<T, F, Fut>(&self, op: Op, call: F) -> Result<T, StoreError>
    where
        F: FnOnce(Arc<SqlStore>) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let result = match self.current() {
            Ok(store) => call(store).await,
            Err(unavailable) => Err(unavailable),
        };
        if let Err(error) = &result {
            self.count_error(op, &error.to_string());
        }
        result
    }
}

/// Capture's writes, each on the open store or failing at once as unavailable.
#[async_trait]
impl Store for ResilientStore {
    async fn upsert_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        self.with_store(
            Op::Write,
            |s| async move { s.upsert_session(session).await },
        )
        .await
    }

    async fn upsert_turn(&self, turn: &TurnRecord) -> Result<(), StoreError> {
        self.with_store(Op::Write, |s| async move { s.upsert_turn(turn).await })
            .await
    }

    async fn upsert_message(&self, message: &MessageRecord) -> Result<(), StoreError> {
        self.with_store(
            Op::Write,
            |s| async move { s.upsert_message(message).await },
        )
        .await
    }

    async fn upsert_subagent(&self, record: &SubagentRecord) -> Result<(), StoreError> {
        self.with_store(
            Op::Write,
            |s| async move { s.upsert_subagent(record).await },
        )
        .await
    }

    async fn upsert_usage(&self, record: &UsageRecord) -> Result<(), StoreError> {
        self.with_store(Op::Write, |s| async move { s.upsert_usage(record).await })
            .await
    }

    async fn upsert_import_file(&self, record: &ImportFileRecord) -> Result<(), StoreError> {
        self.with_store(
            Op::Write,
            |s| async move { s.upsert_import_file(record).await },
        )
        .await
    }

    async fn write_batch(&self, ops: &[WriteOp<'_>]) -> Result<(), StoreError> {
        // A batch the store cannot take now is held by capture and tried again: each
        // attempt counts (and WARNs, rate-limited). One that failed otherwise is not
        // counted here: capture writes it record by record, and those writes are what
        // `errors` counts, once per failed write.
        let result = match self.current() {
            Ok(store) => store.write_batch(ops).await,
            Err(unavailable) => Err(unavailable),
        };
        if let Err(error) = &result
            && error.is_transient()
        {
            self.count_error(Op::Write, &error.to_string());
        }
        result
    }

    async fn transcript_applied(&self, execution_id: &str) -> Result<Option<u64>, StoreError> {
        self.with_store(Op::Read, |s| async move {
            s.transcript_applied(execution_id).await
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use fanout_store::Timestamp;

    use super::*;

    #[tokio::test]
    async fn unavailable_until_opened_then_delegates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("later").join("fanout.db");
        let store = ResilientStore::new(
            &format!("sqlite://{}", path.display()),
            Duration::from_millis(20),
            Duration::from_secs(60),
        );
        let session = fanout_store::testing::session_record("s1", "task-1", Timestamp::now());
        let connect = tokio::spawn(Arc::clone(&store).connect());
        store.first_attempt_done(Duration::from_secs(10)).await;
        assert!(!store.is_connected());
        let error = store
            .upsert_session(&session)
            .await
            .expect_err("not open yet");
        assert!(matches!(error, StoreError::Unavailable { .. }), "{error}");
        assert!(error.to_string().contains("later"), "{error}");
        assert!(store.errors() >= 2);

        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), connect)
            .await
            .expect("opens once the directory exists")
            .unwrap();
        assert!(store.is_connected());
        store.upsert_session(&session).await.unwrap();
        let opened = store.current().unwrap();
        assert_eq!(opened.counts().await.unwrap().sessions, 1);
        store.close().await;
    }
}
