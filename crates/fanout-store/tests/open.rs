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
async fn a_password_with_a_slash_never_reaches_the_message() {
    // The unencoded `/` ends the authority for a URL parser, so the driver refuses the
    // URL; the message names it, without any of the password.
    let err = open_err("postgres://fanout:hunter/two@127.0.0.1:1/fanout").await;
    assert!(err.contains("invalid database URL"), "{err}");
    assert!(
        err.contains("postgres://fanout:***@127.0.0.1:1/fanout"),
        "{err}"
    );
    assert!(!err.contains("hunter") && !err.contains("two"), "{err}");
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
    // While it is open the WAL files exist (a clean close removes them): all three
    // are private.
    for file in ["fanout.db", "fanout.db-wal", "fanout.db-shm"] {
        let meta =
            std::fs::metadata(dir.path().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{file}");
    }
    store.close().await;
}

/// After `close` the SQLite file alone is the whole database: copying it without its
/// `-wal` (as a backup tool or a bench copy does) loses nothing. SQLite's own checkpoint
/// at close runs only when the last connection to the file closes, which another
/// connection (here held on purpose; under load, a reader still closing) prevents.
#[tokio::test]
async fn a_closed_sqlite_file_is_whole_without_its_wal() {
    use fanout_store::testing::session_record;
    use fanout_store::{Store, Timestamp};
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fanout.db");
    let url = format!("sqlite://{}", path.display());
    let store = SqlStore::open(&url).await.unwrap();
    let now = Timestamp::now();
    for i in 0..200 {
        store
            .upsert_session(&session_record(&format!("s{i}"), "task", now))
            .await
            .unwrap();
    }
    // A read attaches it to the WAL (opening alone does not).
    let mut other = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let seen: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM task_sessions")
        .fetch_one(&mut other)
        .await
        .unwrap();
    assert_eq!(seen, 200);
    store.close().await;
    let copy = dir.path().join("copy.db");
    std::fs::copy(&path, &copy).unwrap();
    other.close().await.unwrap();
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

/// A read-only open creates nothing and says what is missing: no file, or a database
/// without the fanout schema.
#[tokio::test]
async fn a_read_only_open_of_a_missing_or_unmigrated_sqlite_file_is_refused() {
    let read_only = fanout_store::OpenOptions {
        read_only: true,
        ..fanout_store::OpenOptions::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("typo.db");
    let url = format!("sqlite://{}", missing.display());
    let Err(err) = SqlStore::open_with(&url, &read_only).await else {
        panic!("a missing file must not open")
    };
    assert!(matches!(err, StoreError::NoDatabase { .. }), "{err}");
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert!(!missing.exists(), "nothing was created");

    // A SQLite file that is not a fanout database (yet).
    let other = dir.path().join("other.db");
    std::fs::write(&other, b"").unwrap();
    let url = format!("sqlite://{}", other.display());
    let Err(err) = SqlStore::open_with(&url, &read_only).await else {
        panic!("a database without the schema must not open read-only")
    };
    assert!(matches!(err, StoreError::NotMigrated { .. }), "{err}");
    assert!(err.to_string().contains("fanout migrate"), "{err}");
    assert_eq!(
        std::fs::metadata(&other).unwrap().len(),
        0,
        "left untouched"
    );
}

/// Several writers opening one SQLite file none of them has created (two proxies and
/// an import started together). Turning a new file to WAL needs the file to itself,
/// and SQLite answers two such openers "database is locked" at once, without waiting
/// out the busy timeout (it sees a deadlock): each open must wait its turn instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writers_opening_a_new_sqlite_file_at_once_all_open() {
    const ROUNDS: usize = 10;
    const OPENERS: usize = 6;
    for round in 0..ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("new.db").display());
        let opens: Vec<_> = (0..OPENERS)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move { SqlStore::open(&url).await })
            })
            .collect();
        for open in opens {
            match open.await.unwrap() {
                Ok(store) => store.close().await,
                Err(err) => panic!("round {round}: {err}"),
            }
        }
    }
}
