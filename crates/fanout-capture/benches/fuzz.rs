//! Fuzz at scale (DESIGN 7: malformed input never panics): the lines of every
//! dialect's real fixtures (`tests/fixtures/real/*.transcript.jsonl` and fanout-acp's
//! `tests/acp-examples`), mutated, fed through capture (`Capture::observe_batch` into
//! a real SQLite file) and through import (written as version 1 and version 2
//! transcripts, their framing damaged too, and read back by `import_paths`), counting
//! every panic. Not a benchmark of speed: it reports what it fed and asserts 0 panics.
//!
//! `cargo bench -p fanout-capture --bench fuzz` (or `scripts/fuzz.sh`) runs the full
//! size: `FANOUT_FUZZ_LINES` mutated lines through each path (default 1,000,000).
//! `cargo test` runs it in a short mode (20,000 lines each). `FANOUT_FUZZ_SEED` picks
//! the seed (the report names it, so a failure can be replayed).

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use fanout_acp::Direction;
use fanout_capture::import::{NoProgress, import_paths};
use fanout_capture::transcript::{Record, write_record};
use fanout_capture::{Capture, CaptureConfig};
use fanout_store::testing::TestDb;
use fanout_store::testing::bench::{is_quick, size};
use fanout_store::{Store, Timestamp};
use serde_json::Value;

/// A fixture: its dialect (file name) and its frames.
struct Fixture {
    name: String,
    frames: Vec<(Direction, Vec<u8>)>,
}

/// splitmix64: small, fast, and the same everywhere for a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn main() {
    let quick = is_quick();
    let lines = if quick {
        20_000
    } else {
        size("FANOUT_FUZZ_LINES", 1_000_000)
    };
    let seed = std::env::var("FANOUT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_f00d_u64);
    let fixtures = load_fixtures();
    assert!(
        fixtures.len() >= 20,
        "found only {} fixtures",
        fixtures.len()
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // Panics are counted, not printed one by one (the first is kept to show).
    let panics = Arc::new(AtomicU64::new(0));
    let first = Arc::new(std::sync::Mutex::new(None::<String>));
    {
        let (panics, first) = (Arc::clone(&panics), Arc::clone(&first));
        std::panic::set_hook(Box::new(move |info| {
            panics.fetch_add(1, Ordering::Relaxed);
            first
                .lock()
                .unwrap()
                .get_or_insert_with(|| info.to_string());
        }));
    }
    let mut rng = Rng(seed);
    let started = Instant::now();
    let captured = fuzz_capture(&runtime, &fixtures, &mut rng, lines);
    let capture_time = started.elapsed();
    let started = Instant::now();
    let imported = fuzz_import(&runtime, &fixtures, &mut rng, lines);
    let import_time = started.elapsed();
    let _ = std::panic::take_hook();

    println!(
        "fuzz ({} mode, seed {seed}, {} fixtures: {})",
        if quick { "short" } else { "full" },
        fixtures.len(),
        fixtures
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "  capture  {:>9} mutated lines ({} units) in {:>6.1} s",
        captured.lines,
        captured.units,
        capture_time.as_secs_f64()
    );
    println!(
        "  import   {:>9} mutated lines in {} v1 and {} v2 transcripts in {:>6.1} s: {} bad lines reported, {} files refused",
        imported.lines,
        imported.v1_files,
        imported.v2_files,
        import_time.as_secs_f64(),
        imported.bad_lines,
        imported.failed_files
    );
    let panics = panics.load(Ordering::Relaxed);
    println!("  panics   {panics}");
    assert_eq!(
        panics,
        0,
        "seed {seed}: first panic: {}",
        first.lock().unwrap().clone().unwrap_or_default()
    );
}

fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Every version 1 transcript of the two fixture folders.
fn load_fixtures() -> Vec<Fixture> {
    let mut fixtures = Vec::new();
    for dir in ["tests/fixtures/real", "../fanout-acp/tests/acp-examples"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(repo_path(dir))
            .expect("fixture dir")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.to_string_lossy().ends_with(".transcript.jsonl"))
            .collect();
        paths.sort();
        for path in paths {
            let text = std::fs::read_to_string(&path).expect("fixture");
            let frames: Vec<(Direction, Vec<u8>)> = text
                .lines()
                .skip(1)
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter_map(|frame| {
                    let direction = Direction::from_tag(frame["dir"].as_str()?)?;
                    Some((direction, frame["line"].as_str()?.as_bytes().to_vec()))
                })
                .collect();
            let name = path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .replace(".transcript.jsonl", "");
            fixtures.push(Fixture { name, frames });
        }
    }
    fixtures
}

