//! What the snapshot tests share: running `fanout` keyless on scenario folders, and
//! scratch copies of committed scenarios.

use std::path::Path;
use std::process::{Command, Output};

/// `fanout ARGS DIRS…` with every key, base URL and log setting of the environment
/// removed (a base URL makes a provider usable without a key: the agent's rule).
pub fn fanout(args: &[&str], dirs: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fanout"))
        .args(args)
        .args(dirs)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("FANOUT_LOG")
        .output()
        .expect("run fanout")
}

/// Stdout then stderr, as one text.
pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Copies the folder `from` to `to`, subfolders included (a cassette is one).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}
