//! Where fanout keeps its own files when not told otherwise.

use std::path::PathBuf;

/// fanout's data directory: `$FANOUT_DATA_DIR`, else `$XDG_DATA_HOME/fanout`, else
/// `$HOME/.local/share/fanout`, else `./.fanout` (a process without a home still gets
/// a place it can write, next to the work it captures).
pub fn default_data_dir() -> PathBuf {
    let non_empty = |key: &str| std::env::var_os(key).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("FANOUT_DATA_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(data) = non_empty("XDG_DATA_HOME") {
        return PathBuf::from(data).join("fanout");
    }
    match non_empty("HOME") {
        Some(home) => PathBuf::from(home).join(".local/share/fanout"),
        None => PathBuf::from(".fanout"),
    }
}

/// Creates `dir` and its missing parents; the ones created are 0700 (transcripts and
/// stats are nobody else's business).
pub(crate) fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Options for a new file only its owner may read (mode 0600 from the first byte,
/// not chmod-ed afterwards, so it is never readable by others even briefly).
pub(crate) fn private_new_file() -> std::fs::OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true).mode(0o600);
    options
}
