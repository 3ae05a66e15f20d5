//! Typed errors. Every message names the thing that is wrong (the URL, the file, the
//! operation), because these reach users verbatim as one line. The cause is part of
//! the message (and deliberately not a `source()`), so a chain printer never repeats it.

use fanout_types::TimestampError;

/// Everything that can go wrong in the store. `target` is always the database URL
/// with its password redacted ([`redact_url`]).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database URL is neither `sqlite://…` nor `postgres://…`, or does not parse.
    #[error("invalid database URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL, redacted.
        url: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The SQLite file could not be created or opened.
    #[error("cannot open SQLite database {path}: {cause}")]
    OpenSqlite {
        /// The file.
        path: String,
        /// The driver's error.
        cause: sqlx::Error,
    },

    /// A bulk group commit ([`crate::OpenOptions::bulk_writes`]) failed on its SQLite
    /// connection; the transaction rolled back, nothing of it was written.
    #[error("{op} failed on SQLite database {path}: {cause}")]
    Bulk {
        /// The step that failed: `bulk open`, `batch begin`, a table's upsert, `batch commit`.
        op: &'static str,
        /// The file.
        path: String,
        /// SQLite's error.
        cause: rusqlite::Error,
    },

    /// The PostgreSQL server could not be reached or refused the login.
    #[error("cannot connect to PostgreSQL at {target}: {cause}")]
    ConnectPostgres {
        /// The database URL, redacted.
        target: String,
        /// The driver's error.
        cause: sqlx::Error,
    },

    /// The database's schema version is newer than this build's; nothing was touched.
    #[error(
        "database {target} was written by a newer fanout (schema version {found}; this build understands up to {supported}); upgrade fanout or choose another --db"
    )]
    NewerSchema {
        /// The database URL, redacted.
        target: String,
        /// The version stored in the database.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },

    /// A read-only open of a SQLite file that does not exist (it is not created).
    #[error("no database at {target}: the SQLite file {path} does not exist")]
    NoDatabase {
        /// The database URL, redacted.
        target: String,
        /// The missing file.
        path: String,
    },

    /// A read-only open of a database without fanout's current schema.
    #[error(
        "{target} has no fanout schema (schema version {found}, this build writes {current}): run `fanout migrate --db {target}` first"
    )]
    NotMigrated {
        /// The database URL, redacted.
        target: String,
        /// The version found (`none` when there is no schema at all).
        found: String,
        /// The version this build writes.
        current: i64,
    },

    /// The idempotent DDL failed.
    #[error("cannot create the schema in {target}: {cause}")]
    Schema {
        /// The database URL, redacted.
        target: String,
        /// The driver's error.
        cause: sqlx::Error,
    },

    /// A statement failed.
    #[error("{op} failed: {cause}")]
    Query {
        /// What the statement was for (`subagent upsert`, `health query`, …).
        op: &'static str,
        /// The driver's error.
        cause: sqlx::Error,
    },

    /// A stored timestamp (a column or an activation key) is not RFC 3339.
    #[error("{what}: {cause}")]
    BadTimestamp {
        /// Which value it was.
        what: String,
        /// The text that could not be read.
        cause: TimestampError,
    },

    /// Not connected right now (a wrapper that reconnects in the background says so
    /// instead of waiting).
    #[error("store {target} is not available: {reason}")]
    Unavailable {
        /// The database URL, redacted.
        target: String,
        /// The last connection error.
        reason: String,
    },
}

impl StoreError {
    pub(crate) fn query(op: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
        move |cause| StoreError::Query { op, cause }
    }

