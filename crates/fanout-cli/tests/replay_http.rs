//! `fanout replay serve` with `fanout agent`'s HTTP providers pointed at it:
//! the agent replays a recorded scenario keyless, and the snapshot matches
//! byte for byte.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
}

/// A `fanout replay serve` child, killed when dropped.
struct ReplayServer {
    child: Child,
    url: String,
}

impl ReplayServer {
    fn start(scenario: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fanout"))
            .args(["replay", "serve", "--listen", "127.0.0.1:0", "--scenario"])
            .arg(scenario)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start fanout replay serve");
        let stdout = child.stdout.take().unwrap();
        let mut first = String::new();
        BufReader::new(stdout).read_line(&mut first).unwrap();
        let url = first
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in the banner {first:?}"))
            .to_string();
        Self { child, url }
    }
}

impl Drop for ReplayServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A copy of `name` whose agent is `fanout agent --provider <provider>` against `base_url`.
fn http_scenario(name: &str, provider: &str, base_url: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(scenario(name)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    let mut toml = std::fs::read_to_string(dir.join("scenario.toml")).unwrap();
    toml.push_str(&format!(
        "\n[agent]\ncommand = [\"{{fanout}}\", \"agent\", \"--provider\", \"{provider}\", \"--base-url\", \"{base_url}\", \
         \"--model\", \"{{model}}\", \"--sessions-root\", \"{{sessions_root}}\"]\n"
    ));
    std::fs::write(dir.join("scenario.toml"), toml).unwrap();
    (tmp, dir)
}

fn snapshot_run(dir: &Path) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_fanout"))
        .args(["snapshot", "run"])
        .arg(dir)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .unwrap();
    (
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

#[test]
fn agent_http_providers_replay_a_nested_scenario_keyless() {
    for (name, provider, suffix) in [
        ("subagent-multi", "anthropic", ""),
        ("subagent-mixed", "anthropic", ""),
        ("subagent-multi", "openai", "/v1"),
    ] {
        let server = ReplayServer::start(&scenario(name));
        let (_tmp, dir) = http_scenario(name, provider, &format!("{}{suffix}", server.url));
        let (ok, said) = snapshot_run(&dir);
        assert!(ok, "{name} over {provider}: {said}");
        assert!(said.contains("4 file(s) match"), "{said}");
    }
}

#[test]
fn the_server_refuses_past_the_recording_with_a_clear_error() {
    // Two runs against one server: the second has no recorded responses left.
    let server = ReplayServer::start(&scenario("single"));
    let (_tmp, dir) = http_scenario("single", "anthropic", &server.url);
    let (ok, said) = snapshot_run(&dir);
    assert!(ok, "{said}");
    let (ok, said) = snapshot_run(&dir);
    assert!(!ok);
    assert!(
        said.contains("HTTP 409") && said.contains("distinct caller number 2"),
        "{said}"
    );
}
