//! Shared by the proxy tests: running `fanout` as a child process with its pipes
//! collected, a tiny HTTP GET, and reading what capture wrote.

#![allow(dead_code)]

pub mod postgres;
pub mod session;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sqlx::{Column, Connection, Row};

pub const FANOUT: &str = env!("CARGO_BIN_EXE_fanout");

/// `fanout` with a private data dir, so nothing lands in the user's.
pub fn fanout(data_dir: &Path) -> Command {
    let mut command = Command::new(FANOUT);
    command
        .env("FANOUT_DATA_DIR", data_dir)
        .env_remove("FANOUT_DATABASE_URL")
        .env_remove("FANOUT_TASK")
        .env("FANOUT_LOG", "warn");
    command
}

type Buffer = Arc<Mutex<Vec<u8>>>;

fn collect(mut from: impl Read + Send + 'static) -> (Buffer, JoinHandle<()>) {
    let buffer: Buffer = Arc::default();
    let sink = Arc::clone(&buffer);
    let thread = std::thread::spawn(move || {
        let mut chunk = [0u8; 64 * 1024];
        loop {
            match from.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => sink.lock().unwrap().extend_from_slice(&chunk[..n]),
            }
        }
    });
    (buffer, thread)
}

/// A running `fanout` whose stdout and stderr are collected as they arrive.
pub struct Running {
    pub child: Child,
    stdin: Option<ChildStdin>,
    /// Everything [`Running::write`] sent.
    written: Vec<u8>,
    stdout: Buffer,
    stderr: Buffer,
    readers: Vec<JoinHandle<()>>,
}

/// A finished run.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Finished {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

impl Running {
    pub fn start(mut command: Command) -> Running {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("start fanout");
        let (stdout, out_reader) = collect(child.stdout.take().expect("stdout"));
        let (stderr, err_reader) = collect(child.stderr.take().expect("stderr"));
        Running {
            stdin: child.stdin.take(),
            written: Vec::new(),
            child,
            stdout,
            stderr,
            readers: vec![out_reader, err_reader],
        }
    }

    /// Writes to the proxy's stdin; false once the proxy no longer reads it.
    pub fn write(&mut self, bytes: &[u8]) -> bool {
        match self.stdin.as_mut() {
            Some(stdin) => {
                let done = stdin.write_all(bytes).and_then(|()| stdin.flush()).is_ok();
                if done {
                    self.written.extend_from_slice(bytes);
                }
                done
            }
            None => false,
        }
    }

    /// Everything [`Running::write`] has sent so far.
    pub fn written(&self) -> Vec<u8> {
        self.written.clone()
    }

