//! `fanout proxy` and `fanout serve` as a user runs them: the real binary, real pipes,
//! real signals, real SQLite files and real HTTP.

mod proxy_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use fanout_metrics::SUBAGENT_OUTCOMES;
use proxy_support::{
    Finished, ReplayingAgent, Running, fanout, http, only_transcript, prometheus_value,
    sqlite_texts, transcript_lines,
};

const LIMIT: Duration = Duration::from_secs(30);

/// A deterministic mix of JSON-RPC lines, binary garbage (NUL, CR, invalid UTF-8) and
/// long lines; the last line has no newline.
fn mixed_input(lines: usize) -> Vec<u8> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut input = Vec::new();
    for i in 0..lines {
        match i % 4 {
            0 => input.extend_from_slice(
                format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"session/prompt","params":{{"text":"ü {i}"}}}}"#)
                    .as_bytes(),
            ),
            1 => input.extend((0..(next() % 300)).map(|_| (next() % 256) as u8).filter(|b| *b != b'\n')),
            2 => input.extend_from_slice(b"\r\n\x00\xff\xfe not json \r"),
            _ => input.extend(std::iter::repeat_n(b'x', (next() % 70_000) as usize)),
        }
        input.push(b'\n');
    }
    input.extend_from_slice(br#"{"jsonrpc":"2.0","method":"last/line/without/newline"}"#);
    input
}

fn proxy_command(dir: &Path, db: &str, agent: &[&str]) -> std::process::Command {
    let mut command = fanout(&dir.join("data"));
    command
        .args(["proxy", "--db", db, "--transcript-dir"])
        .arg(dir.join("transcripts"))
        .arg("--")
        .args(agent);
    command
}

fn sqlite_url(dir: &Path) -> String {
    format!("sqlite://{}", dir.join("fanout.db").display())
}

/// Writes `input` from a thread (the agent echoes as it reads, so writing everything
/// before reading could deadlock on full pipes), then closes stdin and waits.
fn feed_all(mut proxy: Running, input: Vec<u8>) -> Finished {
    let mut stdin = proxy.take_stdin();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(&input).expect("write input");
    });
    writer.join().expect("writer");
    proxy.finish(LIMIT)
}

#[test]
fn an_echo_agent_gets_and_returns_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    let input = mixed_input(200);
    let copy = dir.path().join("agent-saw.bin");
    let agent = format!("tee '{}'", copy.display());
    let proxy = Running::start(proxy_command(
        dir.path(),
        &sqlite_url(dir.path()),
        &["sh", "-c", &agent],
    ));
    let done = feed_all(proxy, input.clone());
    assert_eq!(done.code(), Some(0), "stderr: {}", done.stderr);
    // Client -> agent exactly, and agent -> client exactly.
    assert_eq!(std::fs::read(&copy).unwrap(), input, "what the agent read");
    assert!(
        done.stdout == input,
        "what the client got differs ({} vs {} bytes)",
        done.stdout.len(),
        input.len()
    );
    assert!(done.stderr.is_empty(), "fanout said: {}", done.stderr);

    let path = only_transcript(&dir.path().join("transcripts"));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "transcript mode");
    let lines = transcript_lines(&path);
    let header = &lines[0];
    assert_eq!(header["type"], "fanout-transcript");
    assert_eq!(header["version"], 2);
    assert_eq!(
        header["agentCommand"],
        serde_json::json!(["sh", "-c", agent])
    );
    assert!(header["taskId"].is_null());
    assert_eq!(header["executionId"].as_str().map(str::len), Some(36));
    // Every line in both directions, in order, byte for byte (invalid UTF-8, NUL and a
    // CRLF line's `\r` included): version 2 records the bytes as read.
    let bytes = std::fs::read(&path).unwrap();
    let records = &bytes[bytes.iter().position(|b| *b == b'\n').unwrap() + 1..];
    let recorded = fanout_capture::transcript::split_records(records, usize::MAX).unwrap();
    let expected: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
    for direction in ["c2a", "a2c"] {
        let lines: Vec<&[u8]> = recorded
            .iter()
            .filter_map(|split| match split {
                fanout_capture::transcript::SplitLine::Line {
                    direction: d, line, ..
                } if d.as_str() == direction => Some(line.as_slice()),
                _ => None,
            })
            .collect();
        assert_eq!(lines.len(), expected.len(), "{direction} lines");
        assert!(lines == expected, "{direction}: the lines differ");
    }
}

