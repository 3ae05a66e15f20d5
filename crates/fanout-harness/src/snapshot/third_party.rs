//! Snapshot runs of a third-party agent (DESIGN 5.5): the scenario names the
//! agent's command (after an optional installer), how it learns its model
//! API's base URL, and a cassette. A replay serves the cassette on a free
//! loopback port; a recording forwards through `replay record` to a live
//! upstream and writes the cassette. The agent gets a fresh home, a clean
//! environment (PATH, LANG, LC_ALL, TERM, SHELL and the scenario's own
//! variables) and its own process group; once its prompts are answered the
//! run waits until the model traffic is over (every recorded exchange
//! served, or quiet for `settle_secs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fanout_replay::{CassetteScripts, Rung};
use sha2::{Digest, Sha256};

use super::{
    CassetteRecording, RunDirs, RunMode, Snapshot, harvest, scenario_error, summary,
    transcript_lines,
};
use crate::acp::{AgentCommand, DriveOutcome, ExitPolicy, drive_until};
use crate::cassette::Cassette;
use crate::cassette::format::is_cassette_file;
use crate::cassette::record::{RecordOptions, RunningRecorder};
use crate::cassette::serve::{CassetteServer, RunningCassetteServer, id_of_key};
use crate::error::HarnessError;
use crate::normalize::Normalizer;
use crate::private_file;
use crate::scenario::{Placeholders, Scenario, ThirdParty};

/// The variables an agent keeps from the harness's environment.
const KEPT_ENV: [&str; 5] = ["PATH", "LANG", "LC_ALL", "TERM", "SHELL"];
/// How often the settle condition is checked.
const SETTLE_POLL: Duration = Duration::from_millis(50);

/// Where the model traffic goes during the run.
enum Server {
    Replay(RunningCassetteServer),
    Record(RunningRecorder, PathBuf),
}

impl Server {
    fn base_url(&self) -> String {
        match self {
            Server::Replay(server) => server.base_url(),
            Server::Record(recorder, _) => recorder.base_url(),
        }
    }

    /// Exchanges in flight, when the last started or ended, and whether every
    /// recorded exchange has been served (replay only).
    fn activity(&self) -> (usize, Option<Instant>, bool) {
        match self {
            Server::Replay(server) => {
                let (in_flight, last) = server.server().activity();
                (in_flight, last, server.server().binding().finished())
            }
            Server::Record(recorder, _) => {
                let (in_flight, last) = recorder.recorder().activity();
                (in_flight, last, false)
            }
        }
    }
}

/// What the run served, per cassette conversation.
struct Served {
    cassette: Cassette,
    scripts: CassetteScripts,
    progress: Vec<usize>,
    rungs: Vec<Option<Rung>>,
    /// Recorded identity -> the live id that claimed it.
    live_ids: BTreeMap<usize, String>,
    misses: Vec<String>,
}

