//! Cassette benchmarks (DESIGN 5.5), each a ratio against a baseline measured
//! in the same run:
//! - replay server: per-request latency (p50, p99) of a recorded streamed
//!   Anthropic answer (claude-subagents' largest) served by the cassette
//!   server, each request bound by its content root, vs a trivial axum handler
//!   returning the same bytes;
//! - recording proxy: the same streamed answer fetched through `replay
//!   record`'s proxy (forwarded, streamed back, written to the cassette) vs
//!   fetched from the upstream directly: the latency the proxy adds;
//! - a long recording: one conversation of many exchanges through the
//!   recording proxy, timed until `finish` has every file on disk (each ended
//!   exchange rewrites its conversation's file), vs the same requests
//!   fetched directly;
//! - end to end: `fanout snapshot run scenarios/claude-subagents` (a real
//!   Claude Code parent and two parallel subagents, replayed keyless) vs
//!   `fanout snapshot record` of the same scenario through the recording
//!   proxy against its scripted mock upstream
//!   (`tools/capture-transcripts/mock_upstream.py claude-parallel`), both
//!   wall time with process start.
//!
//! `cargo build --release -p fanout-cli && cargo bench -p fanout-harness --bench cassette`.
//! Sizes: `FANOUT_BENCH_REQUESTS` (default 1000), `FANOUT_BENCH_STEPS` (the
//! long conversation's exchanges, default 300), `FANOUT_BENCH_RUNS` (default
//! 3). Without `--bench` (as `cargo test --benches` runs it) everything is
//! tiny. The end-to-end part needs the fanout binary (next to this bench's
//! target directory, or `FANOUT_BIN`), python3 and the agent of
//! `tools/test-agents/claude-acp-101`; without them it is skipped, except
//! under CI, where it fails.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use fanout_harness::cassette::Cassette;
use fanout_harness::cassette::format::{Exchange, IndexConversation, ResponseBody};
use fanout_harness::cassette::record::{RecordOptions, RunningRecorder};
use fanout_harness::cassette::serve::{CassetteServer, RunningCassetteServer};
use fanout_types::bench::{is_quick, size};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn main() {
    let quick = is_quick();
    let requests = if quick {
        30
    } else {
        size("FANOUT_BENCH_REQUESTS", 1_000)
    };
    let steps = if quick {
        10
    } else {
        size("FANOUT_BENCH_STEPS", 300)
    };
    let runs = if quick {
        1
    } else {
        size("FANOUT_BENCH_RUNS", 3)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let exchange = largest_streamed_exchange();
    runtime.block_on(async {
        let baseline = Baseline::start(&exchange).await;
        replay_latency(&exchange, &baseline, requests).await;
        record_latency(&exchange, &baseline, requests).await;
        record_one_long_conversation(&exchange, &baseline, steps).await;
        baseline.task.abort();
    });
    end_to_end(runs);
}

/// The committed claude-subagents recording's largest streamed answer.
fn largest_streamed_exchange() -> Exchange {
    let cassette = Cassette::load(&repo().join("scenarios/claude-subagents/cassette"))
        .expect("load the claude-subagents cassette");
    cassette
        .exchanges
        .into_iter()
        .flatten()
        .filter(|e| matches!(e.response.body, ResponseBody::Events(_)))
        .max_by_key(|e| e.response.body.bytes().map_or(0, |b| b.len()))
        .expect("a streamed exchange")
}

/// A trivial handler answering every POST with the exchange's bytes.
struct Baseline {
    url: String,
    bytes: usize,
    task: tokio::task::JoinHandle<()>,
}

impl Baseline {
    async fn start(exchange: &Exchange) -> Self {
        let bytes = Bytes::from(exchange.response.body.bytes().expect("recorded bytes"));
        let size = bytes.len();
        // It reads the request body as any server must (one left unread makes
        // hyper close the connection under the client's next request).
        let app = axum::Router::new().fallback(move |request: Bytes| {
            let bytes = bytes.clone();
            async move {
                drop(request);
                ([("content-type", "text/event-stream")], bytes)
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the baseline");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url,
            bytes: size,
            task,
        }
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
}

/// One POST of `body` to `url`: (latency to the last byte, bytes received).
async fn one(client: &reqwest::Client, url: &str, body: &serde_json::Value) -> (Duration, usize) {
    let started = Instant::now();
    let response = client
        .post(url)
        .header("x-api-key", "sk-bench-dummy")
        .json(body)
        .send()
        .await
        .unwrap_or_else(|err| panic!("POST {url}: {err:?}"));
    assert!(response.status().is_success(), "{}", response.status());
    let body = response.bytes().await.expect("body");
    (started.elapsed(), body.len())
}

/// Alternates `measured` and `baseline` requests `n` times (drift on a
/// shared machine hits both alike) after a warm-up; prints p50/p99 and ratios.
async fn compare(
    title: &str,
    n: usize,
    mut measured: impl AsyncFnMut(usize) -> (Duration, usize),
    mut baseline: impl AsyncFnMut(usize) -> (Duration, usize),
    baseline_name: &str,
) {
    let warmup = (n / 10).max(3);
    for at in 0..warmup {
        measured(at).await;
        baseline(at).await;
    }
    let (mut ours, mut theirs) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut sizes = (0, 0);
    for at in warmup..warmup + n {
        let (took, size) = measured(at).await;
        ours.push(took);
        sizes.0 = size;
        let (took, size) = baseline(at).await;
        theirs.push(took);
        sizes.1 = size;
    }
    assert_eq!(sizes.0, sizes.1, "{title}: both sides serve the same bytes");
    let (o50, o99) = percentiles(&mut ours);
    let (b50, b99) = percentiles(&mut theirs);
    println!("{title}: {n} streamed responses of {} bytes", sizes.0);
    println!(
        "  measured  p50 {:>8.1} us  p99 {:>8.1} us",
        micros(o50),
        micros(o99)
    );
    println!(
        "  baseline  p50 {:>8.1} us  p99 {:>8.1} us   ({baseline_name})",
        micros(b50),
        micros(b99)
    );
    println!(
        "  ratio     p50 {:.2}x  p99 {:.2}x",
        micros(o50) / micros(b50),
        micros(o99) / micros(b99)
    );
}

/// The cassette server, serving a conversation of `n` copies of the exchange
/// (bound by content: no identity headers), vs the trivial handler.
async fn replay_latency(exchange: &Exchange, baseline: &Baseline, n: usize) {
    let warmup = (n / 10).max(3);
    let copies = warmup + n;
    let recorded = Cassette::load(&repo().join("scenarios/claude-subagents/cassette"))
        .expect("load the cassette");
    let mut index = recorded.index.clone();
    index.identities.clear();
    index.conversations = vec![IndexConversation {
        file: "conversation-001.jsonl".into(),
        identity: None,
        endpoint: format!("{} {}", exchange.request.method, exchange.request.path),
        root: None,
        exchanges: copies,
    }];
    let mut header_less = exchange.clone();
    header_less
        .request
        .headers
        .retain(|(name, _)| !name.starts_with("x-claude-code-"));
    let cassette = Cassette {
        dir: recorded.dir.clone(),
        index,
        exchanges: vec![vec![header_less; copies]],
    };
    let server = CassetteServer::new(cassette, &recorded.index.declared).expect("cassette server");
    let running = RunningCassetteServer::start(server.clone(), "127.0.0.1:0")
        .await
        .expect("start the cassette server");
    let body = exchange
        .request
        .body
        .json()
        .expect("a JSON request")
        .clone();
    let client = client();
    let replay_url = format!("{}{}", running.base_url(), exchange.request.path);
    let baseline_url = format!("{}{}", baseline.url, exchange.request.path);
    compare(
        "replay server (cassette, bound by content root)",
        n,
        async |_| one(&client, &replay_url, &body).await,
        async |_| one(&client, &baseline_url, &body).await,
        "trivial axum handler, same bytes",
    )
    .await;
    assert!(server.binding().misses().is_empty(), "the bench missed");
    running.shutdown().await.expect("stop the cassette server");
}

/// A recording proxy on a free port in front of the baseline, writing `out`.
async fn recorder_to(baseline: &Baseline, out: &Path) -> RunningRecorder {
    RunningRecorder::start(
        RecordOptions {
            upstream: baseline.url.clone(),
            out: out.to_path_buf(),
            force: false,
            declared: Default::default(),
        },
        "127.0.0.1:0",
    )
    .await
    .expect("start the recorder")
}

/// The recorded request's JSON body.
fn json_body(exchange: &Exchange) -> serde_json::Value {
    exchange
        .request
        .body
        .json()
        .expect("a JSON request")
        .clone()
}

/// Through the recording proxy (to the trivial handler) vs the trivial
/// handler directly. Each request is its own conversation (a distinct first
/// user message), as a run's are.
async fn record_latency(exchange: &Exchange, baseline: &Baseline, n: usize) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let recorder = recorder_to(baseline, &tmp.path().join("cassette")).await;
    let body = json_body(exchange);
    let nth = |at: usize| {
        let mut body = body.clone();
        body["messages"] =
            serde_json::json!([{"role": "user", "content": format!("bench request {at}")}]);
        body
    };
    let client = client();
    let proxy_url = format!("{}{}", recorder.base_url(), exchange.request.path);
    let direct_url = format!("{}{}", baseline.url, exchange.request.path);
    compare(
        "recording proxy (forwarded, streamed back, written)",
        n,
        async |at| one(&client, &proxy_url, &nth(at)).await,
        async |at| one(&client, &direct_url, &nth(at)).await,
        "the same upstream directly",
    )
    .await;
    assert_eq!(
        baseline.bytes,
        exchange.response.body.bytes().map_or(0, |b| b.len())
    );
    recorder.finish().await.expect("finish the recording");
}

/// `steps` requests of one conversation (one content root, as an agent's
/// turns share) through the recording proxy, until `finish` returns, vs the
/// same requests to the upstream directly.
async fn record_one_long_conversation(exchange: &Exchange, baseline: &Baseline, steps: usize) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = tmp.path().join("cassette");
    let recorder = recorder_to(baseline, &out).await;
    let mut body = json_body(exchange);
    body["messages"] = serde_json::json!([{"role": "user", "content": "bench conversation"}]);
    let client = client();
    let proxy_url = format!("{}{}", recorder.base_url(), exchange.request.path);
    let direct_url = format!("{}{}", baseline.url, exchange.request.path);
    let started = Instant::now();
    for _ in 0..steps {
        one(&client, &proxy_url, &body).await;
    }
    let served = started.elapsed();
    recorder.finish().await.expect("finish the recording");
    let recorded = started.elapsed();
    let started = Instant::now();
    for _ in 0..steps {
        one(&client, &direct_url, &body).await;
    }
    let direct = started.elapsed();
    let cassette = Cassette::load(&out).expect("the recorded cassette loads");
    assert_eq!(
        cassette.exchanges.iter().map(Vec::len).collect::<Vec<_>>(),
        [steps],
        "one conversation of every exchange"
    );
    let file = std::fs::metadata(out.join(&cassette.index.conversations[0].file))
        .map_or(0, |meta| meta.len());
    println!(
        "long recording: one conversation of {steps} exchanges ({:.1} MiB file)",
        file as f64 / (1024.0 * 1024.0)
    );
    println!(
        "  recorded   {:>8.1} ms to the last response, {:>8.1} ms to every file written",
        served.as_secs_f64() * 1e3,
        recorded.as_secs_f64() * 1e3
    );
    println!(
        "  baseline   {:>8.1} ms   (the same requests directly)",
        direct.as_secs_f64() * 1e3
    );
    println!(
        "  ratio      {:.2}x to the last response, {:.2}x to every file written",
        served.as_secs_f64() / direct.as_secs_f64(),
        recorded.as_secs_f64() / direct.as_secs_f64()
    );
}

fn percentiles(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| {
        let index = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[index.min(samples.len() - 1)]
    };
    (at(0.50), at(0.99))
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `target/<profile>/fanout` next to this bench binary, or `FANOUT_BIN`.
fn fanout_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("FANOUT_BIN") {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    let candidate = exe.parent()?.parent()?.join("fanout");
    candidate.is_file().then_some(candidate)
}

/// Why the end-to-end part cannot run here, if it cannot.
fn end_to_end_missing(fanout: Option<&Path>) -> Option<String> {
    if fanout.is_none() {
        return Some(
            "no fanout binary next to this bench; `cargo build --release -p fanout-cli` \
             (`cargo build -p fanout-cli` for `cargo test`) or set FANOUT_BIN"
                .into(),
        );
    }
    let python = Command::new("python3").arg("--version").output();
    if !python.is_ok_and(|o| o.status.success()) {
        return Some("python3 is not on PATH (the scripted mock upstream)".into());
    }
    let installer = repo().join("tools/test-agents/claude-acp-101/install.sh");
    match Command::new("bash").arg(&installer).output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "{} failed: {}",
            installer.display(),
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(err) => Some(format!("cannot run {}: {err}", installer.display())),
    }
}

/// The mock upstream the scenario was recorded against; killed when dropped.
struct MockUpstream {
    child: std::process::Child,
    url: String,
}

impl MockUpstream {
    fn start() -> Self {
        let mut child = Command::new("python3")
            .arg(repo().join("tools/capture-transcripts/mock_upstream.py"))
            .arg("claude-parallel")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the mock upstream");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the mock's banner");
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_string();
        Self { child, url }
    }
}

impl Drop for MockUpstream {
    /// SIGTERM (through `kill`), so the mock removes its scratch folder; a
    /// kill only if it is still there after two seconds.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A scratch copy of the scenario (its installer path made absolute).
fn scratch_scenario(root: &Path) -> PathBuf {
    let from = repo().join("scenarios/claude-subagents");
    let dir = root.join("claude-subagents");
    std::fs::create_dir_all(dir.join("cassette")).expect("scratch dir");
    for name in ["scenario.toml", "transcript.txt"] {
        std::fs::copy(from.join(name), dir.join(name)).expect("copy");
    }
    for entry in std::fs::read_dir(from.join("cassette")).expect("cassette") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), dir.join("cassette").join(entry.file_name())).expect("copy");
    }
    let tools = repo().join("tools").canonicalize().expect("tools");
    let toml = std::fs::read_to_string(dir.join("scenario.toml")).expect("scenario.toml");
    std::fs::write(
        dir.join("scenario.toml"),
        toml.replace("../../tools", &tools.to_string_lossy()),
    )
    .expect("scenario.toml");
    dir
}

