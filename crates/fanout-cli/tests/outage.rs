//! DESIGN 7, catch-up: what capture could not write while the store was away (at
//! open, mid-run, or across the end of the session) is written once it is back, from
//! the run's transcript, before the proxy exits, or, failing that, by the next proxy
//! or import on the same store; nobody runs anything by hand. A real PostgreSQL server
//! is stopped and started (a private one: the shared test cluster must stay up), and a
//! SQLite file is held locked by another connection. The agent is fanout's reference
//! agent on a scripted model: twelve prompt turns, one subagent each; every one of the
//! twelve rows must be in the store at the end, and no prompt may wait for the store.

mod proxy_support;

use std::path::Path;
use std::time::{Duration, Instant};

use proxy_support::postgres::PgServer;
use proxy_support::session::{Client, ScriptedSession};
use proxy_support::{
    Finished, Running, count_rows, dump_rows, fanout, import_into, try_count_rows,
};
use sqlx::Connection;

const TURNS: usize = 12;
/// Any one step of a test; a stuck proxy fails it rather than hanging it.
const LIMIT: Duration = Duration::from_secs(90);
/// A prompt's round trip: forwarding never waits for the store.
const PROMPT_LIMIT: Duration = Duration::from_secs(5);

/// A store that can be made unavailable and available again.
trait Outage {
    async fn begin(&mut self);
    async fn end(&mut self);
}

/// PostgreSQL, stopped and started with `pg_ctl`.
struct Stopped<'a>(&'a PgServer);

impl Outage for Stopped<'_> {
    async fn begin(&mut self) {
        tokio::task::block_in_place(|| self.0.stop());
    }
    async fn end(&mut self) {
        tokio::task::block_in_place(|| self.0.start_again());
    }
}

/// A SQLite file another connection holds with `BEGIN EXCLUSIVE` (longer than the
/// store's busy timeout: its writes fail "database is locked").
struct Locked {
    url: String,
    holder: Option<sqlx::SqliteConnection>,
}

impl Outage for Locked {
    async fn begin(&mut self) {
        let mut holder = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
        sqlx::query("BEGIN EXCLUSIVE")
            .execute(&mut holder)
            .await
            .unwrap();
        self.holder = Some(holder);
    }
    async fn end(&mut self) {
        if let Some(mut holder) = self.holder.take() {
            sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
            holder.close().await.unwrap();
        }
    }
}

/// A SQLite database with fanout's schema, so another connection can lock it before
/// the proxy first opens it.
async fn sqlite_store(dir: &Path) -> Locked {
    let url = format!("sqlite://{}", dir.join("fanout.db").display());
    fanout_store::SqlStore::open(&url)
        .await
        .unwrap()
        .close()
        .await;
    Locked { url, holder: None }
}

/// `fanout proxy` in front of the session's agent, with its transcript in the data
/// dir's default place (where the next proxy or import looks for what is pending).
fn start_proxy(dir: &Path, db: &str, session: &ScriptedSession, drain_secs: u64) -> Running {
    let mut command = fanout(&dir.join("data"));
    command
        .args([
            "proxy",
            "--db",
            db,
            "--task",
            "outage",
            "--store-retry-ms",
            "200",
        ])
        .args(["--drain-timeout-secs", &drain_secs.to_string()])
        .arg("--")
        .args(&session.agent);
    Running::start(command)
}

fn block<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Runs `count` turns; none may take longer than [`PROMPT_LIMIT`].
fn turns(proxy: &mut Running, client: &mut Client, count: usize) {
    let longest = block(|| client.turns(proxy, count, LIMIT));
    assert!(
        longest < PROMPT_LIMIT,
        "a prompt waited for the store: {longest:?}\n{}",
        proxy.stderr()
    );
}

fn finish(proxy: Running) -> Finished {
    let done = block(|| proxy.finish(LIMIT));
    assert_eq!(done.code(), Some(0), "stderr: {}", done.stderr);
    done
}

/// Every row of the session is in the store: one session, twelve turns, twelve
/// subagents, each settled.
async fn assert_all_rows(url: &str, why: &str) {
    let count = |table, filter| count_rows(url, table, filter);
    assert_eq!(
        count("task_sessions", "WHERE task_id = 'outage'").await,
        1,
        "{why}"
    );
    assert_eq!(
        count(
            "task_session_turns",
            "WHERE task_id = 'outage' AND completed_at IS NOT NULL"
        )
        .await,
        TURNS as i64,
        "{why}"
    );
    assert_eq!(
        count(
            "task_session_subagents",
            "WHERE task_id = 'outage' AND subagent_type = 'reviewer' AND settled_at IS NOT NULL"
        )
        .await,
        TURNS as i64,
        "{why}"
    );
}