pub(super) async fn run(
    scenario: &Scenario,
    third: &ThirdParty,
    fanout: &Path,
    mode: &RunMode,
) -> Result<Snapshot, HarnessError> {
    let cassette_dir = scenario.dir.join(&third.cassette);
    let cassette = match mode {
        RunMode::Replay => Some(Cassette::load(&cassette_dir)?),
        RunMode::RecordCassette(CassetteRecording { force, .. }) => {
            if !force && let Some(file) = cassette_file_in(&cassette_dir)? {
                return Err(HarnessError::CassetteExists {
                    dir: cassette_dir,
                    file,
                });
            }
            None
        }
        RunMode::Record(_) => {
            return Err(scenario_error(
                scenario,
                "this scenario's agent is a third-party command that records a cassette: \
                 record it with --upstream URL",
            ));
        }
    };
    let install = match &third.install {
        Some(script) => Some(run_installer(script).await?),
        None => None,
    };
    let dirs = RunDirs::create(scenario)?;
    let home = dirs.root().join("home");
    private_file::create_dir(&home).map_err(HarnessError::io(&home))?;
    let declared = BTreeMap::from([
        (
            "workspace".to_string(),
            dirs.workspace.to_string_lossy().into_owned(),
        ),
        ("home".to_string(), home.to_string_lossy().into_owned()),
        (
            "run".to_string(),
            dirs.root().to_string_lossy().into_owned(),
        ),
    ]);
    let server = match (mode, cassette) {
        (RunMode::RecordCassette(recording), _) => {
            let out = dirs.root().join("cassette");
            let options = RecordOptions {
                upstream: recording.upstream.clone(),
                out: out.clone(),
                force: false,
                declared: declared.clone(),
            };
            Server::Record(RunningRecorder::start(options, "127.0.0.1:0").await?, out)
        }
        (_, Some(cassette)) => {
            let server = CassetteServer::new(cassette, &declared)?;
            Server::Replay(RunningCassetteServer::start(server, "127.0.0.1:0").await?)
        }
        (_, None) => return Err(scenario_error(scenario, "no cassette to replay")),
    };
    let base_url = server.base_url();
    let mut placeholders = dirs.placeholders(fanout, scenario.model.as_deref().unwrap_or(""));
    placeholders.set("{home}", &home.to_string_lossy());
    placeholders.set("{base_url}", &base_url);
    if let Some(install) = &install {
        placeholders.set("{install}", &install.to_string_lossy());
    }
    make_home(&home, third, &placeholders)?;
    let command = agent_command(scenario, third, &placeholders, &base_url)?;
    let plan = dirs.plan(scenario, ExitPolicy::Ended);
    let settle = settled(&server, third.settle, scenario.timeout);
    let driven = drive_until(&command, &plan, settle).await;
    let served = stop(server, scenario, &cassette_dir).await?;
    let outcome = driven?;

    let logs = harvest(&dirs.sessions_root)?;
    let mut normalizer = dirs.normalizer(fanout, &logs, &outcome);
    normalizer.number_hex_ids();
    normalizer.literal(&home.to_string_lossy(), "<HOME>");
    normalizer.literal(&base_url, "<BASE_URL>");
    normalizer.literal(base_url.trim_start_matches("http://"), "<BASE_ADDR>");
    if let Some(install) = &install {
        normalizer.literal(&install.to_string_lossy(), "<INSTALL>");
    }
    if let Some(version) = agent_version(&outcome) {
        normalizer.literal(
            &format!("\"version\":\"{version}\""),
            "\"version\":\"<agent-version>\"",
        );
    }
    let mut known_ids = vec![(outcome.session_id.clone(), "<session>".to_string())];
    let numbers = identity_numbers(&served.scripts);
    for (recorded, live) in &served.live_ids {
        let placeholder = format!("<id-{}>", numbers[*recorded]);
        normalizer.session(live, &placeholder);
        known_ids.push((live.clone(), placeholder));
    }
    let lines = transcript_lines(&outcome, scenario, &known_ids);
    let session_logs = normalizer.logs_and_lines(&logs, &lines);
    let mut transcript = cassette_summary(&served, &mut normalizer);
    if !session_logs.is_empty() {
        transcript.push_str(&summary(&session_logs));
    }
    let misses: Vec<String> = served
        .misses
        .iter()
        .map(|m| normalizer.normalize(m))
        .collect();
    for miss in &misses {
        transcript.push_str(&format!("# MISS {miss}\n"));
    }
    for line in &lines {
        transcript.push_str(&normalizer.normalize(line));
        transcript.push('\n');
    }
    Ok(Snapshot {
        transcript,
        session_logs,
        misses,
    })
}

/// The first cassette file in `dir`, if it holds one.
fn cassette_file_in(dir: &Path) -> Result<Option<String>, HarnessError> {
    let entries = match std::fs::read_dir(dir) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(HarnessError::Io {
                path: dir.to_path_buf(),
                error,
            });
        }
        Ok(entries) => entries,
    };
    for entry in entries {
        let name = entry.map_err(HarnessError::io(dir))?.file_name();
        let name = name.to_string_lossy();
        if is_cassette_file(&name) {
            return Ok(Some(name.into_owned()));
        }
    }
    Ok(None)
}

/// Runs an installer (`bash SCRIPT`); its last stdout line is the install dir.
async fn run_installer(script: &Path) -> Result<PathBuf, HarnessError> {
    let failed = |message: String| HarnessError::Install {
        script: script.to_path_buf(),
        message,
    };
    let output = tokio::process::Command::new("bash")
        .arg(script)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|err| failed(format!("cannot run it: {err}")))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr
            .lines()
            .rev()
            .take(12)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        return Err(failed(format!("exited with {}:\n{tail}", output.status)));
    }
    let dir = stdout.lines().last().map(str::trim).unwrap_or("");
    let dir = PathBuf::from(dir);
    if dir.as_os_str().is_empty() || !dir.is_dir() {
        return Err(failed(format!(
            "its last line of output, {:?}, is not a directory",
            dir
        )));
    }
    Ok(dir)
}

