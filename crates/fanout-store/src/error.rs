//! Typed errors. Every message names the thing that is wrong (the URL, the file, the
//! operation), because these reach users verbatim as one line. The cause is part of
//! the message (and deliberately not a `source()`), so a chain printer never repeats it.

use crate::time::TimestampError;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("invalid database URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },

    #[error("cannot open SQLite database {path}: {cause}")]
    OpenSqlite { path: String, cause: sqlx::Error },

    #[error("cannot connect to PostgreSQL at {target}: {cause}")]
    ConnectPostgres { target: String, cause: sqlx::Error },

    #[error(
        "database {target} was written by a newer fanout (schema version {found}; this build understands up to {supported}); upgrade fanout or choose another --db"
    )]
    NewerSchema {
        target: String,
        found: i64,
        supported: i64,
    },

    #[error("no database at {target}: the SQLite file {path} does not exist")]
    NoDatabase { target: String, path: String },

    #[error(
        "{target} has no fanout schema (schema version {found}, this build writes {current}): run `fanout migrate --db {target}` first"
    )]
    NotMigrated {
        target: String,
        found: String,
        current: i64,
    },

    #[error("cannot create the schema in {target}: {cause}")]
    Schema { target: String, cause: sqlx::Error },

    #[error("{op} failed: {cause}")]
    Query {
        op: &'static str,
        cause: sqlx::Error,
    },

    #[error("{what}: {cause}")]
    BadTimestamp { what: String, cause: TimestampError },

    /// Not connected right now (a wrapper that reconnects in the background says so
    /// instead of waiting); `reason` is the last connection error.
    #[error("store {target} is not available: {reason}")]
    Unavailable { target: String, reason: String },
}

impl StoreError {
    pub(crate) fn query(op: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
        move |cause| StoreError::Query { op, cause }
    }
}

/// Hides a password in a URL so errors and logs never carry secrets.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            if userinfo.contains(':') {
                format!("{scheme}://{user}:***@{host}{tail}")
            } else {
                format!("{scheme}://{user}@{host}{tail}")
            }
        }
        None => url.to_owned(),
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
}