    /// The proxy's stdin, for a writer thread.
    pub fn take_stdin(&mut self) -> ChildStdin {
        self.stdin.take().expect("stdin still open")
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    pub fn stdout(&self) -> Vec<u8> {
        self.stdout.lock().unwrap().clone()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Waits until `ready` holds for (stdout, stderr); panics with both after `limit`.
    pub fn wait_for(&self, what: &str, limit: Duration, ready: impl Fn(&[u8], &str) -> bool) {
        let deadline = Instant::now() + limit;
        loop {
            if ready(&self.stdout(), &self.stderr()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&self.stdout()),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until stdout holds at least `lines` newlines.
    pub fn wait_for_lines(&self, lines: usize, limit: Duration) {
        self.wait_for(&format!("{lines} line(s) on stdout"), limit, |out, _| {
            out.iter().filter(|b| **b == b'\n').count() >= lines
        });
    }

    /// Sends a signal to the proxy process (through the shell's `kill`, so the tests
    /// need no unsafe code).
    pub fn signal(&self, signal: i32) {
        let pid = self.child.id();
        let status = Command::new("sh")
            .args(["-c", &format!("kill -{signal} {pid}")])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {pid}: {status}");
    }

    /// Closes stdin and waits (at most `limit`) for the exit; kills and panics after.
    pub fn finish(mut self, limit: Duration) -> Finished {
        self.close_stdin();
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "fanout did not exit within {limit:?}\nstderr: {}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        Finished {
            status,
            stdout: self.stdout(),
            stderr: self.stderr(),
        }
    }
}

/// A `GET` (or another method) over a plain TCP connection: (status, body).
pub fn http(method: &str, addr: &str, path: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("status line");
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// The value of one sample line of a Prometheus page (`name{labels} value`).
pub fn prometheus_value(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// The only transcript (`*.transcript`) in `dir`.
pub fn only_transcript(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("transcript dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == fanout_capture::transcript::TRANSCRIPT_EXTENSION)
        })
        .collect();
    assert_eq!(
        files.len(),
        1,
        "transcripts in {}: {files:?}",
        dir.display()
    );
    files.into_iter().next().expect("one")
}

/// A transcript (either version) as JSON values: its header, then one
/// `{"dir", "line", "ts"}` per line it records (a version 2 transcript framed as the
/// proxy's tap saw it; `line` lossy where it is not UTF-8).
pub fn transcript_lines(path: &Path) -> Vec<serde_json::Value> {
    use fanout_capture::transcript::{SplitLine, split_records};
    let bytes = std::fs::read(path).expect("read transcript");
    let header_end = bytes
        .iter()
        .position(|b| *b == b'\n')
        .expect("a header line")
        + 1;
    let header: serde_json::Value =
        serde_json::from_slice(&bytes[..header_end]).expect("the header is JSON");
    if header["version"] == 1 {
        return std::iter::once(header)
            .chain(
                bytes[header_end..]
                    .split(|b| *b == b'\n')
                    .filter(|l| !l.is_empty())
                    .map(|l| serde_json::from_slice(l).expect("transcript line is JSON")),
            )
            .collect();
    }
    let lines = split_records(&bytes[header_end..], usize::MAX).expect("transcript records");
    std::iter::once(header)
        .chain(lines.into_iter().map(|split| match split {
            SplitLine::Line {
                direction,
                line,
                at,
            } => serde_json::json!({
                "dir": direction.as_str(),
                "line": String::from_utf8_lossy(&line),
                "ts": at.canonical(),
            }),
            SplitLine::Oversized { .. } => panic!("no line is longer than usize::MAX"),
        }))
        .collect()
}

/// Every row of a SQLite table as text, ordered by every column, leaving out `except`.
pub async fn dump_sqlite_table(
    url: &str,
    table: &str,
    except: &[&str],
) -> Vec<Vec<Option<String>>> {
    let mut connection = sqlx::SqliteConnection::connect(url).await.expect("connect");
    let rows = sqlx::query(&format!("SELECT * FROM {table}"))
        .fetch_all(&mut connection)
        .await
        .expect("select");
    let mut dump: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|row| {
            row.columns()
                .iter()
                .filter(|c| !except.contains(&c.name()))
                .map(|c| {
                    row.try_get::<Option<String>, _>(c.ordinal())
                        .or_else(|_| {
                            row.try_get::<Option<i64>, _>(c.ordinal())
                                .map(|v| v.map(|v| v.to_string()))
                        })
                        .expect("text or integer column")
                })
                .collect()
        })
        .collect();
    dump.sort();
    connection.close().await.ok();
    dump
}

/// `fanout import` of `transcript` into a fresh SQLite database in `dir` writes the
/// same rows as the live capture into `live` did (write times aside), in every table.
pub async fn assert_import_reproduces(dir: &Path, live: &str, transcript: &Path) {
    let imported = format!("sqlite://{}", dir.join("imported.db").display());
    let mut import = fanout(&dir.join("data"));
    import.args(["import", "--db", &imported]).arg(transcript);
    let done =
        tokio::task::block_in_place(|| Running::start(import).finish(Duration::from_secs(60)));
    assert_eq!(done.code(), Some(0), "import: {}", done.stderr);
    for table in ROW_TABLES {
        let (captured, replayed) = (
            dump_sqlite_table(live, table, &["updated_at"]).await,
            dump_sqlite_table(&imported, table, &["updated_at"]).await,
        );
        assert!(!captured.is_empty(), "{table} is empty");
        assert_eq!(captured, replayed, "{table}: live vs imported");
    }
}

/// The four tables of rows (sessions, turns, messages, subagents).
const ROW_TABLES: [&str; 4] = [
    "task_sessions",
    "task_session_turns",
    "task_session_messages",
    "task_session_subagents",
];

/// Every row of the four tables of rows on either engine, as text, sorted, without
/// `updated_at` (a write time). (`transcript_applied` is bookkeeping: where each
/// import's last batch ended depends on where it began.)
pub async fn dump_rows(url: &str) -> Vec<String> {
    let mut rows = Vec::new();
    for table in ROW_TABLES {
        if url.starts_with("sqlite:") {
            for row in dump_sqlite_table(url, table, &["updated_at"]).await {
                rows.push(format!("{table}: {row:?}"));
            }
        } else {
            let mut connection = sqlx::PgConnection::connect(url).await.expect("connect");
            let json: Vec<String> = sqlx::query_scalar(&format!(
                "SELECT (to_jsonb(t) - 'updated_at')::text FROM {table} t"
            ))
            .fetch_all(&mut connection)
            .await
            .expect("select");
            rows.extend(json.into_iter().map(|row| format!("{table}: {row}")));
            connection.close().await.ok();
        }
    }
    rows.sort();
    rows
}

/// `fanout import` of `paths` into `url` (data dir under `dir`); it must succeed.
/// It blocks: in an async test, call it inside `block_in_place`.
pub fn import_into(dir: &Path, url: &str, paths: &[&Path]) {
    let mut command = fanout(&dir.join("data"));
    command.args(["import", "--db", url]).args(paths);
    let done = Running::start(command).finish(Duration::from_secs(60));
    assert_eq!(done.code(), Some(0), "import into {url}: {}", done.stderr);
}

/// `SELECT COUNT(*)` of `table` (with an optional `WHERE` clause) on either engine,
/// through a read-only store.
pub async fn count_rows(url: &str, table: &str, filter: &str) -> i64 {
    try_count_rows(url, table, filter)
        .await
        .expect("open the store to read it, and count")
}

/// [`count_rows`], `None` while the store cannot be opened or read yet (before a
/// proxy has created the schema, or while it is down).
pub async fn try_count_rows(url: &str, table: &str, filter: &str) -> Option<i64> {
    let options = fanout_store::OpenOptions {
        read_only: true,
        ..Default::default()
    };
    let store = fanout_store::SqlStore::open_with(url, &options)
        .await
        .ok()?;
    let count = store
        .query_i64(&format!("SELECT COUNT(*) FROM {table} {filter}"))
        .await;
    store.close().await;
    count.ok()
}

/// One scalar text query on a SQLite database.
pub async fn sqlite_texts(url: &str, sql: &str) -> Vec<Option<String>> {
    let mut connection = sqlx::SqliteConnection::connect(url).await.expect("connect");
    let values = sqlx::query_scalar::<_, Option<String>>(sql)
        .fetch_all(&mut connection)
        .await
        .expect("query");
    connection.close().await.ok();
    values
}

/// A shell script at `path`, executable.
pub fn write_script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, body).expect("write script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// An agent that replays the agent side of a recorded transcript: before any input it
/// prints what the agent said first, and after the n-th client line what the agent
/// said after the n-th client line.
pub struct ReplayingAgent {
    pub script: PathBuf,
    /// Each client line, with how many agent lines follow it.
    pub steps: Vec<(String, usize)>,
    /// Agent lines before the first client line.
    pub opening: usize,
}

impl ReplayingAgent {
    pub fn from_transcript(dir: &Path, transcript: &Path) -> ReplayingAgent {
        let replies = dir.join("replies");
        std::fs::create_dir_all(&replies).unwrap();
        let mut groups: Vec<Vec<String>> = vec![Vec::new()];
        let mut steps = Vec::new();
        for frame in transcript_lines(transcript).iter().skip(1) {
            let line = frame["line"].as_str().expect("line").to_owned();
            match frame["dir"].as_str() {
                Some("c2a") => {
                    steps.push((line, 0));
                    groups.push(Vec::new());
                }
                Some("a2c") => groups.last_mut().expect("group").push(line),
                other => panic!("bad dir {other:?}"),
            }
        }
        for (n, group) in groups.iter().enumerate() {
            if n > 0 {
                steps[n - 1].1 = group.len();
            }
            let text: String = group.iter().map(|l| format!("{l}\n")).collect();
            std::fs::write(replies.join(n.to_string()), text).unwrap();
        }
        let script = dir.join("replaying-agent.sh");
        write_script(
            &script,
            &format!(
                "#!/bin/sh\nreplies='{}'\nn=0\n[ -f \"$replies/0\" ] && cat \"$replies/0\"\nwhile IFS= read -r line; do\n  n=$((n+1))\n  [ -f \"$replies/$n\" ] && cat \"$replies/$n\"\ndone\n",
                replies.display()
            ),
        );
        ReplayingAgent {
            script,
            opening: groups[0].len(),
            steps,
        }
    }

    /// Sends client lines `range`, each after the agent's answer to the one before, so
    /// the proxy sees the recorded interleaving. Returns the agent lines expected so far.
    pub fn drive(
        &self,
        proxy: &mut Running,
        range: std::ops::Range<usize>,
        mut seen: usize,
    ) -> usize {
        if range.start == 0 {
            seen = self.opening;
            proxy.wait_for_lines(seen, Duration::from_secs(20));
        }
        for (line, answers) in &self.steps[range] {
            assert!(
                proxy.write(format!("{line}\n").as_bytes()),
                "proxy stdin closed"
            );
            seen += answers;
            proxy.wait_for_lines(seen, Duration::from_secs(20));
        }
        seen
    }
}