/// The agent's fresh home: its directories, files and links.
fn make_home(
    home: &Path,
    third: &ThirdParty,
    placeholders: &Placeholders,
) -> Result<(), HarnessError> {
    for dir in &third.home_dirs {
        let path = home.join(dir);
        private_file::create_dir(&path).map_err(HarnessError::io(&path))?;
    }
    let parent_of = |path: &Path| -> Result<(), HarnessError> {
        if let Some(parent) = path.parent() {
            private_file::create_dir(parent).map_err(HarnessError::io(parent))?;
        }
        Ok(())
    };
    for (file, text) in &third.home_files {
        let path = home.join(file);
        parent_of(&path)?;
        private_file::write(&path, placeholders.apply(text).as_bytes())
            .map_err(HarnessError::io(&path))?;
    }
    for (link, target) in &third.home_links {
        let path = home.join(link);
        parent_of(&path)?;
        let target = placeholders.apply(target);
        #[cfg(unix)]
        std::os::unix::fs::symlink(&target, &path).map_err(HarnessError::io(&path))?;
        #[cfg(not(unix))]
        std::fs::copy(&target, &path).map_err(HarnessError::io(&path))?;
    }
    Ok(())
}

fn agent_command(
    scenario: &Scenario,
    third: &ThirdParty,
    placeholders: &Placeholders,
    base_url: &str,
) -> Result<AgentCommand, HarnessError> {
    let argv = placeholders.substitute(scenario.agent_command.as_deref().unwrap_or_default());
    let Some(mut command) = AgentCommand::from_argv(&argv) else {
        return Err(scenario_error(scenario, "the agent command is empty"));
    };
    command.env_clear = true;
    for name in KEPT_ENV {
        if let Some(value) = std::env::var_os(name) {
            command
                .env
                .push((name.to_string(), value.to_string_lossy().into_owned()));
        }
    }
    for (name, value) in &third.env {
        command.env.push((name.clone(), placeholders.apply(value)));
    }
    if let Some(name) = &third.base_url_env {
        command.env.push((name.clone(), base_url.to_string()));
    }
    Ok(command)
}

/// Resolves once the model traffic is over: nothing in flight and either
/// every recorded exchange served or `quiet` without a request; at most
/// `limit` after it starts waiting.
async fn settled(server: &Server, quiet: Duration, limit: Duration) {
    let start = Instant::now();
    loop {
        let (in_flight, last, finished) = server.activity();
        let since = last.map_or(start, |last| last.max(start));
        if in_flight == 0 && (finished || since.elapsed() >= quiet) {
            return;
        }
        if start.elapsed() >= limit {
            tracing::warn!("the model traffic did not settle in {}s", limit.as_secs());
            return;
        }
        tokio::time::sleep(SETTLE_POLL).await;
    }
}

/// Stops the server and says what was served; a recording's cassette is
/// moved into the scenario.
async fn stop(
    server: Server,
    scenario: &Scenario,
    cassette_dir: &Path,
) -> Result<Served, HarnessError> {
    match server {
        Server::Replay(running) => {
            let server: Arc<CassetteServer> = running.server().clone();
            running.shutdown().await?;
            let binding = server.binding();
            let scripts = binding.scripts().clone();
            let live_ids = binding
                .bound_identities()
                .into_iter()
                .map(|(live, recorded)| (recorded, id_of_key(&live)))
                .collect();
            Ok(Served {
                cassette: server.cassette().clone(),
                progress: binding.progress(),
                rungs: binding.bound_rungs(),
                misses: binding.misses().iter().map(ToString::to_string).collect(),
                scripts,
                live_ids,
            })
        }
        Server::Record(recorder, out) => {
            recorder.finish().await?;
            let cassette = Cassette::load(&out)?;
            let scripts = cassette.scripts()?;
            if cassette.index.conversations.is_empty() {
                return Err(scenario_error(
                    scenario,
                    "the agent made no model request: nothing was recorded",
                ));
            }
            install_cassette(&out, cassette_dir)?;
            let live_ids = cassette
                .index
                .identities
                .iter()
                .enumerate()
                .map(|(at, identity)| (at, id_of_key(&identity.key)))
                .collect();
            let rungs = (0..scripts.conversations().len())
                .map(|c| Some(scripts.recorded_rung(c)))
                .collect();
            Ok(Served {
                progress: scripts
                    .conversations()
                    .iter()
                    .map(|c| c.steps.len())
                    .collect(),
                rungs,
                misses: Vec::new(),
                scripts,
                live_ids,
                cassette,
            })
        }
    }
}