/// A store of the same engine as `url` that nothing has written yet.
fn fresh_store(dir: &Path, server: Option<&PgServer>) -> String {
    match server {
        Some(server) => server.create_database("fresh"),
        None => format!("sqlite://{}", dir.join("fresh.db").display()),
    }
}

/// The store holds exactly what an import of the runs' transcripts (and `also`) into
/// a fresh store of the same engine gives: nothing twice, nothing missing, nothing
/// out of order (message sequence numbers and timestamps included).
async fn assert_as_imported(dir: &Path, url: &str, server: Option<&PgServer>, also: &[&Path]) {
    let fresh = fresh_store(dir, server);
    let transcripts = transcripts(dir);
    let mut paths = vec![transcripts.as_path()];
    paths.extend_from_slice(also);
    block(|| import_into(dir, &fresh, &paths));
    let (caught_up, imported) = (dump_rows(url).await, dump_rows(&fresh).await);
    assert!(!imported.is_empty(), "the import wrote nothing");
    assert_eq!(
        caught_up, imported,
        "the store after the outage vs a fresh import"
    );
}

fn transcripts(dir: &Path) -> std::path::PathBuf {
    dir.join("data").join("transcripts")
}

/// The proxy exits with everything in the store: every row, exactly as an import of
/// its transcript writes them.
async fn finished_complete(
    proxy: Running,
    dir: &Path,
    url: &str,
    server: Option<&PgServer>,
    why: &str,
) {
    let done = finish(proxy);
    assert!(
        !done.stderr.contains("not in the store"),
        "{why}: {}",
        done.stderr
    );
    assert_all_rows(url, why).await;
    assert_as_imported(dir, url, server, &[]).await;
}

/// The store goes away while the proxy opens it (PostgreSQL: stopped the moment the
/// proxy starts, while it connects and creates its schema; SQLite: locked before it
/// starts), comes back after half the session.
async fn outage_at_open(
    dir: &Path,
    url: &str,
    server: Option<&PgServer>,
    outage: &mut impl Outage,
    before_start: bool,
) {
    let session = ScriptedSession::new(dir, TURNS);
    if before_start {
        outage.begin().await;
    }
    let mut proxy = start_proxy(dir, url, &session, 60);
    if !before_start {
        outage.begin().await;
    }
    let mut client = block(|| Client::open(&mut proxy, &session, LIMIT));
    turns(&mut proxy, &mut client, TURNS / 2);
    outage.end().await;
    turns(&mut proxy, &mut client, TURNS - TURNS / 2);
    finished_complete(proxy, dir, url, server, "outage at open").await;
}

/// The store goes away after three turns and comes back after nine.
async fn outage_mid_run(
    dir: &Path,
    url: &str,
    server: Option<&PgServer>,
    outage: &mut impl Outage,
) {
    let session = ScriptedSession::new(dir, TURNS);
    let mut proxy = start_proxy(dir, url, &session, 60);
    let mut client = block(|| Client::open(&mut proxy, &session, LIMIT));
    turns(&mut proxy, &mut client, 3);
    outage.begin().await;
    turns(&mut proxy, &mut client, 6);
    outage.end().await;
    turns(&mut proxy, &mut client, 3);
    finished_complete(proxy, dir, url, server, "outage mid-run").await;
}

/// The store goes away before the last two turns and comes back two seconds after
/// the client has closed its input, while the proxy drains: written before it exits.
async fn outage_across_the_end(
    dir: &Path,
    url: &str,
    server: Option<&PgServer>,
    outage: &mut impl Outage,
) {
    let session = ScriptedSession::new(dir, TURNS);
    let mut proxy = start_proxy(dir, url, &session, 60);
    let mut client = block(|| Client::open(&mut proxy, &session, LIMIT));
    turns(&mut proxy, &mut client, TURNS - 2);
    outage.begin().await;
    turns(&mut proxy, &mut client, 2);
    proxy.close_stdin();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let exited_early = proxy.child.try_wait().unwrap();
    assert!(
        exited_early.is_none(),
        "the proxy exited without waiting for the store"
    );
    outage.end().await;
    finished_complete(proxy, dir, url, server, "outage across the end").await;
}