/// One JSON value of any type, some of them the awkward ones.
fn random_value(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth > 2 { 7 } else { 9 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(50)),
        2 => serde_json::json!(rng.next() as i64),
        3 => [
            serde_json::json!(-1),
            serde_json::json!(0),
            serde_json::json!(i64::MAX),
            serde_json::json!(i64::MIN),
            serde_json::json!(u64::MAX),
            serde_json::json!(1e300),
        ][rng.below(6)]
        .clone(),
        4 => serde_json::json!(f64::from_bits(rng.next() & 0x7fef_ffff_ffff_ffff)),
        5 => Value::String(
            [
                "",
                "null",
                "Agent",
                "task",
                "completed",
                "async_launched",
                "\u{0}",
                "é\u{fffd}",
                "sub-agent-x: y",
            ][rng.below(9)]
            .to_owned(),
        ),
        6 => Value::String("x".repeat(rng.below(5000))),
        7 => Value::Array(
            (0..rng.below(4))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ => {
            let keys = [
                "toolCallId",
                "status",
                "_meta",
                "rawInput",
                "rawOutput",
                "sessionId",
                "title",
                "content",
                "id",
            ];
            Value::Object(
                (0..rng.below(4))
                    .map(|_| {
                        (
                            keys[rng.below(keys.len())].to_owned(),
                            random_value(rng, depth + 1),
                        )
                    })
                    .collect(),
            )
        }
    }
}

/// Replaces, removes or retypes one node of `value`.
fn mutate_json(value: &mut Value, rng: &mut Rng) {
    match value {
        Value::Object(map) if !map.is_empty() && rng.chance(75) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = &keys[rng.below(keys.len())];
            match rng.below(4) {
                0 => {
                    map.remove(key);
                }
                1 => {
                    map.insert(key.clone(), random_value(rng, 0));
                }
                _ => mutate_json(map.get_mut(key).expect("key"), rng),
            }
        }
        Value::Array(items) if !items.is_empty() && rng.chance(75) => {
            let at = rng.below(items.len());
            mutate_json(&mut items[at], rng);
        }
        other => *other = random_value(rng, 0),
    }
}

/// One mutation of a line (bytes, JSON structure or both).
fn mutate(line: &[u8], other: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut bytes = line.to_vec();
    match rng.below(9) {
        0..=2 => {
            if let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) {
                for _ in 0..=rng.below(3) {
                    mutate_json(&mut value, rng);
                }
                bytes = value.to_string().into_bytes();
            }
        }
        3 => {
            for _ in 0..=rng.below(8) {
                if !bytes.is_empty() {
                    let at = rng.below(bytes.len());
                    bytes[at] = rng.next() as u8;
                }
            }
        }
        4 => bytes.truncate(rng.below(bytes.len() + 1)),
        5 => {
            let (a, b) = (rng.below(bytes.len() + 1), rng.below(bytes.len() + 1));
            bytes.drain(a.min(b)..a.max(b));
        }
        6 => {
            // Splice: the head of one line, the tail of another.
            let cut = rng.below(bytes.len() + 1);
            let from = rng.below(other.len() + 1);
            bytes.truncate(cut);
            bytes.extend_from_slice(&other[from..]);
        }
        7 => {
            let at = rng.below(bytes.len() + 1);
            let junk: &[u8] =
                [&b"\xff\xfe"[..], b"\0", b"\r", b"\n", b"\"", b"{", b"]]]"][rng.below(7)];
            bytes.splice(at..at, junk.iter().copied());
        }
        _ => {
            let (a, b) = (rng.below(bytes.len() + 1), rng.below(bytes.len() + 1));
            let piece = bytes[a.min(b)..a.max(b)].to_vec();
            let at = rng.below(bytes.len() + 1);
            bytes.splice(at..at, piece);
        }
    }
    bytes
}