#[test]
fn exit_status_and_signals_pass_through() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());
    for (script, expected) in [
        ("exit 7", 7),
        ("kill -TERM $$", 128 + libc::SIGTERM),
        ("kill -KILL $$", 128 + libc::SIGKILL),
        ("exit 0", 0),
    ] {
        let done =
            Running::start(proxy_command(dir.path(), &db, &["sh", "-c", script])).finish(LIMIT);
        assert_eq!(done.code(), Some(expected), "{script}: {}", done.stderr);
        assert!(done.stdout.is_empty());
    }
}

/// The nice value of a thread or process, from its `/proc/.../stat`.
fn nice_of(stat_path: &Path) -> i32 {
    let stat = std::fs::read_to_string(stat_path).expect("read stat");
    // Fields after the command name, which is in parentheses and may hold spaces.
    let after_name = &stat[stat.rfind(')').expect("a stat line") + 2..];
    // Field 19 of the line is the 17th after the name.
    after_name
        .split(' ')
        .nth(16)
        .expect("the nice field")
        .parse()
        .expect("a number")
}

#[test]
fn the_agent_and_the_pumps_keep_the_proxys_priority_and_capture_runs_below() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());
    // The agent says its pid, then waits for the end of its input.
    let mut proxy = Running::start(proxy_command(
        dir.path(),
        &db,
        &["sh", "-c", "echo $$; cat >/dev/null"],
    ));
    proxy.wait_for("the agent's pid", LIMIT, |out, _| out.ends_with(b"\n"));
    let agent_pid = String::from_utf8(proxy.stdout()).unwrap().trim().to_owned();
    // The proxy's priority is ours (this thread started it).
    let ours = nice_of(Path::new("/proc/thread-self/stat"));
    let agent = nice_of(&Path::new("/proc").join(&agent_pid).join("stat"));
    assert_eq!(agent, ours, "the agent runs at the proxy's priority");
    let tasks = Path::new("/proc")
        .join(proxy.child.id().to_string())
        .join("task");
    let lowered = (ours + fanout_proxy::TELEMETRY_NICE).min(19);
    let mut seen = Vec::new();
    for task in std::fs::read_dir(&tasks).unwrap() {
        let task = task.unwrap().path();
        let name = std::fs::read_to_string(task.join("comm")).unwrap();
        seen.push((name.trim().to_owned(), nice_of(&task.join("stat"))));
    }
    // The main thread (the binary's name), the pumps and the recorder keep ours;
    // every other thread is the runtime's or one it started.
    let kept = ["fanout", "fanout-c2a", "fanout-a2c", "fanout-recorder"];
    for (name, nice) in &seen {
        let expected = if kept.contains(&name.as_str()) {
            ours
        } else {
            lowered
        };
        assert_eq!(*nice, expected, "{name}: {seen:?}");
    }
    for name in kept.iter().chain(&["tokio-rt-worker"]) {
        assert!(
            seen.iter().any(|(seen, _)| seen == name),
            "no {name}: {seen:?}"
        );
    }
    proxy.close_stdin();
    let done = proxy.finish(LIMIT);
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
}

#[test]
fn sigterm_to_the_proxy_reaches_the_whole_agent_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild.pid");
    // The agent starts a grandchild, says it is ready, and turns SIGTERM into exit 42.
    let agent = format!(
        "trap 'echo agent-got-term >&2; exit 42' TERM; sleep 1000 & echo $! > '{}'; echo ready; wait",
        pid_file.display()
    );
    let proxy = Running::start(proxy_command(
        dir.path(),
        &sqlite_url(dir.path()),
        &["sh", "-c", &agent],
    ));
    proxy.wait_for("the agent to be ready", LIMIT, |out, _| {
        out.ends_with(b"ready\n")
    });
    proxy.signal(libc::SIGTERM);
    let done = proxy.finish(LIMIT);
    assert_eq!(done.code(), Some(42), "stderr: {}", done.stderr);
    assert!(
        done.stderr.contains("agent-got-term"),
        "agent stderr passes through: {}",
        done.stderr
    );
    let grandchild: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_gone(grandchild);
}

