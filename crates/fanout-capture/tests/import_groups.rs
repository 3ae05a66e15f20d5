//! An import gathers small units into one group commit; when that joint commit fails,
//! nothing of it was written and each unit commits on its own: the rows are those of
//! an import whose joint commits all succeed, and no unit is reported failed.

mod common;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use common::{as_store, dump_all, open};
use fanout_capture::import::{NoProgress, import_paths};
use fanout_store::testing::TestDb;
use fanout_store::{
    ImportFileRecord, MessageRecord, SessionRecord, SqlStore, Store, StoreError, SubagentRecord,
    TurnRecord, UsageRecord, WriteOp, both_engines,
};

both_engines!(
    a_failed_joint_commit_falls_back_to_each_unit_and_loses_nothing,
    a_writer_that_dies_leaves_no_unit_unaccounted_for,
);

fn histories() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/history")
}

/// Refuses every batch that holds the session rows of more than one session, as a
/// failing transaction would (nothing of it written), and counts the refusals.
struct RefusesJointCommits {
    store: Arc<SqlStore>,
    refused: AtomicU64,
}

#[async_trait]
impl Store for RefusesJointCommits {
    async fn upsert_session(&self, s: &SessionRecord) -> Result<(), StoreError> {
        self.store.upsert_session(s).await
    }
    async fn upsert_turn(&self, t: &TurnRecord) -> Result<(), StoreError> {
        self.store.upsert_turn(t).await
    }
    async fn upsert_message(&self, m: &MessageRecord) -> Result<(), StoreError> {
        self.store.upsert_message(m).await
    }
    async fn upsert_subagent(&self, r: &SubagentRecord) -> Result<(), StoreError> {
        self.store.upsert_subagent(r).await
    }
    async fn upsert_usage(&self, u: &UsageRecord) -> Result<(), StoreError> {
        self.store.upsert_usage(u).await
    }
    async fn upsert_import_file(&self, f: &ImportFileRecord) -> Result<(), StoreError> {
        self.store.upsert_import_file(f).await
    }
    async fn write_batch(&self, ops: &[WriteOp<'_>]) -> Result<(), StoreError> {
        let sessions: HashSet<&str> = ops
            .iter()
            .filter_map(|op| match op {
                WriteOp::Session(s) => Some(s.id.as_str()),
                _ => None,
            })
            .collect();
        if sessions.len() > 1 {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(StoreError::Unavailable {
                target: "test".into(),
                reason: "a joint commit is refused (test)".into(),
            });
        }
        self.store.write_batch(ops).await
    }
    async fn transcript_applied(&self, execution_id: &str) -> Result<Option<u64>, StoreError> {
        self.store.transcript_applied(execution_id).await
    }
}

/// A store whose every group commit panics (a bug, not an error): the import's writer
/// task dies with it.
struct PanicsOnCommit(Arc<SqlStore>);

#[async_trait]
impl Store for PanicsOnCommit {
    async fn upsert_session(&self, s: &SessionRecord) -> Result<(), StoreError> {
        self.0.upsert_session(s).await
    }
    async fn upsert_turn(&self, t: &TurnRecord) -> Result<(), StoreError> {
        self.0.upsert_turn(t).await
    }
    async fn upsert_message(&self, m: &MessageRecord) -> Result<(), StoreError> {
        self.0.upsert_message(m).await
    }
    async fn upsert_subagent(&self, r: &SubagentRecord) -> Result<(), StoreError> {
        self.0.upsert_subagent(r).await
    }
    async fn upsert_usage(&self, u: &UsageRecord) -> Result<(), StoreError> {
        self.0.upsert_usage(u).await
    }
    async fn upsert_import_file(&self, f: &ImportFileRecord) -> Result<(), StoreError> {
        self.0.upsert_import_file(f).await
    }
    async fn write_batch(&self, _: &[WriteOp<'_>]) -> Result<(), StoreError> {
        panic!("a group commit panicked (test)")
    }
    async fn transcript_applied(&self, execution_id: &str) -> Result<Option<u64>, StoreError> {
        self.0.transcript_applied(execution_id).await
    }
}

/// Every unit of the plan is either summarised or named as failed, never dropped, even
/// when the writer task dies.
async fn a_writer_that_dies_leaves_no_unit_unaccounted_for(db: TestDb) {
    let plain = open(&db).await;
    let units = import_paths(as_store(&plain), &[histories()], &NoProgress)
        .await
        .files
        .len();
    let other = db.fresh_like().await;
    let dying: Arc<dyn Store> = Arc::new(PanicsOnCommit(open(&other).await));
    let summary = import_paths(dying, &[histories()], &NoProgress).await;
    assert!(summary.has_failures());
    assert_eq!(
        summary.files.len() + summary.failed_files.len(),
        units,
        "{summary:#?}"
    );
    assert!(
        summary
            .failed_files
            .iter()
            .all(|f| f.error.contains("stopped writing")),
        "{summary:#?}"
    );
}

async fn a_failed_joint_commit_falls_back_to_each_unit_and_loses_nothing(db: TestDb) {
    let plain = open(&db).await;
    let summary = import_paths(as_store(&plain), &[histories()], &NoProgress).await;
    assert!(!summary.has_failures(), "{summary:#?}");
    let units = summary.files.len();
    assert!(units > 3, "the fixtures hold several units: {units}");

    let other = db.fresh_like().await;
    let refusing = Arc::new(RefusesJointCommits {
        store: open(&other).await,
        refused: AtomicU64::new(0),
    });
    let summary = import_paths(
        Arc::clone(&refusing) as Arc<dyn Store>,
        &[histories()],
        &NoProgress,
    )
    .await;
    assert!(!summary.has_failures(), "{summary:#?}");
    assert_eq!(summary.files.len(), units, "every unit is summarised once");
    assert!(
        refusing.refused.load(Ordering::Relaxed) > 0,
        "the small units were gathered into joint commits"
    );
    assert_eq!(dump_all(&other.url).await, dump_all(&db.url).await);
    let files = |store: Arc<SqlStore>| async move {
        let mut paths: Vec<String> = store
            .import_files()
            .await
            .expect("import files")
            .into_iter()
            .map(|f| f.path)
            .collect();
        paths.sort();
        paths
    };
    assert_eq!(
        files(Arc::clone(&refusing.store)).await,
        files(Arc::clone(&plain)).await,
        "every unit's import state was recorded"
    );
}
