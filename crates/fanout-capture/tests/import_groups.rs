//! An import gathers small units into one group commit; when that joint commit fails,
//! nothing of it was written and each unit commits on its own: the rows are those of
//! an import whose joint commits all succeed, and no unit is reported failed. If the
//! writer dies, no unit goes unaccounted for.

mod common;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{BatchHook, as_store, dump_all, open};
use fanout_capture::import::{NoProgress, import_paths};
use fanout_store::testing::TestDb;
use fanout_store::{SqlStore, Store, StoreError, WriteOp, both_engines};

both_engines!(
    a_failed_joint_commit_falls_back_to_each_unit_and_loses_nothing,
    a_writer_that_dies_leaves_no_unit_unaccounted_for,
);

fn histories() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/history")
}

/// Refuses every batch that holds the session rows of more than one session, as a
/// failing transaction would (nothing of it written); `refused` counts the refusals.
fn refuses_joint_commits(
    refused: Arc<AtomicU64>,
) -> impl Fn(&[WriteOp<'_>]) -> Option<Result<(), StoreError>> + Send + Sync + 'static {
    move |ops| {
        let sessions: HashSet<&str> = ops
            .iter()
            .filter_map(|op| match op {
                WriteOp::Session(s) => Some(s.id.as_str()),
                _ => None,
            })
            .collect();
        (sessions.len() > 1).then(|| {
            refused.fetch_add(1, Ordering::Relaxed);
            Err(StoreError::Unavailable {
                target: "test".into(),
                reason: "a joint commit is refused (test)".into(),
            })
        })
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
    // Every group commit panics (a bug, not an error): the import's writer task dies.
    let dying: Arc<dyn Store> = Arc::new(BatchHook {
        inner: open(&other).await,
        batch: |_: &[WriteOp<'_>]| -> Option<Result<(), StoreError>> {
            panic!("a group commit panicked (test)")
        },
    });
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
    let refused = Arc::new(AtomicU64::new(0));
    let store = open(&other).await;
    let refusing: Arc<dyn Store> = Arc::new(BatchHook {
        inner: Arc::clone(&store),
        batch: refuses_joint_commits(Arc::clone(&refused)),
    });
    let summary = import_paths(refusing, &[histories()], &NoProgress).await;
    assert!(!summary.has_failures(), "{summary:#?}");
    assert_eq!(summary.files.len(), units, "every unit is summarised once");
    assert!(
        refused.load(Ordering::Relaxed) > 0,
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
        files(store).await,
        files(Arc::clone(&plain)).await,
        "every unit's import state was recorded"
    );
}