/// The process is gone (or a zombie nobody reaped yet: it no longer runs).
fn assert_gone(pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
        let running = state.as_deref().is_some_and(|s| {
            s.rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                != Some("Z")
        });
        if !running {
            return;
        }
        assert!(Instant::now() < deadline, "process {pid} still runs");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn what_the_agent_leaves_running_is_ended_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("orphan.pid");
    // The leader exits at once; its child keeps the agent's stdout open.
    let agent = format!("sleep 1000 & echo $! > '{}'; echo bye", pid_file.display());
    let started = Instant::now();
    let done = Running::start(proxy_command(
        dir.path(),
        &sqlite_url(dir.path()),
        &["sh", "-c", &agent],
    ))
    .finish(LIMIT);
    assert_eq!(done.code(), Some(0), "stderr: {}", done.stderr);
    assert_eq!(done.stdout, b"bye\n");
    assert!(started.elapsed() < Duration::from_secs(10));
    let orphan: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_gone(orphan);
}

#[test]
fn an_agent_that_ignores_the_end_of_input_is_ended_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = fanout(&dir.path().join("data"));
    command
        .args(["proxy", "--no-transcript", "--eof-grace-secs", "1", "--db"])
        .arg(sqlite_url(dir.path()))
        .args(["--", "sleep", "1000"]);
    let done = Running::start(command).finish(LIMIT);
    assert_eq!(
        done.code(),
        Some(128 + libc::SIGTERM),
        "stderr: {}",
        done.stderr
    );
    assert!(done.stderr.contains("closed its input"), "{}", done.stderr);
}

#[test]
fn bad_invocations_say_what_is_wrong_with_the_right_status() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let run = |args: &[&str]| {
        let mut command = fanout(&data);
        command.args(args);
        Running::start(command).finish(LIMIT)
    };
    // Usage errors: 64 (EX_USAGE), like every fanout command.
    let missing = run(&["proxy", "--db", "sqlite://x.db"]);
    assert_eq!(missing.code(), Some(64));
    assert!(
        missing.stderr.contains("AGENT COMMAND"),
        "{}",
        missing.stderr
    );
    let unknown = run(&["proxy", "--bogus", "--", "cat"]);
    assert_eq!(unknown.code(), Some(64));
    assert!(unknown.stderr.contains("--bogus"), "{}", unknown.stderr);

    let db = sqlite_url(dir.path());
    let not_found = run(&[
        "proxy",
        "--db",
        &db,
        "--",
        "/nonexistent/agent-binary",
        "--acp",
    ]);
    assert_eq!(not_found.code(), Some(127));
    assert!(
        not_found
            .stderr
            .contains("cannot start the agent \"/nonexistent/agent-binary\""),
        "{}",
        not_found.stderr
    );
    assert!(not_found.stdout.is_empty());

    let not_executable = dir.path().join("agent.txt");
    std::fs::write(&not_executable, "#!/bin/sh\n").unwrap();
    let denied = run(&["proxy", "--db", &db, "--", not_executable.to_str().unwrap()]);
    assert_eq!(denied.code(), Some(126), "{}", denied.stderr);
}

#[test]
fn an_agent_exiting_mid_stream_loses_nothing_already_seen() {
    let dir = tempfile::tempdir().unwrap();
    let mut proxy = Running::start(proxy_command(
        dir.path(),
        &sqlite_url(dir.path()),
        &["head", "-n", "2"],
    ));
    let mut accepted = 0;
    for i in 0..2000 {
        if !proxy
            .write(format!("{{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{i}}}\n").as_bytes())
        {
            break;
        }
        accepted += 1;
    }
    let done = proxy.finish(LIMIT);
    assert_eq!(done.code(), Some(0), "stderr: {}", done.stderr);
    assert!(accepted >= 2);
    assert_eq!(
        done.stdout,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":0}\n{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":1}\n"
    );
    let lines = transcript_lines(&only_transcript(&dir.path().join("transcripts")));
    let a2c: Vec<&serde_json::Value> = lines.iter().filter(|l| l["dir"] == "a2c").collect();
    assert_eq!(a2c.len(), 2, "the agent's two lines are in the transcript");
    assert!(lines.iter().filter(|l| l["dir"] == "c2a").count() >= 2);
}

