//! What the proxy costs, measured against a direct pipe in the same run (DESIGN 6):
//! a trivial echo agent (`cat`) driven directly and through the real `fanout proxy`
//! binary (store and transcript on, as a user runs it).
//!
//! Each measurement alternates direct and proxied runs (9 rounds in full mode) and
//! compares medians: this VM has fast and slow modes, and a single run of either side
//! can land in the other's.
//!
//! - latency: one line at a time, time from write to its echo; p50 and p99;
//! - throughput: a stream of lines written while the echo is read, timed from the first
//!   line's echo on; MB/s through the round trip (each byte crosses the proxy twice);
//!   bytes checked identical by checksum.
//!   A second baseline gives `cat` 1 MiB pipes, as the proxy asks for a streaming
//!   direction's pipes, to show how much of the rate is pipe size;
//! - memory: the proxy's peak resident set (VmHWM) over the whole throughput run,
//!   its exit included (capture catches up after the flood);
//! - transcript: the throughput run's transcript read back and checked line by line
//!   against what was sent, both directions (none may be missing or differ).
//!
//! `cargo bench -p fanout-proxy --bench proxy` runs the full sizes (building the
//! `fanout` binary in release mode first). Without `--bench` (as `cargo test` runs
//! benches) it only checks that both paths work, on a few lines, with whatever `fanout`
//! binary was built next to it, and skips when there is none (under `CI=true` it fails
//! instead, so a CI that forgot to build the binary does not pass without checking).

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Sizes {
    latency_lines: usize,
    throughput_bytes: usize,
    /// Each measurement alternates direct and proxied runs this many times, and the
    /// medians are compared: one run of either can land in a slow mode of the VM.
    rounds: usize,
}

fn main() {
    let full = !fanout_types::bench::is_quick();
    let sizes = if full {
        Sizes {
            latency_lines: 10_000,
            throughput_bytes: 128 * 1024 * 1024,
            rounds: 9,
        }
    } else {
        Sizes {
            latency_lines: 20,
            throughput_bytes: 256 * 1024,
            rounds: 1,
        }
    };
    let Some(fanout) = fanout_binary(full) else {
        fanout_types::skip_unless_ci(
            "the proxy bench",
            "there is no `fanout` binary next to it; build it first (`cargo build -p fanout-cli --bin fanout`, or test the whole workspace), or run `cargo bench -p fanout-proxy --bench proxy`",
        );
        return;
    };
    let scratch = tempfile::tempdir().expect("scratch dir");

    let (mut direct_latency, mut proxy_latency) = (Vec::new(), Vec::new());
    for _ in 0..sizes.rounds {
        direct_latency.push(latency(echo_direct, sizes.latency_lines));
        proxy_latency.push(latency(
            || echo_proxied(&fanout, scratch.path()),
            sizes.latency_lines,
        ));
    }
    let payload = Arc::new(payload(sizes.throughput_bytes));
    let (mut direct, mut wide, mut proxied) = (Vec::new(), Vec::new(), Vec::new());
    let mut peak_kib = 0;
    let mut checked = Vec::new();
    for round in 0..sizes.rounds {
        direct.push(throughput(echo_direct, &payload).0);
        wide.push(throughput(echo_direct_wide, &payload).0);
        let flood = scratch.path().join(format!("flood-{round}"));
        let (rate, hwm_kib) = throughput(|| echo_proxied(&fanout, &flood), &payload);
        proxied.push(rate);
        peak_kib = peak_kib.max(hwm_kib);
        checked.push(check_transcript(&flood.join("transcripts"), &payload));
        std::fs::remove_dir_all(&flood).expect("remove the flood's files");
    }

    println!(
        "proxy bench ({} mode, echo agent `cat`, medians of {} alternating rounds)",
        if full { "full" } else { "smoke" },
        sizes.rounds
    );
    let p50 = |runs: &[Percentiles]| median(runs.iter().map(|p| p.p50));
    let p99 = |runs: &[Percentiles]| median(runs.iter().map(|p| p.p99));
    let (direct_p50, direct_p99) = (p50(&direct_latency), p99(&direct_latency));
    let (proxy_p50, proxy_p99) = (p50(&proxy_latency), p99(&proxy_latency));
    println!("  latency per line  direct p50 {direct_p50:>7.1} us  p99 {direct_p99:>7.1} us");
    println!(
        "                    proxy  p50 {proxy_p50:>7.1} us  p99 {proxy_p99:>7.1} us   added p50 {:+.1} us  p99 {:+.1} us",
        proxy_p50 - direct_p50,
        proxy_p99 - direct_p99,
    );
    println!(
        "                    p99 by round: direct {}  proxy {}",
        listed(direct_latency.iter().map(|p| p.p99)),
        listed(proxy_latency.iter().map(|p| p.p99)),
    );
    let (direct_rate, wide_rate, proxy_rate) = (
        median(direct.clone()),
        median(wide.clone()),
        median(proxied.clone()),
    );
    println!(
        "  throughput        direct {direct_rate:>8.1} MB/s   proxy {proxy_rate:>8.1} MB/s   ratio {:.2}x   ({} MiB round trip, checksums equal)",
        proxy_rate / direct_rate,
        sizes.throughput_bytes / (1024 * 1024),
    );
    println!(
        "                    direct with 1 MiB pipes {wide_rate:>8.1} MB/s   ratio {:.2}x (the proxy enlarges a streaming direction's pipes)",
        proxy_rate / wide_rate,
    );
    println!(
        "                    MB/s by round: direct {}  1 MiB {}  proxy {}",
        listed(direct),
        listed(wide),
        listed(proxied)
    );
    println!(
        "  proxy peak RSS    {:.1} MiB (VmHWM, exit included, highest round)",
        peak_kib as f64 / 1024.0
    );
    let missing: usize = checked.iter().map(|c| c.missing).sum();
    println!(
        "  transcript        {} of {} lines each way in every round (lowest), checked line by line: {missing} missing or different",
        checked.iter().map(|c| c.recorded).min().unwrap_or(0),
        checked.first().map_or(0, |c| c.sent),
    );
}

fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.into_iter().collect();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn listed(values: impl IntoIterator<Item = f64>) -> String {
    let values: Vec<String> = values.into_iter().map(|v| format!("{v:.0}")).collect();
    values.join("/")
}

struct Checked {
    sent: usize,
    recorded: usize,
    missing: usize,
}

/// The one transcript in `dir`, line by line against `payload` in both directions (the
/// echo agent sends back what it gets): every line must be there, byte for byte.
fn check_transcript(dir: &Path, payload: &[u8]) -> Checked {
    use fanout_capture::transcript::{SplitLine, split_records};
    let path = std::fs::read_dir(dir)
        .expect("transcript dir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "transcript"))
        .expect("the flood's transcript");
    let bytes = std::fs::read(&path).expect("read the transcript");
    let header_end = bytes.iter().position(|b| *b == b'\n').expect("header") + 1;
    let lines = split_records(&bytes[header_end..], usize::MAX).expect("records");
    let sent: Vec<&[u8]> = payload
        .strip_suffix(b"\n")
        .unwrap_or(payload)
        .split(|b| *b == b'\n')
        .collect();
    let mut missing = 0;
    let mut recorded = usize::MAX;
    for direction in ["c2a", "a2c"] {
        let got: Vec<&[u8]> = lines
            .iter()
            .filter_map(|split| match split {
                SplitLine::Line {
                    direction: d, line, ..
                } if d.as_str() == direction => Some(line.as_slice()),
                _ => None,
            })
            .collect();
        // Line by line, in order: a missing line shifts everything after it.
        let same = got.iter().zip(&sent).take_while(|(a, b)| a == b).count();
        missing = missing.max(sent.len() - same);
        recorded = recorded.min(got.len());
    }
    assert_eq!(
        missing,
        0,
        "the transcript lacks or changed {missing} of the {} lines sent",
        sent.len()
    );
    Checked {
        sent: sent.len(),
        recorded,
        missing,
    }
}

/// The `fanout` binary of this build profile. In full mode it is (re)built in release
/// mode with the cargo that runs this bench; otherwise an existing one is used.
fn fanout_binary(build: bool) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    // <target>/<profile>/deps/proxy-<hash>
    let profile_dir = exe.parent()?.parent()?.to_owned();
    if build {
        let target_dir = profile_dir.parent()?;
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args([
                "build",
                "--release",
                "-p",
                "fanout-cli",
                "--bin",
                "fanout",
                "--target-dir",
            ])
            .arg(target_dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build");
        assert!(status.success(), "building the fanout binary failed");
        return Some(target_dir.join("release").join("fanout"));
    }
    let binary = profile_dir.join("fanout");
    binary.exists().then_some(binary)
}

fn echo_direct() -> Child {
    Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start cat")
}

/// `cat` with both its pipes asked for 1 MiB, as the proxy asks for a streaming
/// direction's pipes: how much of the proxy's rate is the pipe size alone.
fn echo_direct_wide() -> Child {
    let child = echo_direct();
    for pipe in [
        child.stdin.as_ref().map(AsFd::as_fd),
        child.stdout.as_ref().map(AsFd::as_fd),
    ]
    .into_iter()
    .flatten()
    {
        let _ = rustix::pipe::fcntl_setpipe_size(pipe, 1024 * 1024);
    }
    child
}

fn echo_proxied(fanout: &Path, scratch: &Path) -> Child {
    Command::new(fanout)
        .env("FANOUT_DATA_DIR", scratch.join("data"))
        .env("FANOUT_LOG", "warn")
        .arg("proxy")
        .arg("--db")
        .arg(format!("sqlite://{}", scratch.join("bench.db").display()))
        .arg("--transcript-dir")
        .arg(scratch.join("transcripts"))
        .args(["--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start fanout proxy")
}

fn line(i: usize, pad: usize) -> Vec<u8> {
    let mut line = format!(
        r#"{{"jsonrpc":"2.0","method":"bench/ping","params":{{"i":{i},"pad":"{}"}}}}"#,
        "x".repeat(pad)
    )
    .into_bytes();
    line.push(b'\n');
    line
}

struct Percentiles {
    p50: f64,
    p99: f64,
}

/// Round trips of single lines, one at a time, in microseconds.
fn latency(start: impl Fn() -> Child, lines: usize) -> Percentiles {
    let mut child = start();
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut samples = Vec::with_capacity(lines);
    let mut echo = vec![0u8; 4096];
    // Warm up (process start, store open) before measuring.
    for i in 0..(lines / 10).max(5) {
        round_trip(&mut stdin, &mut stdout, &line(i, 100), &mut echo);
    }
    for i in 0..lines {
        let sent = line(i, 100);
        let started = Instant::now();
        round_trip(&mut stdin, &mut stdout, &sent, &mut echo);
        samples.push(started.elapsed());
    }
    drop(stdin);
    finish(child);
    samples.sort();
    let at = |q: f64| {
        let index = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[index].as_secs_f64() * 1e6
    };
    Percentiles {
        p50: at(0.50),
        p99: at(0.99),
    }
}

fn round_trip(stdin: &mut impl Write, stdout: &mut impl Read, sent: &[u8], echo: &mut [u8]) {
    stdin.write_all(sent).expect("write");
    let mut got = 0;
    while got < sent.len() {
        let n = stdout.read(&mut echo[got..sent.len()]).expect("read");
        assert!(n > 0, "the echo ended early");
        got += n;
    }
    assert_eq!(&echo[..sent.len()], sent, "echo differs");
}

/// Whole lines adding up to at least `total` bytes.
fn payload(total: usize) -> Vec<u8> {
    let mut payload = Vec::with_capacity(total + 2048);
    let mut i = 0;
    while payload.len() < total {
        payload.extend_from_slice(&line(i, 64 + i % 900));
        i += 1;
    }
    payload
}

/// MB/s (10^6 bytes) of `payload` through the echo, and the peak RSS (KiB) of the
/// process started.
///
/// The clock starts once the payload's first line has come back: the rate is the
/// stream's, not the process start's (the proxy's start, store open included, is
/// about 3 ms more than `cat`'s, some 2% of a 128 MiB run on this VM).
fn throughput(start: impl Fn() -> Child, payload: &Arc<Vec<u8>>) -> (f64, u64) {
    let expected = payload.len();
    let mut sent = Fnv::new();
    sent.add(payload);
    let mut child = start();
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let first = payload.iter().position(|b| *b == b'\n').expect("a line") + 1;
    let mut buffer = vec![0u8; 256 * 1024];
    round_trip(&mut stdin, &mut stdout, &payload[..first], &mut buffer);
    let mut received = Fnv::new();
    received.add(&payload[..first]);
    let mut count = first;
    let started = Instant::now();
    let to_send = Arc::clone(payload);
    let writer = std::thread::spawn(move || stdin.write_all(&to_send[first..]).expect("write"));
    while count < expected {
        let n = stdout.read(&mut buffer).expect("read");
        assert!(n > 0, "the echo ended early after {count} bytes");
        received.add(&buffer[..n]);
        count += n;
    }
    let elapsed = started.elapsed();
    writer.join().expect("writer");
    assert_eq!(count, expected, "bytes received");
    assert_eq!(received.0, sent.0, "checksums differ: the bytes changed");
    drop(stdout);
    // The peak is the last VmHWM read before the process is gone (it only grows).
    let mut hwm = peak_rss_kib(pid);
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the echo did not exit");
        hwm = hwm.max(peak_rss_kib(pid));
        std::thread::sleep(Duration::from_millis(5));
    }
    ((expected - first) as f64 / elapsed.as_secs_f64() / 1e6, hwm)
}

fn finish(mut child: Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the echo did not exit");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Peak resident set size of `pid` in KiB (0 when /proc does not say).
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status.lines().find_map(|l| {
                l.strip_prefix("VmHWM:")?
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse()
                    .ok()
            })
        })
        .unwrap_or(0)
}

/// FNV-1a, 64 bits: enough to tell changed bytes apart, no dependency.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn add(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}