/// A fixture's frames with about half of them mutated, some dropped, repeated,
/// swapped or sent the other way: the stream a broken agent or a broken disk makes.
fn mutated_stream(
    fixture: &Fixture,
    fixtures: &[Fixture],
    rng: &mut Rng,
) -> (Vec<(Direction, Vec<u8>)>, u64) {
    let mut out = Vec::with_capacity(fixture.frames.len() + 8);
    let mut mutated = 0;
    for (direction, line) in &fixture.frames {
        if rng.chance(5) {
            continue;
        }
        let mut direction = *direction;
        if rng.chance(3) {
            direction = match direction {
                Direction::ClientToAgent => Direction::AgentToClient,
                Direction::AgentToClient => Direction::ClientToAgent,
            };
        }
        let line = if rng.chance(50) {
            let donor = &fixtures[rng.below(fixtures.len())];
            let other = donor
                .frames
                .get(rng.below(donor.frames.len()))
                .map_or(&b""[..], |(_, l)| l.as_slice());
            mutated += 1;
            mutate(line, other, rng)
        } else {
            line.clone()
        };
        out.push((direction, line));
        if rng.chance(3) {
            let (d, l) = out.last().cloned().expect("pushed");
            out.push((d, l));
        }
        if out.len() >= 2 && rng.chance(3) {
            let n = out.len();
            out.swap(n - 1, n - 2);
        }
    }
    (out, mutated)
}

#[derive(Default)]
struct Captured {
    lines: u64,
    units: u64,
}

fn fuzz_capture(
    runtime: &tokio::runtime::Runtime,
    fixtures: &[Fixture],
    rng: &mut Rng,
    target: usize,
) -> Captured {
    let db = TestDb::sqlite();
    let store: Arc<dyn Store> = Arc::new(runtime.block_on(db.open()).expect("open"));
    let mut done = Captured::default();
    let mut turn = 0usize;
    while done.lines < target as u64 {
        let fixture = &fixtures[turn % fixtures.len()];
        turn += 1;
        let (stream, mutated) = mutated_stream(fixture, fixtures, rng);
        done.lines += mutated;
        done.units += 1;
        let config = CaptureConfig {
            agent_execution_id: rng.chance(80).then(|| format!("fuzz-{turn}")),
            task_id: rng.chance(50).then(|| "fuzz".to_owned()),
            agent_command: None,
        };
        let store = Arc::clone(&store);
        let start = Timestamp::parse("2026-08-10T09:00:00Z").expect("time");
        let batch = 1 + rng.below(64);
        let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
            runtime.block_on(async {
                let mut capture = Capture::new(store, config);
                for (n, chunk) in stream.chunks(batch).enumerate() {
                    let lines: Vec<(Direction, &[u8], Timestamp)> = chunk
                        .iter()
                        .enumerate()
                        .map(|(i, (d, l))| {
                            (*d, l.as_slice(), start.plus_micros((n * batch + i) as i64))
                        })
                        .collect();
                    capture.observe_batch(&lines).await;
                }
            });
        }));
    }
    done
}

#[derive(Default)]
struct Imported {
    lines: u64,
    v1_files: u64,
    v2_files: u64,
    bad_lines: u64,
    failed_files: u64,
}

/// A version 1 transcript of `stream` (a line that is not UTF-8 goes lossily, as the
/// old writer did).
fn v1_file(stream: &[(Direction, Vec<u8>)], execution: &str, rng: &mut Rng) -> Vec<u8> {
    let mut out = format!(
        r#"{{"type":"fanout-transcript","version":1,"executionId":"{execution}","taskId":"fuzz","agentCommand":["fuzz"],"startedAt":"2026-08-10T09:00:00Z"}}"#
    )
    .into_bytes();
    out.push(b'\n');
    for (i, (direction, line)) in stream.iter().enumerate() {
        let record = serde_json::json!({
            "ts": format!("2026-08-10T09:00:{:02}.{:06}Z", (i / 1_000_000) % 60, i % 1_000_000),
            "dir": direction.as_str(),
            "line": String::from_utf8_lossy(line),
        });
        let mut text = record.to_string().into_bytes();
        if rng.chance(2) {
            let cut = rng.below(text.len());
            text.truncate(cut);
        }
        out.extend_from_slice(&text);
        out.push(b'\n');
    }
    out
}