/// Replaces the cassette files in `dest` with those recorded in `out`.
fn install_cassette(out: &Path, dest: &Path) -> Result<(), HarnessError> {
    private_file::create_dir(dest).map_err(HarnessError::io(dest))?;
    for entry in std::fs::read_dir(dest).map_err(HarnessError::io(dest))? {
        let entry = entry.map_err(HarnessError::io(dest))?;
        if is_cassette_file(&entry.file_name().to_string_lossy()) {
            std::fs::remove_file(entry.path()).map_err(HarnessError::io(entry.path()))?;
        }
    }
    for entry in std::fs::read_dir(out).map_err(HarnessError::io(out))? {
        let entry = entry.map_err(HarnessError::io(out))?;
        let bytes = std::fs::read(entry.path()).map_err(HarnessError::io(entry.path()))?;
        let path = dest.join(entry.file_name());
        private_file::write(&path, &bytes).map_err(HarnessError::io(&path))?;
    }
    Ok(())
}

/// Each recorded identity's number in the transcript (`<id-N>`): by the
/// first file name of its conversations, so the order of the index's lists
/// (which of two independent subagents was recorded first) does not show.
fn identity_numbers(scripts: &CassetteScripts) -> Vec<usize> {
    let first_file = |identity: usize| {
        scripts
            .conversations()
            .iter()
            .filter(|c| c.identity == Some(identity))
            .map(|c| c.name.as_str())
            .min()
    };
    let mut order: Vec<usize> = (0..scripts.identities().len()).collect();
    // Identities with no conversation go last, in index order.
    order.sort_by_key(|&i| (first_file(i).is_none(), first_file(i), i));
    let mut numbers = vec![0; order.len()];
    for (rank, identity) in order.into_iter().enumerate() {
        numbers[identity] = rank + 1;
    }
    numbers
}

/// The agent's version from its `initialize` answer.
fn agent_version(outcome: &DriveOutcome) -> Option<String> {
    outcome.transcript.iter().find_map(|line| {
        let message: serde_json::Value = serde_json::from_str(&line.text).ok()?;
        message
            .pointer("/result/agentInfo/version")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    })
}

/// The transcript's head for a cassette: one line per conversation, by file
/// name (so the order of the index does not matter): its caller, the rung that
/// bound it, how many exchanges were served, and a digest of those exchanges'
/// recorded responses, which catches an edit to any byte of them.
fn cassette_summary(served: &Served, normalizer: &mut Normalizer) -> String {
    let mut out = String::from(
        "# fanout snapshot: cassette conversations by file (caller, rung that bound it, \
         exchanges served, digest of the served responses)\n",
    );
    let scripts = &served.scripts;
    let numbers = identity_numbers(scripts);
    let mut order: Vec<usize> = (0..scripts.conversations().len()).collect();
    order.sort_by(|a, b| {
        scripts.conversations()[*a]
            .name
            .cmp(&scripts.conversations()[*b].name)
    });
    let who = |identity: usize, normalizer: &mut Normalizer| match served.live_ids.get(&identity) {
        Some(live) => normalizer.normalize(live),
        None => format!("<id-{}> (unclaimed)", numbers[identity]),
    };
    for c in order {
        let conversation = &scripts.conversations()[c];
        let caller = match conversation.identity {
            None => "no identity".to_string(),
            Some(identity) => {
                let recorded = &scripts.identities()[identity];
                let parent = recorded
                    .parent
                    .map(|parent| format!(" (parent {})", who(parent, normalizer)))
                    .unwrap_or_default();
                format!(
                    "{} {}{parent}",
                    recorded.rung.as_str(),
                    who(identity, normalizer)
                )
            }
        };
        let rung = served.rungs[c].map_or("unbound", Rung::as_str);
        let count = served.progress[c].min(conversation.steps.len());
        let mut digest = Sha256::new();
        for exchange in &served.cassette.exchanges[c][..count] {
            digest.update(serde_json::to_string(&exchange.response).unwrap_or_default());
            digest.update(exchange.failure.as_deref().unwrap_or(""));
        }
        let digest = hex::encode(digest.finalize());
        out.push_str(&format!(
            "# {}: {caller}, {}, bound by {rung}: {count} of {} exchange(s) served, responses sha256:{}\n",
            conversation.name,
            conversation.endpoint,
            conversation.steps.len(),
            &digest[..16]
        ));
    }
    out
}
