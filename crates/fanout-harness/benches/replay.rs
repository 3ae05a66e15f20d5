//! Replay benchmarks, each a ratio against a baseline measured in the same run
//! (these machines are noisy; absolute numbers are not comparable across runs).
//!
//! `cargo build --release -p fanout-cli && cargo bench -p fanout-harness --bench replay`:
//! - replay server: per-request latency (p50, p99) of a streamed Anthropic
//!   response served through the per-session binding, vs a trivial axum
//!   handler returning the same bytes, both over loopback with one client;
//! - snapshot: wall time of `fanout snapshot run scenarios/subagent-multi`
//!   (process start included: the harness, the agent process, three sessions,
//!   normalising and diffing) vs a trivial start of the same binary
//!   (`fanout --version`).
//!
//! The `fanout` binary is found next to this benchmark's target directory
//! (`target/release/fanout` under `cargo bench`), or at `FANOUT_BIN`. Sizes:
//! `FANOUT_BENCH_REQUESTS` (default 2000), `FANOUT_BENCH_RUNS` (default 30).
//! Without `--bench` (as `cargo test --benches` runs it) everything is tiny; a
//! missing binary then skips the snapshot part, except under CI, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use fanout_harness::anthropic_events;
use fanout_harness::server::RunningServer;
use fanout_replay::{
    ReplayBinding, ReplayedResponse, SESSION_ID_HEADER, ScenarioScripts, SessionScript,
};
use fanout_types::bench::{is_quick, size};

fn scenario_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/subagent-multi")
}

