//! Private files and directories (the default data directory is
//! [`fanout_sessionlog::default_data_dir`]).

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