/// The store stays away past the proxy's drain: the proxy exits saying what is not in
/// the store yet, and `next` (the next proxy or import on the store) writes it.
async fn outage_past_the_exit(
    dir: &Path,
    url: &str,
    server: Option<&PgServer>,
    outage: &mut impl Outage,
    next: impl FnOnce(&Path, &str) -> Finished,
    next_imported: &[&Path],
) {
    let session = ScriptedSession::new(dir, TURNS);
    let mut proxy = start_proxy(dir, url, &session, 1);
    let mut client = block(|| Client::open(&mut proxy, &session, LIMIT));
    turns(&mut proxy, &mut client, TURNS - 2);
    wait_for_subagents(url, TURNS as i64 - 2, &proxy).await;
    outage.begin().await;
    turns(&mut proxy, &mut client, 2);
    let done = finish(proxy);
    assert!(
        done.stderr.contains("not in the store")
            && done
                .stderr
                .contains("the next `fanout proxy` or `fanout import` on this store writes them"),
        "{}",
        done.stderr
    );
    outage.end().await;
    let subagents = count_rows(url, "task_session_subagents", "WHERE task_id = 'outage'").await;
    assert!(
        subagents < TURNS as i64,
        "the last turns waited for the next run: {subagents}"
    );
    let started = Instant::now();
    let next_done = block(|| next(dir, url));
    assert_eq!(next_done.code(), Some(0), "{}", next_done.stderr);
    assert!(started.elapsed() < LIMIT);
    assert_all_rows(url, "caught up by the next run").await;
    assert_as_imported(dir, url, server, next_imported).await;
    let hints: Vec<_> = std::fs::read_dir(transcripts(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pending"))
        .collect();
    assert!(
        hints.is_empty(),
        "a transcript's hint goes once it is wholly in the store: {hints:?}"
    );
}

/// Waits until `count` subagent rows of the session are in the store.
async fn wait_for_subagents(url: &str, count: i64, proxy: &Running) {
    let deadline = Instant::now() + LIMIT;
    loop {
        // Before the proxy has created the schema, there is nothing to count.
        let rows = try_count_rows(url, "task_session_subagents", "WHERE task_id = 'outage'")
            .await
            .unwrap_or(0);
        if rows >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{count} rows never reached the store: {}",
            proxy.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The next run: a proxy on the same store (and data dir) with an agent that does nothing.
fn next_proxy(dir: &Path, url: &str) -> Finished {
    let mut command = fanout(&dir.join("data"));
    command.args(["proxy", "--db", url, "--", "true"]);
    let done = Running::start(command).finish(LIMIT);
    assert!(
        done.stderr
            .contains("of earlier runs' transcripts that were not yet in"),
        "{}",
        done.stderr
    );
    done
}

/// The next run: an import of something else into the same store.
/// What [`next_import`] imports besides catching up.
fn other_import() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fanout-acp/tests/acp-examples/claude.transcript.jsonl")
}

fn next_import(dir: &Path, url: &str) -> Finished {
    let other = other_import();
    let mut command = fanout(&dir.join("data"));
    command.args(["import", "--db", url]).arg(other);
    let done = Running::start(command).finish(LIMIT);
    assert!(
        done.stderr.contains("proxy transcript(s)")
            && done.stderr.contains("that were not yet in the store"),
        "{}",
        done.stderr
    );
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_while_the_proxy_opens_it() {
    let Some(server) = PgServer::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    outage_at_open(
        dir.path(),
        &server.url(),
        Some(&server),
        &mut Stopped(&server),
        false,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_mid_run() {
    let Some(server) = PgServer::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    outage_mid_run(
        dir.path(),
        &server.url(),
        Some(&server),
        &mut Stopped(&server),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_across_the_end_of_the_session() {
    let Some(server) = PgServer::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    outage_across_the_end(
        dir.path(),
        &server.url(),
        Some(&server),
        &mut Stopped(&server),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_past_the_exit_is_caught_up_by_the_next_proxy() {
    let Some(server) = PgServer::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    outage_past_the_exit(
        dir.path(),
        &server.url(),
        Some(&server),
        &mut Stopped(&server),
        next_proxy,
        &[],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_locked_while_the_proxy_opens_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut locked = sqlite_store(dir.path()).await;
    let url = locked.url.clone();
    outage_at_open(dir.path(), &url, None, &mut locked, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_locked_mid_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut locked = sqlite_store(dir.path()).await;
    let url = locked.url.clone();
    outage_mid_run(dir.path(), &url, None, &mut locked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_locked_across_the_end_of_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let mut locked = sqlite_store(dir.path()).await;
    let url = locked.url.clone();
    outage_across_the_end(dir.path(), &url, None, &mut locked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_locked_past_the_exit_is_caught_up_by_the_next_import() {
    let dir = tempfile::tempdir().unwrap();
    let mut locked = sqlite_store(dir.path()).await;
    let url = locked.url.clone();
    let other = other_import();
    outage_past_the_exit(dir.path(), &url, None, &mut locked, next_import, &[&other]).await;
}