    /// Whether the store could not take the call *now* (DESIGN 7: down, locked,
    /// read-only or full) and the very same call can succeed once it is back: not
    /// connected, the connection lost or refused, a pool that timed out, SQLite busy,
    /// locked, read-only, out of space or failing I/O, PostgreSQL's connection,
    /// resource, shutdown, serialization and lock-timeout errors. Everything else (a
    /// constraint, bad data, a bad URL, a newer schema) is about the call itself and
    /// would fail again.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Unavailable { .. } => true,
            StoreError::OpenSqlite { cause, .. }
            | StoreError::ConnectPostgres { cause, .. }
            | StoreError::Schema { cause, .. }
            | StoreError::Query { cause, .. } => is_transient_driver_error(cause),
            StoreError::Bulk { cause, .. } => cause
                .sqlite_error()
                .is_some_and(|e| is_transient_sqlite_code(i64::from(e.extended_code))),
            StoreError::InvalidUrl { .. }
            | StoreError::NewerSchema { .. }
            | StoreError::NoDatabase { .. }
            | StoreError::NotMigrated { .. }
            | StoreError::BadTimestamp { .. } => false,
        }
    }
}

/// SQLite primary result codes that mean "not now": BUSY, LOCKED, READONLY, IOERR,
/// FULL, CANTOPEN, PROTOCOL.
const SQLITE_TRANSIENT_CODES: [i64; 7] = [5, 6, 8, 10, 13, 14, 15];

/// PostgreSQL SQLSTATE classes and codes that mean "not now": connection exceptions
/// (08), insufficient resources (53), operator intervention such as a shutdown (57),
/// system errors (58), a read-only transaction (25006), a serialization failure or a
/// deadlock (40001, 40P01), a lock not available (55P03).
fn is_transient_sqlstate(code: &str) -> bool {
    matches!(code.get(..2), Some("08" | "53" | "57" | "58"))
        || matches!(code, "25006" | "40001" | "40P01" | "55P03")
}

/// SQLite answered BUSY or LOCKED: another connection holds the lock this one needs.
pub(crate) fn is_sqlite_busy(error: &sqlx::Error) -> bool {
    matches!(sqlite_extended_code(error).map(primary), Some(5 | 6))
}

/// Whether SQLite's (extended) result code means "not now", whichever driver said it.
fn is_transient_sqlite_code(extended: i64) -> bool {
    SQLITE_TRANSIENT_CODES.contains(&primary(extended))
}

/// SQLite reports its extended result code; the primary one is its low byte.
fn primary(extended: i64) -> i64 {
    extended & 0xff
}

/// SQLite's extended result code of a database error through sqlx; `None` for any
/// other error or engine.
fn sqlite_extended_code(error: &sqlx::Error) -> Option<i64> {
    let sqlx::Error::Database(db) = error else {
        return None;
    };
    db.try_downcast_ref::<sqlx::sqlite::SqliteError>()?;
    db.code()?.parse::<i64>().ok()
}

fn is_transient_driver_error(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db)
            if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() =>
        {
            sqlite_extended_code(error).is_some_and(is_transient_sqlite_code)
        }
        sqlx::Error::Database(db) => db.code().is_some_and(|code| is_transient_sqlstate(&code)),
        _ => false,
    }
}

/// Hides a password in a URL so errors and logs never carry secrets: the userinfo
/// password and a `password` query parameter (both of which the PostgreSQL driver
/// reads) become `***`. A URL with neither comes back exactly as given.
///
/// The URL is read by the `url` crate, the parser the driver uses. Where that parser
/// cannot be trusted to have found the userinfo (the URL does not parse, or an `@`
/// appears after the authority, as when a password holds an unencoded `/`, `?` or
/// `#`), everything between `://` and the last `@` is taken as userinfo instead and
/// all of it after its first `:` is hidden: over-redacting a strange URL is fine,
/// leaking a password is not.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) if !has_stray_at(&parsed) => redact_parsed(url, parsed),
        _ => redact_text(url),
    }
}

/// An `@` after the authority: possibly the end of a userinfo the parser cut short.
fn has_stray_at(parsed: &url::Url) -> bool {
    [Some(parsed.path()), parsed.query(), parsed.fragment()]
        .into_iter()
        .flatten()
        .any(|part| part.contains('@'))
}

