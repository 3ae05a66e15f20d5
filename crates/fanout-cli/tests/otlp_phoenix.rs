//! `fanout export otlp` against a real receiver (DESIGN 12): Arize Phoenix 20.26.1
//! (`tools/test-agents/phoenix/install.sh`), started on free loopback ports with its
//! working directory in a temporary one, read back through its REST API
//! (`GET /v1/projects/default/spans`). The store is the recorded real Claude Code and
//! Codex fixtures, imported fresh; what the spans must say is read from the store's
//! tables with plain SQL, apart from the code under test. A missing Phoenix fails under
//! CI=true and skips, loudly, elsewhere.

use std::collections::{HashMap, HashSet};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn phoenix_bin() -> Option<PathBuf> {
    let root = std::env::var_os("FANOUT_TEST_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/test-agents"));
    let bin = root.join("phoenix/venv/bin/phoenix");
    if bin.exists() {
        return Some(bin);
    }
    assert!(
        !fanout_types::in_ci(),
        "Phoenix is not installed at {} and CI=true: run tools/test-agents/phoenix/install.sh",
        bin.display()
    );
    eprintln!(
        "\n!!! SKIPPING the Phoenix OTLP tests: {} is missing (run tools/test-agents/phoenix/install.sh) !!!\n",
        bin.display()
    );
    None
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One Phoenix server on its own ports and working directory.
struct Phoenix {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    grpc_port: u16,
    child: Option<Child>,
}

impl Phoenix {
    fn start(bin: PathBuf) -> Phoenix {
        let mut phoenix = Phoenix {
            bin,
            dir: tempfile::tempdir().unwrap(),
            port: free_port(),
            grpc_port: free_port(),
            child: None,
        };
        phoenix.run();
        phoenix
    }

    fn run(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("phoenix.log")).unwrap();
        let child = Command::new(&self.bin)
            .arg("serve")
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", self.port.to_string())
            .env("PHOENIX_GRPC_PORT", self.grpc_port.to_string())
            .env("PHOENIX_WORKING_DIR", self.dir.path())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .env("PHOENIX_ALLOW_EXTERNAL_RESOURCES", "false")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start phoenix");
        self.child = Some(child);
        // Its first start runs the database migrations: slow on a busy machine.
        let deadline = Instant::now() + Duration::from_secs(300);
        while Instant::now() < deadline {
            if get(&format!("{}/healthz", self.base())).is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!("phoenix did not become healthy: {}", self.log());
    }

    /// Stops it as an operator would (SIGTERM: it writes what it accepted, then exits).
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // kill(1) by the pid of the child this test started.
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let _ = child.wait();
        }
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn endpoint(&self) -> String {
        format!("{}/v1/traces", self.base())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("phoenix.log")).unwrap_or_default()
    }

    /// Every span of the default project, through the REST API's pages.
    fn spans(&self) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!("{}/v1/projects/default/spans?limit=1000", self.base());
            if let Some(c) = &cursor {
                url.push_str(&format!("&cursor={c}"));
            }
            let Some(page) = get(&url) else {
                return out; // no project yet: nothing received
            };
            let page: Value = serde_json::from_str(&page).unwrap();
            out.extend(page["data"].as_array().unwrap().iter().cloned());
            match page["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return out,
            }
        }
    }

    /// The spans once `want` have arrived and the count holds still.
    fn spans_settled(&self, want: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = 0;
        loop {
            let spans = self.spans();
            if (spans.len() >= want && spans.len() == last) || Instant::now() > deadline {
                return spans;
            }
            last = spans.len();
            std::thread::sleep(Duration::from_millis(700));
        }
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        self.stop();
    }
}

fn get(url: &str) -> Option<String> {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "10", url])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn fanout(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fanout"))
        .args(args)
        .output()
        .unwrap()
}

/// A fresh store of every recorded real Claude Code and Codex fixture.
fn fixture_store(dir: &Path) -> String {
    let db = format!("sqlite://{}", dir.join("fanout.db").display());
    let fixtures = repo().join("crates/fanout-capture/tests/fixtures");
    let mut paths: Vec<String> = Vec::new();
    for sub in ["history/claude", "history/codex"] {
        for entry in std::fs::read_dir(fixtures.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                paths.push(path.display().to_string());
            }
        }
    }
    for entry in std::fs::read_dir(fixtures.join("real")).unwrap() {
        let path = entry.unwrap().path();
        if path.display().to_string().ends_with(".transcript.jsonl") {
            paths.push(path.display().to_string());
        }
    }
    let mut args = vec!["import", "--db", &db];
    args.extend(paths.iter().map(String::as_str));
    let out = fanout(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    db
}

/// What the store says, by plain SQL: per (session, tool_call_id) the parent, the
/// tool status and the ledger's own tokens (input with cache, output with reasoning).
/// Parent tool_call_id, tool status, own input and output tokens (cache and reasoning in).
type Invocation = (Option<String>, Option<String>, Option<i64>, Option<i64>);

