//! Several writers on one store, and what the store says about its failures: the
//! transcript mark commits with its batch and only grows, two stores writing one file
//! at once lose nothing to "database is locked", and an error says whether the same
//! call can succeed later ([`StoreError::is_transient`], DESIGN 7).

use std::sync::Arc;

use fanout_store::testing::{TestDb, session_record, turn_record};
use fanout_store::{SqlStore, Store, Timestamp, TranscriptMark, WriteOp, both_engines};
use sqlx::Connection;

both_engines!(
    a_mark_commits_with_its_batch_and_only_grows,
    two_stores_writing_at_once_lose_nothing,
);

fn mark(offset: u64) -> TranscriptMark {
    TranscriptMark {
        execution_id: "exec-1".into(),
        applied_through: offset,
    }
}

async fn a_mark_commits_with_its_batch_and_only_grows(db: TestDb) {
    let store = db.open().await.unwrap();
    let at = Timestamp::parse("2026-08-10T09:00:00Z").unwrap();
    assert_eq!(store.transcript_applied("exec-1").await.unwrap(), None);
    let session = session_record("s1", "task-1", at);
    store
        .write_batch(&[
            WriteOp::Session(&session),
            WriteOp::TranscriptMark(&mark(100)),
        ])
        .await
        .unwrap();
    assert_eq!(store.transcript_applied("exec-1").await.unwrap(), Some(100));
    // A late batch of an older part never moves it back.
    store
        .write_batch(&[WriteOp::TranscriptMark(&mark(50))])
        .await
        .unwrap();
    assert_eq!(store.transcript_applied("exec-1").await.unwrap(), Some(100));
    // A batch that fails writes nothing, its mark included.
    let orphan = turn_record("t1", "no-such-session", "task-1", at);
    let error = store
        .write_batch(&[WriteOp::Turn(&orphan), WriteOp::TranscriptMark(&mark(300))])
        .await
        .expect_err("the turn's session does not exist");
    assert!(
        !error.is_transient(),
        "a foreign key is about the call: {error}"
    );
    assert_eq!(store.transcript_applied("exec-1").await.unwrap(), Some(100));
    store
        .write_batch(&[WriteOp::TranscriptMark(&mark(200))])
        .await
        .unwrap();
    assert_eq!(store.transcript_applied("exec-1").await.unwrap(), Some(200));
    assert_eq!(store.transcript_applied("exec-2").await.unwrap(), None);
}

/// Two stores (as two proxies or a proxy and an import: separate connections) writing
/// group commits into one database at the same time: every write lands, none fails.
async fn two_stores_writing_at_once_lose_nothing(db: TestDb) {
    const BATCHES: usize = 60;
    const PER_BATCH: usize = 20;
    let at = Timestamp::parse("2026-08-10T09:00:00Z").unwrap();
    let stores = [
        Arc::new(db.open().await.unwrap()),
        Arc::new(db.open().await.unwrap()),
    ];
    let writers: Vec<_> = stores
        .iter()
        .enumerate()
        .map(|(writer, store)| {
            let store = Arc::clone(store);
            tokio::spawn(async move {
                for batch in 0..BATCHES {
                    let sessions: Vec<_> = (0..PER_BATCH)
                        .map(|i| session_record(&format!("w{writer}-b{batch}-s{i}"), "task-1", at))
                        .collect();
                    let marker = TranscriptMark {
                        execution_id: format!("exec-{writer}"),
                        applied_through: batch as u64 + 1,
                    };
                    let mut ops: Vec<WriteOp<'_>> = sessions.iter().map(WriteOp::Session).collect();
                    ops.push(WriteOp::TranscriptMark(&marker));
                    store
                        .write_batch(&ops)
                        .await
                        .map_err(|e| format!("writer {writer}, batch {batch}: {e}"))?;
                }
                Ok::<(), String>(())
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap().unwrap();
    }
    let store = &stores[0];
    assert_eq!(
        store.counts().await.unwrap().sessions,
        (2 * BATCHES * PER_BATCH) as i64
    );
    for writer in 0..2 {
        assert_eq!(
            store
                .transcript_applied(&format!("exec-{writer}"))
                .await
                .unwrap(),
            Some(BATCHES as u64)
        );
    }
}

/// A file another connection holds locked for longer than the busy timeout: the write
/// fails, and says it may succeed later; once the lock is gone it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_sqlite_file_is_a_transient_failure() {
    let db = TestDb::sqlite();
    let store = db.open().await.unwrap();
    let mut locker = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut locker)
        .await
        .unwrap();
    let session = session_record("s1", "task-1", Timestamp::now());
    let error = store
        .write_batch(&[WriteOp::Session(&session)])
        .await
        .expect_err("locked");
    assert!(error.to_string().contains("database is locked"), "{error}");
    assert!(error.is_transient(), "{error}");
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
    store
        .write_batch(&[WriteOp::Session(&session)])
        .await
        .unwrap();
    assert_eq!(store.counts().await.unwrap().sessions, 1);
}

/// A server that is not there is a transient failure; a malformed URL is not.
#[tokio::test]
async fn an_unreachable_server_is_transient_and_a_bad_url_is_not() {
    let refused = SqlStore::open("postgres://fanout@127.0.0.1:1/nowhere")
        .await
        .err()
        .expect("nothing listens on port 1");
    assert!(refused.is_transient(), "{refused}");
    let bad = SqlStore::open("mysql://x")
        .await
        .err()
        .expect("not a store URL");
    assert!(!bad.is_transient(), "{bad}");
}
