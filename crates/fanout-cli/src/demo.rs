//! `fanout demo`: the whole loop offline. The reference agent replays the
//! bundled `subagent-multi` scenario (a parent that starts two subagents in one
//! turn) behind `fanout proxy`, driven over ACP like an editor would, and the
//! fan-out report of what was captured is printed.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use clap::Args;
use fanout_harness::Scenario;
use fanout_harness::acp::{AgentCommand, DrivePlan, ExitPolicy, drive};
use fanout_harness::scenario::{Placeholders, default_replay_command};
use fanout_harness::snapshot::API_KEY_VARS;
use fanout_replay::ScenarioScripts;

use crate::output::{DATABASE_URL_ENV, DbArgs};
use crate::report::{self, ReportArgs, ReportFormat};

/// The bundled scenario, compiled in so the demo runs from any directory.
const SCENARIO_NAME: &str = "subagent-multi";
const SCENARIO_FILES: [(&str, &str); 4] = [
    (
        "scenario.toml",
        include_str!("../../../scenarios/subagent-multi/scenario.toml"),
    ),
    (
        "session.jsonl",
        include_str!("../../../scenarios/subagent-multi/session.jsonl"),
    ),
    (
        "session.1.jsonl",
        include_str!("../../../scenarios/subagent-multi/session.1.jsonl"),
    ),
    (
        "session.2.jsonl",
        include_str!("../../../scenarios/subagent-multi/session.2.jsonl"),
    ),
];

#[derive(Debug, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Output format of the report.
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
}

pub async fn run(args: DemoArgs) -> Result<ExitCode> {
    let fanout = std::env::current_exe().context("cannot locate the fanout executable")?;
    let work = tempfile::Builder::new()
        .prefix("fanout-demo-")
        .tempdir()
        .context("cannot create a scratch directory")?;
    let scenario_dir = work.path().join(SCENARIO_NAME);
    std::fs::create_dir_all(&scenario_dir)
        .with_context(|| format!("creating {}", scenario_dir.display()))?;
    for (name, content) in SCENARIO_FILES {
        let path = scenario_dir.join(name);
        std::fs::write(&path, content).with_context(|| format!("writing {}", path.display()))?;
    }
    let scenario = Scenario::load(&scenario_dir)?;
    let scripts = ScenarioScripts::load(&scenario_dir)?;
    let workspace = work.path().join("workspace");
    std::fs::create_dir_all(&workspace)
        .with_context(|| format!("creating {}", workspace.display()))?;
    scenario.create_workspace(&workspace)?;
    let workspace = std::fs::canonicalize(&workspace)?;

    // One task id per run, so the report shows this run and nothing older.
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    let task = format!("fanout-demo-{}", started.as_millis());
    // The agent runs in the scenario's workspace, so a relative SQLite path would name a
    // file there: the proxy gets the absolute one the report below opens.
    let db = args.db.url();
    let db = if db.starts_with("sqlite:") {
        fanout_store::store_identity(&db)
    } else {
        db
    };
    let command = proxied_agent(&fanout, work.path(), &db, &task, &scenario_dir, &scripts);
    let outcome = drive(
        &command,
        &DrivePlan {
            cwd: workspace,
            prompts: scenario.prompts.clone(),
            client_subagents: scenario.client_subagents,
            timeout: scenario.timeout,
            exit: ExitPolicy::Clean,
        },
    )
    .await
    .context("running the replayed agent behind fanout proxy")?;
    if let Some(Err(message)) = outcome.stop_reasons.iter().find(|r| r.is_err()) {
        bail!("the replayed prompt failed: {message}");
    }

    let banner = format!(
        "fanout demo: `fanout agent` replayed the bundled {SCENARIO_NAME} scenario ({} recorded \
         sessions: a parent that starts two subagents in one turn) behind `fanout proxy`, offline; \
         {} ACP lines were captured into {} as task {task}.\n",
        scripts.len(),
        outcome.transcript.len(),
        fanout_store::redact_url(&db),
    );
    // JSON and CSV stdout stay machine-readable; the table is for people.
    match args.format {
        ReportFormat::Table => println!("{banner}"),
        ReportFormat::Json | ReportFormat::Csv => eprintln!("{banner}"),
    }
    report::run(ReportArgs {
        db: args.db,
        prices: crate::look::PriceArgs { prices: None },
        task: Some(task),
        session: None,
        since: None,
        until: None,
        format: args.format,
        html: None,
    })
    .await
}

/// `fanout proxy --task TASK -- fanout agent --provider replay …` (the
/// scenario's default replay command), with everything the run writes kept in
/// `work` and no provider key passed on. The database URL goes through the
/// environment (`--db` reads `FANOUT_DATABASE_URL`): on the command line, any
/// `ps` would show its password.
fn proxied_agent(
    fanout: &Path,
    work: &Path,
    db: &str,
    task: &str,
    scenario_dir: &Path,
    scripts: &ScenarioScripts,
) -> AgentCommand {
    let agent = Placeholders::new(
        fanout,
        scenario_dir,
        &work.join("sessions"),
        scripts.recorded_model().unwrap_or("replay"),
    )
    .substitute(&default_replay_command());
    let mut args: Vec<String> = [
        "proxy",
        "--task",
        task,
        "--no-transcript",
        "--stats-dir",
        &work.join("stats").to_string_lossy(),
        "--",
    ]
    .map(String::from)
    .to_vec();
    args.extend(agent);
    AgentCommand {
        program: fanout.to_path_buf(),
        args,
        env_remove: API_KEY_VARS.map(String::from).to_vec(),
        env: vec![(DATABASE_URL_ENV.to_string(), db.to_string())],
        env_clear: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxied_agent_is_the_default_replay_command_and_the_db_url_stays_off_its_argv() {
        let db = "postgres://fanout:s3cret@db.example/fanout";
        let scripts = ScenarioScripts::from_scripts(Vec::new());
        let command = proxied_agent(
            Path::new("/bin/fanout"),
            Path::new("/w"),
            db,
            "t1",
            Path::new("/w/scenario"),
            &scripts,
        );
        assert!(
            command.args.iter().all(|arg| !arg.contains("s3cret")),
            "{:?}",
            command.args
        );
        assert_eq!(
            command.env,
            [(DATABASE_URL_ENV.to_string(), db.to_string())]
        );
        let split = command.args.iter().position(|a| a == "--").unwrap();
        assert_eq!(
            command.args[..split],
            [
                "proxy",
                "--task",
                "t1",
                "--no-transcript",
                "--stats-dir",
                "/w/stats"
            ]
        );
        assert_eq!(
            command.args[split + 1..],
            [
                "/bin/fanout",
                "agent",
                "--provider",
                "replay",
                "--scenario",
                "/w/scenario",
                "--model",
                "replay",
                "--sessions-root",
                "/w/sessions"
            ]
        );
    }
}