/// A version 2 transcript of `stream`: each direction's lines as chunks cut anywhere,
/// with now and then a lost, an end or a damaged record, and maybe a torn tail.
fn v2_file(stream: &[(Direction, Vec<u8>)], execution: &str, rng: &mut Rng) -> Vec<u8> {
    let mut out = format!(
        r#"{{"type":"fanout-transcript","version":2,"executionId":"{execution}","taskId":null,"agentCommand":["fuzz"],"startedAt":"2026-08-10T09:00:00Z"}}"#
    )
    .into_bytes();
    out.push(b'\n');
    let start = Timestamp::parse("2026-08-10T09:00:00Z").expect("time");
    let mut pending: Vec<u8> = Vec::new();
    let mut current = None;
    let mut records = 0i64;
    let mut flush = |out: &mut Vec<u8>, direction: Direction, bytes: &[u8], rng: &mut Rng| {
        let mut rest = bytes;
        while !rest.is_empty() {
            let take = (1 + rng.below(rest.len().min(4096))).min(rest.len());
            records += 1;
            let at = start.plus_micros(records);
            let record = match rng.below(100) {
                0 => Record::Lost {
                    direction,
                    at,
                    bytes: take as u64,
                    lines: rng.below(3) as u64,
                    ends_line: rng.chance(50),
                },
                1 => Record::End { direction, at },
                _ => Record::Data {
                    direction,
                    at,
                    bytes: &rest[..take],
                },
            };
            let mut framed = Vec::new();
            write_record(&mut framed, &record).expect("in memory");
            if rng.chance(1) {
                let at = rng.below(framed.len());
                framed[at] = rng.next() as u8;
            }
            out.extend_from_slice(&framed);
            rest = &rest[take..];
        }
    };
    for (direction, line) in stream {
        if current != Some(*direction) {
            if let Some(previous) = current {
                flush(&mut out, previous, &pending, rng);
            }
            pending.clear();
            current = Some(*direction);
        }
        pending.extend_from_slice(line);
        pending.push(b'\n');
    }
    if let Some(previous) = current {
        flush(&mut out, previous, &pending, rng);
    }
    if rng.chance(20) {
        let cut = out.len() - rng.below(64).min(out.len() / 2);
        out.truncate(cut);
    }
    out
}

fn fuzz_import(
    runtime: &tokio::runtime::Runtime,
    fixtures: &[Fixture],
    rng: &mut Rng,
    target: usize,
) -> Imported {
    let db = TestDb::sqlite();
    let store: Arc<dyn Store> = Arc::new(runtime.block_on(db.open()).expect("open"));
    let scratch = tempfile::tempdir().expect("scratch");
    let mut done = Imported::default();
    let mut turn = 0usize;
    while done.lines < target as u64 {
        // A folder of transcripts per round, imported as `fanout import DIR` does.
        let round = scratch.path().join(format!("round-{turn}"));
        std::fs::create_dir_all(&round).expect("round dir");
        for _ in 0..fixtures.len() {
            let fixture = &fixtures[turn % fixtures.len()];
            turn += 1;
            let (stream, mutated) = mutated_stream(fixture, fixtures, rng);
            done.lines += mutated;
            let execution = format!("fuzz-import-{turn}");
            if rng.chance(50) {
                done.v1_files += 1;
                std::fs::write(
                    round.join(format!("{turn}.jsonl")),
                    v1_file(&stream, &execution, rng),
                )
                .expect("write");
            } else {
                done.v2_files += 1;
                std::fs::write(
                    round.join(format!("{turn}.transcript")),
                    v2_file(&stream, &execution, rng),
                )
                .expect("write");
            }
        }
        let store = Arc::clone(&store);
        let summary = std::panic::catch_unwind(AssertUnwindSafe(|| {
            runtime.block_on(import_paths(
                store,
                std::slice::from_ref(&round),
                &NoProgress,
            ))
        }));
        if let Ok(summary) = summary {
            done.bad_lines += summary.files.iter().map(|f| f.skipped).sum::<u64>();
            done.failed_files += summary.failed_files.len() as u64;
        }
        let _ = std::fs::remove_dir_all(&round);
    }
    done
}