struct Expected {
    turns: usize,
    invocations: HashMap<(String, String), Invocation>,
    priced_models: HashSet<String>,
}

async fn expected(db: &str) -> Expected {
    use sqlx::Row;
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(db)
        .await
        .unwrap();
    let turns: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM task_session_turns")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let rows = sqlx::query(
        "SELECT s.task_session_id, s.tool_call_id, s.parent_tool_call_id, s.tool_status,
           (SELECT SUM(COALESCE(u.input_tokens,0) + COALESCE(u.cache_read_tokens,0) + COALESCE(u.cache_creation_tokens,0))
              FROM task_session_usage u WHERE u.task_session_id = s.task_session_id AND u.subagent_tool_call_id = s.tool_call_id) AS input,
           (SELECT SUM(COALESCE(u.output_tokens,0) + COALESCE(u.reasoning_tokens,0))
              FROM task_session_usage u WHERE u.task_session_id = s.task_session_id AND u.subagent_tool_call_id = s.tool_call_id) AS output
         FROM task_session_subagents s",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let invocations = rows
        .iter()
        .map(|r| {
            (
                (r.get::<String, _>(0), r.get::<String, _>(1)),
                (r.get(2), r.get(3), r.get(4), r.get(5)),
            )
        })
        .collect();
    let models: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT model FROM task_session_usage WHERE model IS NOT NULL")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    let prices = fanout_store::PriceTable::shipped().unwrap();
    let priced_models = models
        .into_iter()
        .filter(|m| prices.lookup(m).is_some())
        .collect();
    Expected {
        turns: turns as usize,
        invocations,
        priced_models,
    }
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

fn check_tree(spans: &[Value], want: &Expected) {
    let by_id: HashMap<&str, &Value> = spans
        .iter()
        .map(|s| (s["context"]["span_id"].as_str().unwrap(), s))
        .collect();
    assert_eq!(by_id.len(), spans.len(), "each span once");
    let roots = spans.iter().filter(|s| s["parent_id"].is_null()).count();
    assert_eq!(
        roots, want.turns,
        "a root per turn (every fixture row has its turn)"
    );
    let mut seen = HashSet::new();
    for span in spans.iter().filter(|s| !s["parent_id"].is_null()) {
        let session = attr(span, "fanout.session_id").as_str().map(str::to_owned);
        let call = attr(span, "fanout.tool_call_id")
            .as_str()
            .unwrap()
            .to_owned();
        let parent = by_id[span["parent_id"].as_str().unwrap()];
        assert_eq!(parent["context"]["trace_id"], span["context"]["trace_id"]);
        assert_eq!(span["attributes"]["gen_ai.operation.name"], "invoke_agent");
        assert_eq!(span["span_kind"], "AGENT");
        // The session of an invocation is its root's.
        let mut root = parent;
        while !root["parent_id"].is_null() {
            root = by_id[root["parent_id"].as_str().unwrap()];
        }
        let session =
            session.unwrap_or_else(|| attr(root, "fanout.session_id").as_str().unwrap().to_owned());
        let key = (session, call);
        let (want_parent, status, input, output) = want
            .invocations
            .get(&key)
            .unwrap_or_else(|| panic!("a span for no row: {key:?}"));
        assert!(seen.insert(key.clone()), "two spans for {key:?}");
        match want_parent.as_deref().filter(|p| {
            want.invocations
                .contains_key(&(key.0.clone(), (*p).to_owned()))
        }) {
            Some(p) => assert_eq!(
                attr(parent, "fanout.tool_call_id"),
                p,
                "{key:?} under its parent"
            ),
            None => assert!(parent["parent_id"].is_null(), "{key:?} under its turn"),
        }
        assert_eq!(
            attr(span, "gen_ai.usage.input_tokens").as_i64(),
            *input,
            "{key:?}"
        );
        assert_eq!(
            attr(span, "gen_ai.usage.output_tokens").as_i64(),
            *output,
            "{key:?}"
        );
        assert_eq!(
            attr(span, "llm.token_count.prompt").as_i64(),
            *input,
            "{key:?}"
        );
        let failed = matches!(status.as_deref(), Some("failed" | "error" | "cancelled"));
        if failed {
            assert_eq!(span["status_code"], "ERROR", "{key:?} {status:?}");
        }
        let model = attr(span, "gen_ai.request.model").as_str().unwrap_or("");
        let cost = attr(span, "fanout.cost_usd");
        if want.priced_models.contains(model) && input.is_some() {
            assert!(cost.as_f64().is_some_and(|c| c > 0.0), "{key:?} is priced");
        } else if !want.priced_models.contains(model) {
            assert!(cost.is_null(), "{key:?}: unpriced has no cost, never 0");
        }
    }
    assert_eq!(
        seen.len(),
        want.invocations.len(),
        "one span per invocation"
    );
    assert!(
        spans.iter().any(|s| s["status_code"] == "ERROR"),
        "the fixtures have failed children"
    );
    assert!(
        spans.iter().any(|s| attr(s, "fanout.cost_usd").is_number()),
        "some are priced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fixtures_arrive_as_trees_with_the_ledger_tokens_once() {
    let Some(bin) = phoenix_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = fixture_store(dir.path());
    let want = expected(&db).await;
    let phoenix = Phoenix::start(bin);
    let endpoint = phoenix.endpoint();
    let out = fanout(&[
        "export",
        "otlp",
        "--db",
        &db,
        "--endpoint",
        &endpoint,
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sent = summary["spans_sent"].as_u64().unwrap() as usize;
    assert_eq!(sent, want.turns + want.invocations.len());
    assert_eq!(summary["turns"].as_u64().unwrap() as usize, want.turns);
    let spans = phoenix.spans_settled(sent);
    assert_eq!(spans.len(), sent, "{}", phoenix.log());
    check_tree(&spans, &want);
    // Again: the same ids, so nothing new.
    let out = fanout(&["export", "otlp", "--db", &db, "--endpoint", &endpoint]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&format!("sent {sent} span(s)")));
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(phoenix.spans().len(), sent, "a second export adds no span");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_stopped_mid_export_gets_every_span_once() {
    let Some(bin) = phoenix_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = fixture_store(dir.path());
    let want = expected(&db).await;
    let mut phoenix = Phoenix::start(bin);
    let endpoint = phoenix.endpoint();
    let mut export = Command::new(env!("CARGO_BIN_EXE_fanout"))
        .args([
            "export",
            "otlp",
            "--db",
            &db,
            "--endpoint",
            &endpoint,
            "--batch-size",
            "3",
        ])
        .args(["--retry-for-secs", "600", "--format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = export.id().to_string();
    // Freeze it after its first batch, stop the receiver, let it go on, start it again.
    let mut stderr = std::io::BufReader::new(export.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() > 0,
            "no progress"
        );
        if line.contains("span(s),") {
            break;
        }
    }
    Command::new("kill").args(["-STOP", &pid]).status().unwrap();
    let before = phoenix.spans_settled(1).len();
    assert!(
        before > 0 && before < want.turns + want.invocations.len(),
        "mid-export: {before}"
    );
    phoenix.stop();
    Command::new("kill").args(["-CONT", &pid]).status().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap());
    phoenix.run();
    let out = export.wait_with_output().unwrap();
    let progress = reader.join().unwrap();
    assert!(out.status.success(), "{progress}");
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        summary["failed_attempts"].as_u64().unwrap() > 0,
        "the outage was met: {progress}"
    );
    assert!(progress.contains("trying again"), "{progress}");
    let total = want.turns + want.invocations.len();
    let spans = phoenix.spans_settled(total);
    assert_eq!(spans.len(), total, "every span once");
    check_tree(&spans, &want);
}

/// The continuous export (what `fanout proxy --otlp-endpoint` runs): with the receiver
/// down spans wait, counted; once it is up each ready span arrives; the store remembers,
/// so a second exporter on the same store sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_continuous_export_waits_for_the_receiver_and_sends_nothing_twice() {
    use fanout_otel::{ContinuousConfig, ContinuousExporter, ReceiverConfig};
    let Some(bin) = phoenix_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = fixture_store(dir.path());
    let mut phoenix = Phoenix::start(bin);
    phoenix.stop();
    let endpoint = phoenix.endpoint();
    let config = || {
        let mut config = ContinuousConfig::new(
            db.clone(),
            ReceiverConfig::new(endpoint.clone()),
            fanout_store::PriceTable::shipped().unwrap(),
        );
        config.poll = Duration::from_millis(200);
        config.max_waiting = 50; // fewer than the fixtures' spans: the rest wait in the store
        config.batch_size = 20;
        config
    };
    let exporter = ContinuousExporter::spawn(config()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while exporter.counters().failed_attempts == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let down = exporter.counters();
    assert!(
        down.waiting > 50 && down.sent == 0 && down.failed_attempts > 0,
        "{down:?}"
    );
    phoenix.run();
    let deadline = Instant::now() + Duration::from_secs(180);
    while exporter.counters().waiting > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let done = exporter.stop(Duration::from_secs(10)).await;
    assert_eq!(done.waiting, 0, "{done:?}");
    assert_eq!((done.sent, done.dropped), (down.waiting, 0), "{done:?}");
    let spans = phoenix.spans_settled(done.sent as usize);
    assert_eq!(spans.len() as u64, done.sent, "each ready span once");
    let again = ContinuousExporter::spawn(config()).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let second = again.stop(Duration::from_secs(10)).await;
    assert_eq!(
        (second.sent, second.waiting),
        (0, 0),
        "remembered: {second:?}"
    );
    assert_eq!(phoenix.spans().len() as u64, done.sent);
}
