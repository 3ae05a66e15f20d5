//! Kill -9 anywhere in a live proxy run (DESIGN 7), on SQLite and PostgreSQL: a real
//! SIGKILL at several points (before the store is open, between turns, in the middle
//! of a turn, while the proxy drains at the end, in the middle of a flood). After each:
//! what was forwarded was byte-exact up to the kill (the client got a prefix of what
//! the agent wrote, the agent a prefix of what the client sent), and importing the
//! transcript into the killed run's store leaves exactly the rows a clean import of
//! the same transcript gives (nothing half-written, nothing twice, nothing missing).

mod proxy_support;

use std::path::Path;
use std::time::{Duration, Instant};

use fanout_store::testing::TestDb;
use proxy_support::session::{Client, ScriptedSession, agent_lines};
use proxy_support::{Running, count_rows, dump_rows, fanout, import_into, only_transcript};

const TURNS: usize = 12;
const LIMIT: Duration = Duration::from_secs(60);

/// Where in the run the proxy is killed.
#[derive(Clone, Copy, Debug)]
enum KillPoint {
    /// Right after `initialize` answered: the store is likely still opening.
    AtStart,
    /// After four whole turns.
    BetweenTurns,
    /// Once the seventh turn's subagent is announced, before the turn ends.
    MidTurn,
    /// All turns done and the client gone: while the proxy drains (the agent lingers a
    /// second after its input ends, so the kill lands before the proxy can exit).
    WhileDraining,
}

const POINTS: [KillPoint; 4] = [
    KillPoint::AtStart,
    KillPoint::BetweenTurns,
    KillPoint::MidTurn,
    KillPoint::WhileDraining,
];

/// The agent command, wrapped so what the agent reads and writes is kept:
/// `in.log` (its stdin) and `out.log` (its stdout, as the proxy reads it). With
/// `linger`, the wrapper keeps the agent's stdout open a second after the agent ends.
fn teed(dir: &Path, agent: &[String], linger: bool) -> Vec<String> {
    let quoted: Vec<String> = agent.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "tee '{}' | {} | tee '{}'{}",
        dir.join("in.log").display(),
        quoted.join(" "),
        dir.join("out.log").display(),
        if linger { "; sleep 1" } else { "" }
    );
    vec!["sh".into(), "-c".into(), script]
}

fn start(dir: &Path, db: &str, agent: &[String]) -> Running {
    let mut command = fanout(&dir.join("data"));
    command
        .args(["proxy", "--db", db, "--task", "kill", "--transcript-dir"])
        .arg(dir.join("transcripts"))
        .arg("--")
        .args(agent);
    Running::start(command)
}

/// Runs the session up to `point` and kills the proxy there; returns what the client
/// sent and what it got.
fn run_until(dir: &Path, db: &str, point: KillPoint) -> (Vec<u8>, Vec<u8>) {
    let session = ScriptedSession::new(dir, TURNS);
    let linger = matches!(point, KillPoint::WhileDraining);
    let mut proxy = start(dir, db, &teed(dir, &session.agent, linger));
    match point {
        KillPoint::AtStart => {
            proxy_support::session::request(
                &mut proxy,
                0,
                "initialize",
                serde_json::json!({"protocolVersion": 1, "clientCapabilities": {}}),
                LIMIT,
            );
        }
        KillPoint::BetweenTurns => {
            let mut client = Client::open(&mut proxy, &session, LIMIT);
            client.turns(&mut proxy, 4, LIMIT);
            // Let the transcript take the last answer (it is written as it is read).
            std::thread::sleep(Duration::from_millis(100));
        }
        KillPoint::MidTurn => {
            let mut client = Client::open(&mut proxy, &session, LIMIT);
            client.turns(&mut proxy, 6, LIMIT);
            client.send_prompt(&mut proxy);
            proxy.wait_for("the seventh subagent's announcement", LIMIT, |out, _| {
                agent_lines(out)
                    .iter()
                    .any(|line| line["params"]["update"]["toolCallId"] == "call_7")
            });
        }
        KillPoint::WhileDraining => {
            let mut client = Client::open(&mut proxy, &session, LIMIT);
            client.turns(&mut proxy, TURNS, LIMIT);
            proxy.close_stdin();
        }
    }
    let sent = proxy.written();
    proxy.signal(libc::SIGKILL);
    let done = proxy.finish(LIMIT);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&done.status),
        Some(libc::SIGKILL),
        "{point:?}: {}",
        done.stderr
    );
    (sent, done.stdout)
}