fn end_to_end(runs: usize) {
    let fanout = fanout_binary();
    if let Some(why) = end_to_end_missing(fanout.as_deref()) {
        fanout_types::skip_unless_ci("the cassette bench's end-to-end run", why);
        return;
    }
    let Some(fanout) = fanout else { return };
    let scenario = repo().join("scenarios/claude-subagents");
    let tmp = tempfile::tempdir().expect("temp dir");
    let scratch = scratch_scenario(tmp.path());
    let time = |args: &[&str], dir: &Path| {
        let started = Instant::now();
        let output = Command::new(&fanout)
            .args(args)
            .arg(dir)
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("ANTHROPIC_BASE_URL")
            .env_remove("FANOUT_LOG")
            .output()
            .expect("run fanout");
        let took = started.elapsed();
        assert!(
            output.status.success(),
            "fanout {args:?} {} failed (a stale binary?):\n{}{}",
            dir.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        took
    };
    let mut replayed = Vec::with_capacity(runs);
    let mut recorded = Vec::with_capacity(runs);
    for _ in 0..runs {
        replayed.push(time(&["snapshot", "run"], &scenario));
        let mock = MockUpstream::start();
        recorded.push(time(
            &["snapshot", "record", "--upstream", &mock.url, "--force"],
            &scratch,
        ));
        drop(mock);
        // The fresh recording replays too.
        time(&["snapshot", "run"], &scratch);
    }
    let median = |samples: &mut Vec<Duration>| {
        samples.sort();
        samples[samples.len() / 2]
    };
    let (r, w) = (median(&mut replayed), median(&mut recorded));
    println!(
        "end to end: scenarios/claude-subagents, {runs} run(s) each ({})",
        fanout.display()
    );
    println!(
        "  replayed (snapshot run)             median {:>8.1} ms",
        r.as_secs_f64() * 1e3
    );
    println!(
        "  recorded (snapshot record, mock)    median {:>8.1} ms",
        w.as_secs_f64() * 1e3
    );
    println!(
        "  ratio replay/recording {:.2}x",
        r.as_secs_f64() / w.as_secs_f64()
    );
}