/// The Claude example of DESIGN 3.3 replayed by a scripted agent behind the proxy.
fn claude_example() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fanout-acp/tests/acp-examples/claude.transcript.jsonl")
}

#[tokio::test(flavor = "multi_thread")]
async fn live_capture_records_the_subagents_and_import_of_its_transcript_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let agent = ReplayingAgent::from_transcript(dir.path(), &claude_example());
    let live = sqlite_url(dir.path());
    let mut proxy = Running::start(proxy_command(
        dir.path(),
        &live,
        &[agent.script.to_str().unwrap()],
    ));
    agent.drive(&mut proxy, 0..agent.steps.len(), 0);
    let done = tokio::task::spawn_blocking(move || proxy.finish(LIMIT))
        .await
        .unwrap();
    assert_eq!(done.code(), Some(0), "stderr: {}", done.stderr);
    assert!(done.stderr.is_empty(), "fanout said: {}", done.stderr);

    let tools = sqlite_texts(
        &live,
        "SELECT tool_call_id FROM task_session_subagents ORDER BY tool_call_id",
    )
    .await;
    let expected: Vec<Option<String>> =
        ["toolu_01REVIEW01", "toolu_01REVIEW02", "toolu_01REVIEW03"]
            .map(|t| Some(t.to_owned()))
            .to_vec();
    assert_eq!(tools, expected);
    let transcript = only_transcript(&dir.path().join("transcripts"));
    let execution = transcript_lines(&transcript)[0]["executionId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        sqlite_texts(
            &live,
            "SELECT DISTINCT agent_execution_id FROM task_session_subagents"
        )
        .await,
        vec![Some(execution)]
    );
    assert_eq!(
        sqlite_texts(&live, "SELECT json_extract(metadata, '$.parent_tool_call_id') FROM task_session_messages WHERE json_extract(metadata, '$.tool_call_id') = 'toolu_01CHILDBASH'").await,
        vec![Some("toolu_01REVIEW01".to_owned())]
    );
    assert_eq!(
        sqlite_texts(&live, "SELECT CAST(total_tokens AS TEXT) FROM task_session_subagents WHERE tool_call_id = 'toolu_01REVIEW01'").await,
        vec![Some("275717".to_owned())]
    );

    // `fanout import` of the proxy's own transcript writes the same rows.
    proxy_support::assert_import_reproduces(dir.path(), &live, &transcript).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_capture_into_postgresql_records_the_same_subagents() {
    let Some(db) = fanout_store::testing::TestDb::postgres().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let agent = ReplayingAgent::from_transcript(dir.path(), &claude_example());
    let mut proxy = Running::start(proxy_command(
        dir.path(),
        &db.url,
        &[agent.script.to_str().unwrap()],
    ));
    tokio::task::block_in_place(|| agent.drive(&mut proxy, 0..agent.steps.len(), 0));
    let done = tokio::task::block_in_place(|| proxy.finish(LIMIT));
    assert_eq!(done.code(), Some(0), "stderr: {}", done.stderr);
    assert!(done.stderr.is_empty(), "fanout said: {}", done.stderr);
    let store = db.open().await.unwrap();
    let count = |sql: &'static str| {
        let store = &store;
        async move { store.query_i64(sql).await.unwrap() }
    };
    assert_eq!(
        count("SELECT COUNT(*) FROM task_session_subagents").await,
        3
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM task_session_subagents WHERE tool_call_id = 'toolu_01REVIEW01' AND total_tokens = 275717 AND settled_at IS NOT NULL").await,
        1
    );
    assert_eq!(count("SELECT COUNT(*) FROM task_sessions").await, 1);
    store.close().await;
}

