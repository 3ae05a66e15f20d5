//! Files and directories only their owner may read (DESIGN 7: files fanout writes
//! are 0600).
//!
//! The mode is given at creation, never chmod-ed afterwards, so a file is not
//! readable by others even briefly. A file or directory that already exists keeps
//! the mode its owner gave it. On platforms without Unix modes these are the plain
//! standard-library calls.

use std::fs::{DirBuilder, OpenOptions};
use std::io;
use std::path::Path;

/// Open options whose newly created file is mode 0600. They set no access or
/// creation flags: the caller says `write`/`append`, `create`/`create_new`,
/// `truncate` as its file needs.
pub fn private_open_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// Creates `dir` and its missing parents; the ones it creates are 0700 (logs,
/// transcripts and stats are nobody else's business).
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

#[cfg(all(test, unix))]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn new_files_are_0600_and_new_dirs_0700() {
        let scratch = tempfile::tempdir().unwrap();
        let nested = scratch.path().join("a/b");
        create_private_dir(&nested).unwrap();
        assert_eq!(mode(&scratch.path().join("a")), 0o700);
        assert_eq!(mode(&nested), 0o700);

        let file = nested.join("f");
        let mut opened = private_open_options()
            .write(true)
            .create_new(true)
            .open(&file)
            .unwrap();
        opened.write_all(b"x").unwrap();
        assert_eq!(mode(&file), 0o600);
    }

    #[test]
    fn existing_paths_keep_their_mode() {
        let scratch = tempfile::tempdir().unwrap();
        let file = scratch.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        private_open_options()
            .write(true)
            .truncate(true)
            .open(&file)
            .unwrap();
        assert_eq!(mode(&file), 0o644);

        std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        create_private_dir(scratch.path()).unwrap();
        assert_eq!(mode(scratch.path()), 0o755);
    }

    #[test]
    fn options_carry_no_access_flags() {
        let scratch = tempfile::tempdir().unwrap();
        // Without an access mode the standard library refuses to open at all: the
        // caller must say what it wants.
        assert!(
            private_open_options()
                .open(scratch.path().join("f"))
                .is_err()
        );
    }
}
