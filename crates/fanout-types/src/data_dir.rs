//! Where fanout keeps its own files.

use std::ffi::OsString;
use std::path::PathBuf;

/// fanout's data directory, the one rule for every file fanout keeps on its own
/// (session logs, transcripts, stats files): `$FANOUT_DATA_DIR`, else
/// `$XDG_DATA_HOME/fanout`, else `$HOME/.local/share/fanout`, else `./.fanout` (a
/// process without a home still gets a place it can write, next to its work). An
/// empty variable counts as unset.
pub fn default_data_dir() -> PathBuf {
    data_dir_from(|key| std::env::var_os(key))
}

/// [`default_data_dir`] over any environment, so the rule is testable without
/// touching the process's own.
fn data_dir_from(var: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let non_empty = |key: &str| var(key).filter(|v| !v.is_empty());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(vars: &[(&str, &str)]) -> PathBuf {
        data_dir_from(|key| {
            vars.iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| OsString::from(v))
        })
    }

    #[test]
    fn precedence_is_fanout_then_xdg_then_home_then_cwd() {
        let all = [
            ("FANOUT_DATA_DIR", "/f"),
            ("XDG_DATA_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(dir(&all), PathBuf::from("/f"));
        assert_eq!(dir(&all[1..]), PathBuf::from("/x/fanout"));
        assert_eq!(dir(&all[2..]), PathBuf::from("/h/.local/share/fanout"));
        assert_eq!(dir(&[]), PathBuf::from(".fanout"));
    }

    #[test]
    fn empty_variables_count_as_unset() {
        let vars = [
            ("FANOUT_DATA_DIR", ""),
            ("XDG_DATA_HOME", ""),
            ("HOME", "/h"),
        ];
        assert_eq!(dir(&vars), PathBuf::from("/h/.local/share/fanout"));
    }
}