fn redact_parsed(original: &str, mut parsed: url::Url) -> String {
    let password_in_query = parsed.query_pairs().any(|(key, _)| key == "password");
    if parsed.password().is_none() && !password_in_query {
        return original.to_owned();
    }
    if parsed.password().is_some() && parsed.set_password(Some("***")).is_err() {
        // Only a URL that cannot have a password refuses one; say nothing of it.
        return redact_text(original);
    }
    if password_in_query {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(key, value)| {
                let value = if key == "password" {
                    "***".to_owned()
                } else {
                    value.into_owned()
                };
                (key.into_owned(), value)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.into()
}

/// The fallback: the userinfo ends at the last `@` after `://`; its password is all of
/// it after the first `:`.
fn redact_text(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    let prefix = scheme.map(|s| format!("{s}://")).unwrap_or_default();
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{prefix}{user}:***@{host}"),
        None => format!("{prefix}{userinfo}@{host}"),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_never_survive_redaction() {
        assert_eq!(
            redact_url("postgres://bob:hunter2@db:5432/x"),
            "postgres://bob:***@db:5432/x"
        );
        assert_eq!(redact_url("postgres://bob@db/x"), "postgres://bob@db/x");
        assert_eq!(redact_url("sqlite://a.db"), "sqlite://a.db");
    }

    /// Passwords with the characters that end an authority early (`/`, `?`, `#`), an
    /// `@` of their own, or percent-encoded: nothing of them may appear.
    #[test]
    fn awkward_passwords_never_survive_redaction() {
        let cases = [
            (
                "postgres://u:p/ss@h/db",
                "postgres://u:***@h/db",
                &["p/ss", "ss@"][..],
            ),
            (
                "postgres://u:hunter/two@h/db",
                "postgres://u:***@h/db",
                &["hunter", "two"],
            ),
            (
                "postgres://u:1234/ss@h:5432/db",
                "postgres://u:***@h:5432/db",
                &["1234", "ss@"],
            ),
            (
                "postgres://u:hun?ter@h/db",
                "postgres://u:***@h/db",
                &["hun", "ter"],
            ),
            (
                "postgres://u:hun#ter@h/db",
                "postgres://u:***@h/db",
                &["hun", "ter"],
            ),
            (
                "postgres://u:hun@ter@h/db",
                "postgres://u:***@h/db",
                &["hun", "ter"],
            ),
            (
                "postgres://u:hunter%2Ftwo@h/db",
                "postgres://u:***@h/db",
                &["hunter", "two", "%2F"],
            ),
            (
                "postgres://u:hunter%40two@h/db",
                "postgres://u:***@h/db",
                &["hunter", "two", "%40"],
            ),
            (
                "postgres://u:hunter%3Atwo@h/db",
                "postgres://u:***@h/db",
                &["hunter", "two", "%3A"],
            ),
            (
                "postgres://:hunter@h/db",
                "postgres://:***@h/db",
                &["hunter"],
            ),
            (
                "postgres://u@h/db?sslmode=disable&password=hunter%2Ftwo",
                "postgres://u@h/db?sslmode=disable&password=***",
                &["hunter", "two"],
            ),
            ("u:hunter/two@h/db", "u:***@h/db", &["hunter", "two"]),
        ];
        for (url, expected, secrets) in cases {
            let redacted = redact_url(url);
            for secret in secrets {
                assert!(
                    !redacted.contains(secret),
                    "{url:?} -> {redacted:?} still shows {secret:?}"
                );
            }
            assert_eq!(redacted, expected, "{url:?}");
        }
    }

    /// Without a password a URL is returned verbatim, not normalised.
    #[test]
    fn urls_without_a_password_are_left_as_given() {
        for url in [
            "sqlite:///tmp/my dir/fanout.db",
            "sqlite:fanout.db",
            "sqlite:///tmp/a@b/fanout.db",
            "postgres://bob@DB.example:5432/x?sslmode=disable",
            "not a url",
        ] {
            assert_eq!(redact_url(url), url);
        }
    }
}