/// `got` is a prefix of the file `log` once the agent (and its `tee`) are done with it.
fn assert_prefix_of_log(got: &[u8], log: &Path, what: &str) {
    let deadline = Instant::now() + LIMIT;
    loop {
        let logged = std::fs::read(log).unwrap_or_default();
        if logged.len() >= got.len() {
            assert!(
                logged.starts_with(got),
                "{what}: the {} bytes are not a prefix of the {} bytes of {}",
                got.len(),
                logged.len(),
                log.display()
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {} bytes forwarded, {} logged",
            got.len(),
            logged.len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A killed run, then the import of its transcript into its store and into `fresh`.
async fn killed_then_imported(dir: &Path, killed: &str, fresh: &str, point: KillPoint) {
    let (sent, got) = tokio::task::block_in_place(|| run_until(dir, killed, point));
    tokio::task::block_in_place(|| {
        assert_prefix_of_log(&got, &dir.join("out.log"), "agent -> client");
        let read = std::fs::read(dir.join("in.log")).unwrap_or_default();
        assert!(
            sent.starts_with(&read),
            "{point:?}: the agent read {} bytes that are not a prefix of the {} the client sent",
            read.len(),
            sent.len()
        );
    });
    let transcript = only_transcript(&dir.join("transcripts"));
    tokio::task::block_in_place(|| {
        import_into(dir, killed, &[&transcript]);
        import_into(dir, fresh, &[&transcript]);
    });
    let (after_kill, clean) = (dump_rows(killed).await, dump_rows(fresh).await);
    if !matches!(point, KillPoint::AtStart) {
        assert!(!clean.is_empty(), "{point:?}: nothing recorded");
    }
    assert_eq!(
        after_kill, clean,
        "{point:?}: the killed store plus the import differ from a clean import"
    );
    let turns_done = match point {
        KillPoint::AtStart => 0,
        KillPoint::BetweenTurns => 4,
        KillPoint::MidTurn => 6,
        KillPoint::WhileDraining => TURNS,
    };
    let completed = count_rows(
        fresh,
        "task_session_turns",
        "WHERE completed_at IS NOT NULL",
    )
    .await;
    assert!(
        completed >= turns_done as i64,
        "{point:?}: {completed} completed turns recorded, {turns_done} were answered before the kill"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_runs_killed_anywhere_import_to_the_clean_rows() {
    for point in POINTS {
        let dir = tempfile::tempdir().unwrap();
        let killed = format!("sqlite://{}", dir.path().join("killed.db").display());
        let fresh = format!("sqlite://{}", dir.path().join("fresh.db").display());
        killed_then_imported(dir.path(), &killed, &fresh, point).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_runs_killed_anywhere_import_to_the_clean_rows() {
    for point in POINTS {
        let (Some(killed), Some(fresh)) = (TestDb::postgres().await, TestDb::postgres().await)
        else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        killed_then_imported(dir.path(), &killed.url, &fresh.url, point).await;
    }
}

/// A flood through an echo agent, killed when a quarter is back: the client got a
/// prefix of what the agent wrote, and the transcript (cut short by the kill) imports.
#[test]
fn a_flood_killed_midway_forwarded_a_prefix_and_its_transcript_imports() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("killed.db").display());
    let cat = vec!["cat".to_owned()];
    let mut proxy = start(dir.path(), &db, &teed(dir.path(), &cat, false));
    let mut payload = Vec::new();
    let mut i = 0;
    while payload.len() < 16 * 1024 * 1024 {
        payload.extend_from_slice(
            format!(
                r#"{{"jsonrpc":"2.0","method":"flood","params":{{"i":{i},"pad":"{}"}}}}"#,
                "x".repeat(i % 700)
            )
            .as_bytes(),
        );
        payload.push(b'\n');
        i += 1;
    }
    let mut stdin = proxy.take_stdin();
    let to_send = payload.clone();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&to_send);
    });
    proxy.wait_for("a quarter of the flood back", LIMIT, |out, _| {
        out.len() >= payload.len() / 4
    });
    proxy.signal(libc::SIGKILL);
    let done = proxy.finish(LIMIT);
    let _ = writer.join();
    assert!(done.stdout.len() < payload.len(), "killed before the end");
    assert!(
        payload.starts_with(&done.stdout),
        "the client got a prefix of the echo"
    );
    assert_prefix_of_log(&done.stdout, &dir.path().join("out.log"), "agent -> client");
    let read = std::fs::read(dir.path().join("in.log")).unwrap();
    assert!(
        payload.starts_with(&read),
        "the agent read a prefix of what was sent"
    );
    import_into(
        dir.path(),
        &db,
        &[&only_transcript(&dir.path().join("transcripts"))],
    );
}