fn main() {
    let quick = is_quick();
    let requests = if quick {
        40
    } else {
        size("FANOUT_BENCH_REQUESTS", 2_000)
    };
    let runs = if quick {
        2
    } else {
        size("FANOUT_BENCH_RUNS", 30)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(server_latency(requests));
    snapshot_wall_time(runs);
}

/// A binding whose primary script is `count` copies of the scenario's largest
/// recorded response, so every request is served a real, fresh response.
fn repeated_binding(count: usize) -> (Arc<ReplayBinding>, SessionScript) {
    let scripts = ScenarioScripts::load(&scenario_dir()).expect("load subagent-multi");
    let mut primary = scripts.scripts()[0].clone();
    let largest = primary
        .responses
        .iter()
        .max_by_key(|r| r.chunks.len())
        .cloned()
        .expect("a recorded response");
    primary.responses = vec![largest; count];
    let binding = ReplayBinding::new(ScenarioScripts::from_scripts(vec![primary.clone()]));
    (Arc::new(binding), primary)
}

async fn server_latency(requests: usize) {
    // Warm-up requests are served too, so the script holds them all.
    let warmup = (requests / 10).max(5);
    let (binding, script) = repeated_binding((requests + warmup) * 2);
    let replay = RunningServer::start(binding, "127.0.0.1:0")
        .await
        .expect("start the replay server");
    let body: String = anthropic_events(
        &ReplayedResponse {
            script: 0,
            call: 0,
            model: "m".into(),
            chunks: script.responses[0].chunks.clone(),
            error: None,
        },
        "m",
        "msg_replay_000001",
    )
    .concat();
    let bytes = Bytes::from(body);
    let baseline_app = axum::Router::new().route(
        "/v1/messages",
        axum::routing::post(move || {
            let bytes = bytes.clone();
            async move { ([("content-type", "text/event-stream")], bytes) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the baseline");
    let baseline_addr = listener.local_addr().expect("baseline address");
    let baseline = tokio::spawn(async move { axum::serve(listener, baseline_app).await });

    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let replay_url = format!("{}/v1/messages", replay.base_url());
    let baseline_url = format!("http://{baseline_addr}/v1/messages");
    let request =
        serde_json::json!({"model": "m", "stream": true, "max_tokens": 1, "messages": []});
    let one = |url: String| {
        let client = client.clone();
        let request = request.clone();
        async move {
            let started = Instant::now();
            let response = client
                .post(&url)
                .header(SESSION_ID_HEADER, "bench")
                .json(&request)
                .send()
                .await
                .expect("request");
            assert!(response.status().is_success(), "{}", response.status());
            let body = response.bytes().await.expect("body");
            assert!(!body.is_empty());
            (started.elapsed(), body.len())
        }
    };
    for _ in 0..warmup {
        one(replay_url.clone()).await;
        one(baseline_url.clone()).await;
    }
    // Alternate so drift on a shared machine hits both sides alike.
    let mut replayed = Vec::with_capacity(requests);
    let mut plain = Vec::with_capacity(requests);
    let mut sizes = (0, 0);
    for _ in 0..requests {
        let (took, size) = one(replay_url.clone()).await;
        replayed.push(took);
        sizes.0 = size;
        let (took, size) = one(baseline_url.clone()).await;
        plain.push(took);
        sizes.1 = size;
    }
    assert_eq!(sizes.0, sizes.1, "both serve the same bytes");
    let (r50, r99) = percentiles(&mut replayed);
    let (b50, b99) = percentiles(&mut plain);
    println!(
        "replay server: {requests} streamed responses of {} bytes ({} recorded chunks each)",
        sizes.0,
        script.responses[0].chunks.len()
    );
    println!(
        "  replayed  p50 {:>8.1} us  p99 {:>8.1} us",
        micros(r50),
        micros(r99)
    );
    println!(
        "  baseline  p50 {:>8.1} us  p99 {:>8.1} us   (trivial axum handler, same bytes)",
        micros(b50),
        micros(b99)
    );
    println!(
        "  ratio     p50 {:.2}x  p99 {:.2}x",
        micros(r50) / micros(b50),
        micros(r99) / micros(b99)
    );
    baseline.abort();
    replay.shutdown().await.expect("stop the replay server");
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
    let profile_dir = exe.parent()?.parent()?;
    let candidate = profile_dir.join("fanout");
    candidate.is_file().then_some(candidate)
}

fn snapshot_wall_time(runs: usize) {
    let Some(fanout) = fanout_binary() else {
        let why = "no fanout binary next to this bench; `cargo build --release -p fanout-cli` \
                   (`cargo build -p fanout-cli` for `cargo test`) or set FANOUT_BIN";
        fanout_types::skip_unless_ci("the replay bench's snapshot run", why);
        return;
    };
    let scenario = scenario_dir();
    let time = |args: &[&std::ffi::OsStr]| {
        let started = Instant::now();
        let output = Command::new(&fanout)
            .args(args)
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .output()
            .expect("run fanout");
        let took = started.elapsed();
        (took, output)
    };
    let snapshot_args = [
        std::ffi::OsStr::new("snapshot"),
        std::ffi::OsStr::new("run"),
        scenario.as_os_str(),
    ];
    let version_args = [std::ffi::OsStr::new("--version")];
    // One checked run first: a failing snapshot is not a benchmark, in any mode.
    let (_, output) = time(&snapshot_args);
    assert!(
        output.status.success(),
        "{} snapshot run failed (a stale binary? rebuild it with `cargo build -p fanout-cli`):\n{}{}",
        fanout.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    let mut snapshot = Vec::with_capacity(runs);
    let mut start_only = Vec::with_capacity(runs);
    for _ in 0..runs {
        snapshot.push(time(&snapshot_args).0);
        start_only.push(time(&version_args).0);
    }
    let median = |samples: &mut Vec<Duration>| {
        samples.sort();
        samples[samples.len() / 2]
    };
    let (s, v) = (median(&mut snapshot), median(&mut start_only));
    println!(
        "snapshot: `fanout snapshot run scenarios/subagent-multi`, {runs} runs ({})",
        fanout.display()
    );
    println!(
        "  snapshot run     median {:>8.1} ms",
        s.as_secs_f64() * 1e3
    );
    println!(
        "  fanout --version median {:>8.1} ms   (process start only)",
        v.as_secs_f64() * 1e3
    );
    println!(
        "  ratio {:.1}x; the replay itself adds {:.1} ms over a bare start",
        s.as_secs_f64() / v.as_secs_f64(),
        (s.as_secs_f64() - v.as_secs_f64()) * 1e3
    );
}