#[test]
fn with_the_store_down_forwarding_goes_on_and_says_so() {
    for db in [
        "postgres://fanout@127.0.0.1:1/nowhere",
        "sqlite:///proc/fanout-cannot-write-here/x.db",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let input = mixed_input(40);
        let mut command = proxy_command(dir.path(), db, &["cat"]);
        command.env("FANOUT_LOG", "warn");
        let done = feed_all(Running::start(command), input.clone());
        assert_eq!(done.code(), Some(0), "{db}: {}", done.stderr);
        assert!(done.stdout == input, "{db}: forwarding is byte-exact");
        assert!(done.stderr.contains("WARN"), "{db}: {}", done.stderr);
        assert!(done.stderr.contains("store error"), "{db}: {}", done.stderr);
        // Nothing of this input needed writing (no session was opened), and the note
        // says so rather than sending anyone to replay it.
        assert!(
            done.stderr
                .contains("was not available; nothing this run saw needed writing"),
            "{db}: {}",
            done.stderr
        );
        // Rate-limited: one WARN about the store, not one per line.
        assert_eq!(
            done.stderr.matches("store error").count(),
            1,
            "{db}: {}",
            done.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn capture_resumes_when_the_store_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let agent = ReplayingAgent::from_transcript(dir.path(), &claude_example());
    let later = dir.path().join("later");
    let db = format!("sqlite://{}", later.join("fanout.db").display());
    let script = agent.script.to_str().unwrap();
    let (mut proxy, addr) =
        start_with_metrics(dir.path(), &db, &["--store-retry-ms", "50"], &[script]);
    // initialize and session/new while the store's directory does not exist.
    let seen = agent.drive(&mut proxy, 0..2, 0);
    let page = http("GET", &addr, "/metrics").1;
    assert_eq!(
        prometheus_value(&page, "fanout_proxy_store_available"),
        Some(0.0),
        "{page}"
    );
    assert!(
        prometheus_value(&page, "fanout_proxy_store_errors_total{op=\"open\"}").unwrap_or(0.0)
            >= 1.0,
        "{page}"
    );

    std::fs::create_dir_all(&later).unwrap();
    wait_until_store_available(&addr, "the store never came back").await;
    agent.drive(&mut proxy, 2..agent.steps.len(), seen);
    let done = tokio::task::spawn_blocking(move || proxy.finish(LIMIT))
        .await
        .unwrap();
    assert_eq!(done.code(), Some(0), "stderr: {}", done.stderr);
    assert!(done.stderr.contains("available again"), "{}", done.stderr);
    assert_eq!(
        sqlite_texts(
            &db,
            "SELECT tool_call_id FROM task_session_subagents ORDER BY tool_call_id"
        )
        .await
        .len(),
        3,
        "rows written after the store came back"
    );
    assert_eq!(
        sqlite_texts(&db, "SELECT id FROM task_sessions")
            .await
            .len(),
        1,
        "the session opened during the outage was written once the store came back"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_locked_store_never_stalls_forwarding_and_writing_resumes() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let agent = ReplayingAgent::from_transcript(dir.path(), &claude_example());
    let db = sqlite_url(dir.path());
    let script = agent.script.to_str().unwrap();
    let (mut proxy, addr) = start_with_metrics(dir.path(), &db, &[], &[script]);
    wait_until_store_available(&addr, "the store never opened").await;

    // Another process locks the database for longer than the store's busy timeout.
    let mut locker = sqlx::SqliteConnection::connect(&db).await.unwrap();
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut locker)
        .await
        .unwrap();
    let started = Instant::now();
    let seen = tokio::task::block_in_place(|| agent.drive(&mut proxy, 0..2, 0));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "forwarding waited for the locked store: {:?}",
        started.elapsed()
    );
    let deadline = Instant::now() + LIMIT;
    while !proxy.stderr().contains("database is locked") {
        assert!(
            Instant::now() < deadline,
            "no WARN about the lock: {}",
            proxy.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
    locker.close().await.unwrap();

    tokio::task::block_in_place(|| agent.drive(&mut proxy, 2..agent.steps.len(), seen));
    let done = tokio::task::block_in_place(|| proxy.finish(LIMIT));
    assert_eq!(done.code(), Some(0), "stderr: {}", done.stderr);
    assert_eq!(
        sqlite_texts(&db, "SELECT tool_call_id FROM task_session_subagents")
            .await
            .len(),
        3,
        "rows written once the lock was gone; stderr: {}",
        done.stderr
    );
    assert_eq!(
        sqlite_texts(&db, "SELECT id FROM task_sessions")
            .await
            .len(),
        1
    );
    // Nothing was lost to the lock: what capture could not write then, it wrote after.
    assert!(!done.stderr.contains("not in the store"), "{}", done.stderr);
}

/// Starts `fanout proxy --metrics-listen 127.0.0.1:0` with `extra` options and returns
/// it with the metrics address it printed.
fn start_with_metrics(dir: &Path, db: &str, extra: &[&str], agent: &[&str]) -> (Running, String) {
    let mut command = fanout(&dir.join("data"));
    command
        .args(["proxy", "--metrics-listen", "127.0.0.1:0", "--db", db])
        .args(extra)
        .arg("--transcript-dir")
        .arg(dir.join("transcripts"))
        .arg("--")
        .args(agent);
    let proxy = Running::start(command);
    proxy.wait_for("the metrics address", LIMIT, |_, err| {
        err.contains("/metrics")
    });
    let addr = metrics_addr(&proxy.stderr());
    (proxy, addr)
}

/// Waits until the proxy at `addr` reports the store as available.
async fn wait_until_store_available(addr: &str, why: &str) {
    let deadline = Instant::now() + LIMIT;
    while prometheus_value(
        &http("GET", addr, "/metrics").1,
        "fanout_proxy_store_available",
    ) != Some(1.0)
    {
        assert!(Instant::now() < deadline, "{why}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn metrics_addr(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("fanout proxy: metrics at http://"))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .expect("metrics address on stderr")
        .to_owned()
}

#[test]
fn the_proxy_serves_its_live_counters_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = fanout(&dir.path().join("data"));
    command
        .args([
            "proxy",
            "--no-transcript",
            "--metrics-listen",
            "127.0.0.1:0",
            "--db",
        ])
        .arg(sqlite_url(dir.path()))
        .args(["--", "cat"]);
    let mut proxy = Running::start(command);
    proxy.wait_for("the metrics address", LIMIT, |_, err| {
        err.contains("/metrics")
    });
    let addr = metrics_addr(&proxy.stderr());
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let mut sent = Vec::new();
    for i in 0..5 {
        sent.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"params\":{i}}}\n").as_bytes(),
        );
    }
    sent.extend_from_slice(b"garbage \xff\n");
    assert!(proxy.write(&sent));
    proxy.wait_for_lines(6, LIMIT);
    let deadline = Instant::now() + LIMIT;
    let page = loop {
        let (status, page) = http("GET", &addr, "/metrics");
        assert_eq!(status, 200);
        if prometheus_value(&page, "fanout_capture_frames_total") == Some(12.0) {
            break page;
        }
        assert!(
            Instant::now() < deadline,
            "counters never reached 12 frames:\n{page}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        prometheus_value(&page, "fanout_proxy_frames_total{direction=\"c2a\"}"),
        Some(6.0),
        "{page}"
    );
    assert_eq!(
        prometheus_value(&page, "fanout_proxy_frames_total{direction=\"a2c\"}"),
        Some(6.0),
        "{page}"
    );
    assert_eq!(
        prometheus_value(&page, "fanout_capture_frames_not_understood_total"),
        Some(2.0),
        "{page}"
    );
    // Nothing was dropped, and the series say so (registered at start, not on first
    // drop).
    for name in ["fanout_proxy_frames_dropped_total"] {
        for direction in ["c2a", "a2c"] {
            let series = format!("{name}{{direction=\"{direction}\"}}");
            assert_eq!(prometheus_value(&page, &series), Some(0.0), "{page}");
        }
    }
    assert!(
        page.contains("# TYPE fanout_proxy_frames_dropped_total counter"),
        "{page}"
    );
    assert!(page.contains("# HELP fanout_proxy_frames_total"), "{page}");

    let (status, vars) = http("GET", &addr, "/debug/vars");
    assert_eq!(status, 200);
    let vars: serde_json::Value = serde_json::from_str(&vars).expect("JSON");
    for outcome in SUBAGENT_OUTCOMES {
        assert_eq!(
            vars["subagent_context_total"][outcome], 0,
            "{outcome}: {vars}"
        );
    }
    assert_eq!(vars["fanout_proxy_frames_total"]["c2a"], 6);
    assert_eq!(http("GET", &addr, "/healthz"), (200, "ok\n".to_owned()));
    assert_eq!(http("POST", &addr, "/metrics").0, 405, "read-only");
    assert_eq!(http("GET", &addr, "/nothing").0, 404);
    let done = proxy.finish(LIMIT);
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    assert_eq!(done.stdout, sent);
}

/// AC-26's counters reach the `metrics` facade, not only the writer's own cells: the
/// Prometheus series of every outcome equals the `/debug/vars` map once the capture of a
/// real dialect's subagents has settled.
#[tokio::test(flavor = "multi_thread")]
async fn subagent_counters_reach_prometheus_as_they_reach_debug_vars() {
    let dir = tempfile::tempdir().unwrap();
    let agent = ReplayingAgent::from_transcript(dir.path(), &claude_example());
    let db = sqlite_url(dir.path());
    let script = agent.script.to_str().unwrap();
    let (mut proxy, addr) = start_with_metrics(dir.path(), &db, &[], &[script]);
    tokio::task::block_in_place(|| agent.drive(&mut proxy, 0..agent.steps.len(), 0));

    let outcomes = SUBAGENT_OUTCOMES;
    // The two endpoints are read at different instants while capture may still be
    // writing, so poll until they agree; a facade that never hears of a write never does.
    let disagreement = |page: &str, vars: &serde_json::Value| -> Option<String> {
        let counts = &vars["subagent_context_total"];
        if counts["persisted"].as_u64().unwrap_or(0) == 0 {
            return Some(format!("nothing persisted yet: {vars}"));
        }
        outcomes.iter().find_map(|outcome| {
            let series = format!("fanout_subagent_context_total{{outcome=\"{outcome}\"}}");
            let expected = counts[*outcome].as_u64()? as f64;
            let got = prometheus_value(page, &series).unwrap_or(0.0);
            (got != expected).then(|| format!("{series} is {got}, /debug/vars says {expected}"))
        })
    };
    let deadline = Instant::now() + LIMIT;
    loop {
        let page = http("GET", &addr, "/metrics").1;
        let vars: serde_json::Value =
            serde_json::from_str(&http("GET", &addr, "/debug/vars").1).expect("JSON");
        let counts = &vars["subagent_context_total"];
        for outcome in outcomes {
            assert!(counts[outcome].is_u64(), "{outcome} missing: {vars}");
        }
        match disagreement(&page, &vars) {
            None => break,
            Some(why) => assert!(Instant::now() < deadline, "{why}\n{page}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let done = tokio::task::block_in_place(|| proxy.finish(LIMIT));
    assert_eq!(done.code(), Some(0), "stderr: {}", done.stderr);
    let rows = sqlite_texts(&db, "SELECT tool_call_id FROM task_session_subagents").await;
    assert!(!rows.is_empty(), "the example's subagents were stored");
}

#[test]
fn serve_sums_the_counters_of_every_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("stats");
    for _ in 0..2 {
        let mut command = fanout(&dir.path().join("data"));
        command
            .args(["proxy", "--no-transcript", "--stats-dir"])
            .arg(&stats)
            .arg("--db")
            .arg(sqlite_url(dir.path()))
            .args(["--", "cat"]);
        let mut proxy = Running::start(command);
        proxy.write(
            b"{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n",
        );
        proxy.wait_for_lines(2, LIMIT);
        assert_eq!(proxy.finish(LIMIT).code(), Some(0));
    }
    for entry in std::fs::read_dir(&stats).unwrap() {
        let mode = entry.unwrap().metadata().unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "stats files are private");
    }
    let mut command = fanout(&dir.path().join("data"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--stats-dir"])
        .arg(&stats);
    let serve = Running::start(command);
    serve.wait_for("the serve banner", LIMIT, |out, _| out.contains(&b'\n'));
    let banner = String::from_utf8(serve.stdout()).unwrap();
    let addr = banner
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .expect("address in the banner")
        .to_owned();
    let (status, page) = http("GET", &addr, "/metrics");
    assert_eq!(status, 200);
    assert_eq!(
        prometheus_value(&page, "fanout_proxy_frames_total{direction=\"c2a\"}"),
        Some(4.0),
        "{page}"
    );
    assert_eq!(
        prometheus_value(&page, "fanout_proxy_executions{state=\"finished\"}"),
        Some(2.0),
        "{page}"
    );
    let vars: serde_json::Value =
        serde_json::from_str(&http("GET", &addr, "/debug/vars").1).unwrap();
    assert_eq!(vars["subagent_context_total"]["attempted"], 0, "{vars}");
    assert_eq!(http("GET", &addr, "/healthz").0, 200);
    serve.signal(libc::SIGTERM);
    assert_eq!(serve.finish(LIMIT).code(), Some(0));
}
