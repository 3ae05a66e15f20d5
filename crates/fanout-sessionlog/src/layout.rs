//! Where logs live: `<root>/<bucket>/<session id>.jsonl`, where the bucket is a
//! stable, filesystem-safe name derived from the session's cwd. Sessions with the
//! same cwd (a parent and its children) share a bucket.

use std::path::{Path, PathBuf};

use crate::error::ReadError;
use crate::reader::read_header;
use crate::types::Header;
use fanout_types::Timestamp;

/// Longest sanitised cwd tail kept in a bucket name.
const MAX_TAIL: usize = 48;

/// The bucket name of a cwd: a sanitised tail of the path (ASCII letters,
/// digits, `.`, `_`, `-`; other runs become one `-`), then `-` and a 16-hex
/// FNV-1a hash of the full path text, which keeps distinct paths apart.
///
/// `/home/dev/proj` -> `home-dev-proj-<hash>`.
pub fn bucket_name(cwd: &str) -> String {
    let mut sanitised = String::with_capacity(cwd.len());
    let mut last_dash = true;
    for c in cwd.chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            sanitised.push(c);
            last_dash = false;
        } else if !last_dash {
            sanitised.push('-');
            last_dash = true;
        }
    }
    let trimmed = sanitised.trim_matches(|c| c == '-' || c == '.');
    let tail: String = {
        let chars: Vec<char> = trimmed.chars().collect();
        let start = chars.len().saturating_sub(MAX_TAIL);
        chars[start..].iter().collect()
    };
    let tail = tail.trim_start_matches(['-', '.']);
    let hash = fnv1a64(cwd.as_bytes());
    if tail.is_empty() {
        format!("root-{hash:016x}")
    } else {
        format!("{tail}-{hash:016x}")
    }
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The bucket directory of a cwd under a sessions root.
pub fn bucket_dir(root: &Path, cwd: &str) -> PathBuf {
    root.join(bucket_name(cwd))
}

/// The log file of a session.
pub fn log_path(root: &Path, cwd: &str, session_id: &str) -> PathBuf {
    bucket_dir(root, cwd).join(format!("{session_id}.jsonl"))
}

/// The default sessions root: `sessions` under fanout's data directory
/// ([`fanout_types::default_data_dir`]).
pub fn default_sessions_root() -> PathBuf {
    fanout_types::default_data_dir().join("sessions")
}

/// One log found under a sessions root.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    /// The file.
    pub path: PathBuf,
    /// Its header.
    pub header: Header,
}

/// Every `*.jsonl` log in every bucket under `root`, with its header, ordered
/// primary-first: sessions without a parent first, then by `createdAt`, then id.
/// A root that does not exist yields no logs; an unreadable log or a bad header
/// is an error naming the file and line.
pub fn list_logs(root: &Path) -> Result<Vec<LogEntry>, ReadError> {
    let mut entries = Vec::new();
    let buckets = match std::fs::read_dir(root) {
        Ok(rd) => rd,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(entries),
        Err(error) => {
            return Err(ReadError::Io {
                path: root.to_path_buf(),
                error,
            });
        }
    };
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |error| ReadError::Io { path, error }
    };
    let mut bucket_paths = Vec::new();
    for bucket in buckets {
        let bucket = bucket.map_err(io(root))?;
        let kind = bucket.file_type().map_err(io(&bucket.path()))?;
        if kind.is_dir() {
            bucket_paths.push(bucket.path());
        }
    }
    bucket_paths.sort();
    for bucket in bucket_paths {
        let mut files = Vec::new();
        for file in std::fs::read_dir(&bucket).map_err(io(&bucket))? {
            let file = file.map_err(io(&bucket))?;
            let path = file.path();
            let kind = file.file_type().map_err(io(&path))?;
            if kind.is_file() && path.extension().is_some_and(|e| e == "jsonl") {
                files.push(path);
            }
        }
        files.sort();
        for path in files {
            let header = read_header(&path)?;
            entries.push(LogEntry { path, header });
        }
    }
    sort_primary_first(&mut entries);
    Ok(entries)
}

/// Orders logs primary-first: sessions without a parent first, then each group
/// by [`creation_order`].
pub fn sort_primary_first(entries: &mut [LogEntry]) {
    entries.sort_by(|a, b| {
        let child = |e: &LogEntry| e.header.parent_session.is_some();
        child(a).cmp(&child(b)).then_with(|| {
            creation_order(a.header.created_at, &a.header.id)
                .cmp(&creation_order(b.header.created_at, &b.header.id))
        })
    });
}

/// The sort key of sessions by `createdAt`, then id: the replay script order
/// of DESIGN 5.3, and the order within each group of [`sort_primary_first`].
pub fn creation_order(created_at: Timestamp, id: &str) -> (Timestamp, &str) {
    (created_at, id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_are_safe_stable_and_distinct() {
        let a = bucket_name("/home/dev/proj");
        assert!(a.starts_with("home-dev-proj-"), "{a}");
        assert_eq!(a, bucket_name("/home/dev/proj"));
        assert_ne!(a, bucket_name("/home/dev/proj/"));
        assert_ne!(bucket_name("/a b"), bucket_name("/a-b"));
        for cwd in ["/", "", "C:\\Users\\x", "/tmp/ünï cödé/..", "../../etc"] {
            let name = bucket_name(cwd);
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
                "{name}"
            );
            assert!(!name.starts_with('.') && !name.starts_with('-'), "{name}");
            assert!(name.len() <= MAX_TAIL + 17, "{name}");
        }
        let long = format!("/{}", "x".repeat(300));
        assert_eq!(bucket_name(&long).len(), MAX_TAIL + 17);
    }
}
