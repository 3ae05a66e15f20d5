//! Bad input at open: one clear error naming what is wrong; nothing stored is touched.

use fanout_store::{SqlStore, StoreError};

async fn open_err(url: &str) -> String {
    match SqlStore::open(url).await {
        Ok(_) => panic!("{url} must not open"),
        Err(err) => err.to_string(),
    }
}

#[tokio::test]
async fn malformed_urls_are_named() {
    let err = open_err("mysql://localhost/db").await;
    assert!(
        err.contains("invalid database URL") && err.contains("mysql://localhost/db"),
        "{err}"
    );
    let err = open_err("sqlite://").await;
    assert!(err.contains("names no file"), "{err}");
    let err = open_err("postgres://u:secret@127.0.0.1:notaport/db").await;
    assert!(err.contains("invalid database URL"), "{err}");
    assert!(
        !err.contains("secret"),
        "passwords never reach messages: {err}"
    );
}

#[tokio::test]
async fn unreachable_server_is_named_without_its_password() {
    // Port 1 on loopback: nothing listens there.
    let err = SqlStore::open("postgres://fanout:hunter2@127.0.0.1:1/fanout")
        .await
        .err()
        .unwrap();
    assert!(matches!(err, StoreError::ConnectPostgres { .. }));
    let text = err.to_string();
    assert!(
        text.contains("127.0.0.1:1") && text.contains("refused"),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
}

#[tokio::test]
async fn unwritable_sqlite_path_is_named() {
    let dir = tempfile::tempdir().unwrap();
    // A directory is never a writable database file, even for root.
    let err = open_err(&format!("sqlite://{}", dir.path().display())).await;
    assert!(err.contains(&dir.path().display().to_string()), "{err}");
    let missing = dir.path().join("no/such/dir/fanout.db");
    let err = open_err(&format!("sqlite://{}", missing.display())).await;
    assert!(
        err.contains("cannot open SQLite database") && err.contains("no/such/dir"),
        "{err}"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_new_sqlite_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fanout.db");
    let store = SqlStore::open(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    store.close().await;
    for file in ["fanout.db", "fanout.db-wal", "fanout.db-shm"] {
        let meta = match std::fs::metadata(dir.path().join(file)) {
            Ok(meta) => meta,
            // WAL files are removed on a clean close; the database itself must exist.
            Err(_) if file != "fanout.db" => continue,
            Err(err) => panic!("{file}: {err}"),
        };
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{file}");
    }
}

/// After `close` the SQLite file alone is the whole database: copying it without its
/// `-wal` (as a backup tool or a bench copy does) loses nothing. The implicit
/// checkpoint of the last connection used to be skipped under load (a reader still
/// closing), leaving every row in the WAL.
#[tokio::test]
async fn a_closed_sqlite_file_is_whole_without_its_wal() {
    use fanout_store::testing::session_record;
    use fanout_store::{Store, Timestamp};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fanout.db");
    let store = SqlStore::open(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let now = Timestamp::now();
    for i in 0..200 {
        store
            .upsert_session(&session_record(&format!("s{i}"), "task", now))
            .await
            .unwrap();
    }
    // Keep the readers busy up to the close, as the CLI's report does.
    assert_eq!(
        store
            .query_i64("SELECT COUNT(*) FROM task_sessions")
            .await
            .unwrap(),
        200
    );
    store.close().await;
    let copy = dir.path().join("copy.db");
    std::fs::copy(&path, &copy).unwrap();
    let reopened = SqlStore::open(&format!("sqlite://{}", copy.display()))
        .await
        .unwrap();
    assert_eq!(
        reopened
            .query_i64("SELECT COUNT(*) FROM task_sessions")
            .await
            .unwrap(),
        200,
        "every session is in the file itself"
    );
    reopened.close().await;
}
