//! Files and directories the harness creates are private: files 0600,
//! directories 0700 (DESIGN 7), through `fanout-types`' one rule. Every write
//! of a snapshot's expected files and of a cassette goes through here.

use std::io::Write;
use std::path::Path;

use fanout_types::{create_private_dir, private_open_options};

/// Writes `bytes` to `path`, creating it 0600 (an existing file keeps the
/// mode its owner gave it).
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    private_open_options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?
        .write_all(bytes)
}

/// Replaces `path` with `bytes` atomically: written 0600 beside it, then
/// renamed over it, so a reader (or a crash) never sees half a file.
pub fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(".{name}.partial"));
    let mut file = private_open_options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_data()?;
    drop(file);
    std::fs::rename(&temporary, path)
}

/// Creates `dir` and its missing parents; the directories created are 0700.
pub fn create_dir(dir: &Path) -> std::io::Result<()> {
    create_private_dir(dir)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn files_are_0600_and_directories_0700() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        create_dir(&dir).unwrap();
        assert_eq!((mode(&tmp.path().join("a")), mode(&dir)), (0o700, 0o700));
        write(&dir.join("w"), b"one").unwrap();
        replace(&dir.join("r"), b"two").unwrap();
        replace(&dir.join("r"), b"three").unwrap();
        assert_eq!((mode(&dir.join("w")), mode(&dir.join("r"))), (0o600, 0o600));
        assert_eq!(std::fs::read(dir.join("r")).unwrap(), b"three");
        // Nothing is left beside the replaced file.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    }
}
