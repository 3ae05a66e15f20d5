//! `fanout report` and `fanout health` as a user runs them: the real binary against a
//! SQLite file populated through the fanout-store API.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fanout_store::testing::{session_record, subagent_message_record, turn_record};
use fanout_store::{SqlStore, Store, SubagentRecord, Timestamp};

/// A hostile model name: a comma and quotes for CSV, markup for HTML, an escape for
/// terminals.
const ODD_MODEL: &str = "gpt,\"5\"<script>\u{1b}[2J";

fn fanout(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fanout"))
        .args(args)
        .env("COLUMNS", "80")
        .env_remove("FANOUT_DATABASE_URL")
        .env_remove("FANOUT_LOG")
        .output()
        .expect("run fanout")
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "fanout failed: {:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("UTF-8 output")
}

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

/// 2026-08-10T09:00:00Z plus `seconds`.
fn at(seconds: i64) -> Timestamp {
    Timestamp::parse("2026-08-10T09:00:00Z")
        .expect("timestamp")
        .plus_micros(seconds * 1_000_000)
}

struct Db {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Db {
    fn new() -> Db {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("fanout.db");
        Db { _dir: dir, path }
    }

    fn url(&self) -> String {
        format!("sqlite://{}", self.path.display())
    }

    async fn open(&self) -> SqlStore {
        SqlStore::open(&self.url()).await.expect("open store")
    }

    /// Opens it as the read-only commands do, so checking it changes nothing either.
    async fn open_read_only(&self) -> SqlStore {
        let options = fanout_store::OpenOptions {
            read_only: true,
            ..fanout_store::OpenOptions::default()
        };
        SqlStore::open_with(&self.url(), &options)
            .await
            .expect("open store read-only")
    }
}

async fn session(store: &SqlStore, id: &str, task: &str) {
    store
        .upsert_session(&session_record(id, task, at(0)))
        .await
        .expect("session");
}

async fn turn(store: &SqlStore, id: &str, session: &str, task: &str, started: i64) {
    store
        .upsert_turn(&turn_record(id, session, task, at(started)))
        .await
        .expect("turn");
}

async fn subagent_message(store: &SqlStore, tool_call_id: &str, turn: &str, created: Timestamp) {
    store
        .upsert_message(&subagent_message_record(
            "s1",
            "task-1",
            turn,
            tool_call_id,
            created,
        ))
        .await
        .expect("message");
}

struct Launch {
    id: &'static str,
    turn: Option<&'static str>,
    kind: Option<&'static str>,
    model: Option<&'static str>,
    tokens: Option<i64>,
    parent: Option<&'static str>,
}

impl Launch {
    fn record(&self) -> SubagentRecord {
        SubagentRecord {
            task_session_id: "s1".into(),
            task_id: "task-1".into(),
            turn_id: self.turn.map(Into::into),
            tool_call_id: self.id.into(),
            agent_execution_id: Some("exec-1".into()),
            parent_tool_call_id: self.parent.map(Into::into),
            subagent_type: self.kind.map(Into::into),
            model: self.model.map(Into::into),
            total_tokens: self.tokens,
            observed_at: Some(at(200)),
            ..Default::default()
        }
    }
}

/// Known turns with fan-out 0, 1, 1 and 3; two unknown turns before backfill_through
/// (one with two backfilled rows); one nested launch outside any turn.
async fn populate(db: &Db) {
    let store = db.open().await;
    session(&store, "s1", "task-1").await;
    session(&store, "s2", "task-2").await;
    turn(&store, "old-silent", "s1", "task-1", 1).await;
    turn(&store, "old-backfilled", "s1", "task-1", 2).await;
    subagent_message(&store, "b1", "old-backfilled", at(20)).await;
    subagent_message(&store, "b2", "old-backfilled", at(30)).await;
    // Activate over that history, as a first start on an older database does.
    store
        .execute_raw("DELETE FROM fanout_meta WHERE key LIKE 'subagent_context_%'")
        .await
        .expect("reset activation");
    store.run_migrations().await;

    for (id, started) in [("t-zero", 100), ("t-one", 101), ("t-three", 102)] {
        turn(&store, id, "s1", "task-1", started).await;
    }
    let launch = |id, turn, kind, model, tokens, parent| Launch {
        id,
        turn,
        kind,
        model,
        tokens,
        parent,
    };
    let launches = [
        launch(
            "one",
            Some("t-one"),
            Some("reviewer"),
            Some("opus"),
            Some(100),
            None,
        ),
        launch(
            "r1",
            Some("t-three"),
            Some("reviewer"),
            Some("opus"),
            Some(300),
            None,
        ),
        launch("r2", Some("t-three"), Some("explorer"), None, None, None),
        launch("r3", Some("t-three"), None, Some(ODD_MODEL), None, None),
        launch("r1-child", None, Some("reviewer"), None, None, Some("r1")),
    ];
    for l in &launches {
        store.upsert_subagent(&l.record()).await.expect("subagent");
    }
    turn(&store, "s2-t", "s2", "task-2", 103).await;
    store
        .upsert_subagent(&SubagentRecord {
            task_session_id: "s2".into(),
            task_id: "task-2".into(),
            turn_id: Some("s2-t".into()),
            tool_call_id: "x".into(),
            observed_at: Some(at(300)),
            ..Default::default()
        })
        .await
        .expect("subagent");
    store.close().await;
}

fn populated() -> Db {
    let db = Db::new();
    block_on(populate(&db));
    db
}

fn report_json(db: &Db, extra: &[&str]) -> serde_json::Value {
    let url = db.url();
    let mut args = vec!["report", "--db", &url, "--format", "json"];
    args.extend_from_slice(extra);
    serde_json::from_str(&stdout(&fanout(&args))).expect("report JSON parses")
}

fn buckets(json: &serde_json::Value) -> Vec<(i64, i64)> {
    json["turns"]["distribution"]
        .as_array()
        .expect("distribution")
        .iter()
        .map(|b| {
            (
                b["subagents"].as_i64().expect("subagents"),
                b["turns"].as_i64().expect("turns"),
            )
        })
        .collect()
}

#[test]
fn table_draws_the_distribution_chart_within_80_columns() {
    let db = populated();
    let text = stdout(&fanout(&["report", "--db", &db.url()]));
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "too wide: {line:?}");
    }
    assert!(text.contains("FAN-OUT PER TURN"), "{text}");
    assert!(text.contains('█'), "solid bars: {text}");
    assert!(
        text.contains('░'),
        "the unknown bucket is drawn apart: {text}"
    );
    assert!(text.contains("unknown │"), "{text}");
    assert!(text.contains("never counted as 0"), "{text}");
    assert!(text.contains("reviewer"), "{text}");
    assert!(text.contains("(unreported)"), "{text}");
    assert!(text.contains("unreported"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "no terminal escape from the database"
    );
}

#[test]
fn table_follows_a_wider_terminal() {
    let db = populated();
    let output = Command::new(env!("CARGO_BIN_EXE_fanout"))
        .args(["report", "--db", &db.url()])
        .env("COLUMNS", "120")
        .output()
        .expect("run fanout");
    let text = stdout(&output);
    let widest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(widest > 80 && widest <= 120, "widest line {widest}");
}

#[test]
fn json_has_every_figure_under_stable_names() {
    let db = populated();
    let json = report_json(&db, &[]);
    assert_eq!(json["scope"]["kind"], "all");
    assert_eq!(buckets(&json), vec![(0, 1), (1, 2), (2, 0), (3, 1)]);
    assert_eq!(json["turns"]["turns"], 6);
    assert_eq!(json["turns"]["known_turns"], 4);
    let unknown = &json["turns"]["unknown"];
    assert_eq!(unknown["turns"], 2);
    assert_eq!(unknown["turns_with_backfill_rows"], 1);
    assert_eq!(unknown["backfill_rows"], 2);
    assert_eq!(unknown["before"], at(30).canonical());
    assert!(
        unknown["rule"]
            .as_str()
            .is_some_and(|rule| rule.contains("backfill_through")),
        "the unknown fan-out rule travels with the figures: {unknown}"
    );
    assert_eq!(json["subagents"]["total"], 8);
    assert_eq!(json["subagents"]["without_turn"], 1);
    assert_eq!(json["provenance"]["live"], 6);
    assert_eq!(json["provenance"]["backfill"], 2);
    let tokens = &json["total_tokens"];
    assert_eq!(tokens["reported"], 2);
    assert_eq!(tokens["unreported"], 6);
    assert_eq!(tokens["mean"], 200.0);
    assert_eq!(tokens["sum"], 400);
    assert_eq!(json["by_type"][0]["value"], "reviewer");
    assert_eq!(json["by_type"][0]["subagents"], 5);
    assert_eq!(json["nesting"]["by_depth"][1]["subagents"], 1);
    assert_eq!(json["by_model"][0]["value"], serde_json::Value::Null);
}

#[test]
fn scopes_narrow_the_report() {
    let db = populated();
    let task = report_json(&db, &["--task", "task-2"]);
    assert_eq!(
        task["scope"],
        serde_json::json!({"kind": "task", "task_id": "task-2"})
    );
    assert_eq!(buckets(&task), vec![(0, 0), (1, 1)]);
    let session = report_json(&db, &["--session", "s1"]);
    assert_eq!(session["turns"]["turns"], 5);
    let window = report_json(
        &db,
        &[
            "--since",
            "2026-08-10T09:01:40Z",
            "--until",
            "2026-08-10T09:01:42Z",
        ],
    );
    assert_eq!(window["scope"]["kind"], "window");
    assert_eq!(buckets(&window), vec![(0, 1), (1, 1)], "t-zero and t-one");
    let dated = report_json(&db, &["--since", "2026-08-11"]);
    assert_eq!(dated["turns"]["turns"], 0);
}

#[test]
fn contradictory_scopes_are_refused() {
    let db = populated();
    let url = db.url();
    let both = fanout(&["report", "--db", &url, "--task", "a", "--session", "b"]);
    assert_eq!(both.status.code(), Some(64), "a usage error");
    assert!(String::from_utf8_lossy(&both.stderr).contains("cannot be used with"));
    let empty = fanout(&[
        "report",
        "--db",
        &url,
        "--since",
        "2026-08-11",
        "--until",
        "2026-08-10",
    ]);
    assert_eq!(empty.status.code(), Some(64), "a usage error");
    assert!(String::from_utf8_lossy(&empty.stderr).contains("window is empty"));
    let garbage = fanout(&["report", "--db", &url, "--since", "yesterday"]);
    assert_eq!(garbage.status.code(), Some(64), "a usage error");
    assert!(String::from_utf8_lossy(&garbage.stderr).contains("not a timestamp: \"yesterday\""));
}

/// A minimal RFC 4180 reader: enough to prove the output is one well-formed table.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    assert!(
        !quoted && field.is_empty() && row.is_empty(),
        "CSV ends cleanly"
    );
    rows
}

#[test]
fn csv_is_one_tidy_table() {
    let db = populated();
    let text = stdout(&fanout(&["report", "--db", &db.url(), "--format", "csv"]));
    let rows = parse_csv(&text);
    assert_eq!(rows[0], vec!["section", "key", "value"]);
    assert!(rows.iter().all(|r| r.len() == 3), "three fields everywhere");
    let value = |section: &str, key: &str| {
        rows.iter()
            .find(|r| r[0] == section && r[1] == key)
            .map(|r| r[2].clone())
            .unwrap_or_else(|| panic!("no row {section},{key}"))
    };
    assert_eq!(value("fanout", "0"), "1");
    assert_eq!(value("fanout", "3"), "1");
    assert_eq!(value("unknown_fanout", "turns"), "2");
    assert_eq!(value("total_tokens", "unreported"), "6");
    assert_eq!(
        value("duration_ms", "mean"),
        "",
        "nothing reported: no figure, not 0"
    );
    assert_eq!(value("by_model", ODD_MODEL), "1", "quoted and intact");
    assert_eq!(value("by_type", "(unreported)"), "2", "r3 and x");
    assert_eq!(value("provenance", "backfill"), "2");
}

#[test]
fn html_is_one_self_contained_page_with_an_svg_chart() {
    let db = populated();
    let page_path = db.path.with_file_name("report.html");
    let page_arg = page_path.display().to_string();
    let output = fanout(&["report", "--db", &db.url(), "--html", &page_arg]);
    assert!(
        stdout(&output).contains("FAN-OUT PER TURN"),
        "stdout keeps the table"
    );
    let page = std::fs::read_to_string(Path::new(&page_path)).expect("the page was written");
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("<svg") && page.contains("</svg>"));
    assert!(
        page.contains("url(#hatch)"),
        "the unknown bar is drawn apart"
    );
    assert!(page.contains("<style>"));
    for external in ["<script", "<link", " src=", "href=", "http://", "https://"] {
        assert!(
            !page.contains(external),
            "external or active content: {external}"
        );
    }
    assert!(page.contains("gpt,&quot;5&quot;&lt;script&gt;"), "escaped");
    assert!(page.contains("reviewer") && page.contains("(unreported)"));
    assert!(page.contains("never counted as 0"));
}

#[test]
fn report_on_a_missing_database_fails_without_creating_it() {
    let db = Db::new();
    let output = fanout(&["report", "--db", &db.url()]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "a failed command, not a usage error"
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("does not exist"));
    assert!(!db.path.exists());
}

fn health(db_url: &str, json: bool) -> (Option<i32>, String, String) {
    let mut args = vec!["health", "--db", db_url];
    if json {
        args.extend(["--format", "json"]);
    }
    let output = fanout(&args);
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn health_is_healthy_with_exit_zero() {
    let db = Db::new();
    block_on(async {
        let store = db.open().await;
        session(&store, "s1", "task-1").await;
        turn(&store, "t1", "s1", "task-1", 1).await;
        subagent_message(&store, "live-1", "t1", Timestamp::now()).await;
        store
            .upsert_subagent(&SubagentRecord {
                task_session_id: "s1".into(),
                task_id: "task-1".into(),
                tool_call_id: "live-1".into(),
                ..Default::default()
            })
            .await
            .expect("subagent");
        store.close().await;
    });
    let (code, text, _) = health(&db.url(), false);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("healthy"));
    let (code, json, _) = health(&db.url(), true);
    assert_eq!(code, Some(0));
    let json: serde_json::Value = serde_json::from_str(&json).expect("health JSON");
    assert_eq!(json["verdict"], "healthy");
    assert_eq!(json["exit_status"], 0);
    assert_eq!(json["shortfall"], 0);
    assert!(json["last_observed_at"].is_string());
    assert!(json["capture_since"].is_string());
}

#[test]
fn health_reports_a_shortfall_with_exit_one() {
    let db = Db::new();
    block_on(async {
        let store = db.open().await;
        session(&store, "s1", "task-1").await;
        turn(&store, "t1", "s1", "task-1", 1).await;
        // A recorded launch with a row, and one the writer missed.
        subagent_message(&store, "seen", "t1", Timestamp::now()).await;
        store
            .upsert_subagent(&SubagentRecord {
                task_session_id: "s1".into(),
                task_id: "task-1".into(),
                tool_call_id: "seen".into(),
                ..Default::default()
            })
            .await
            .expect("subagent");
        subagent_message(&store, "missed", "t1", Timestamp::now()).await;
        store.close().await;
    });
    let (code, text, _) = health(&db.url(), false);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("SHORTFALL"));
    let (code, json, _) = health(&db.url(), true);
    assert_eq!(code, Some(1));
    let json: serde_json::Value = serde_json::from_str(&json).expect("health JSON");
    assert_eq!(json["verdict"], "shortfall");
    assert_eq!(json["shortfall"], 1);
    assert_eq!(json["excess"], 0);
}

#[test]
fn health_without_writes_since_activation_is_no_verdict_with_exit_two() {
    let db = Db::new();
    block_on(async { db.open().await.close().await });
    let (code, text, _) = health(&db.url(), false);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("nothing written since activation"));
    let (code, json, _) = health(&db.url(), true);
    assert_eq!(code, Some(2));
    let json: serde_json::Value = serde_json::from_str(&json).expect("health JSON");
    assert_eq!(json["verdict"], "no_verdict");
    assert!(json["last_observed_at"].is_null());
}

/// Capture never activated (its backfill step failed, or the keys are gone): `health`
/// says so with exit 2, and neither it nor `report` activates or backfills anything.
#[test]
fn health_on_a_never_activated_database_is_no_verdict_and_changes_nothing() {
    let db = Db::new();
    let keys = "SELECT COUNT(*) FROM fanout_meta WHERE key LIKE 'subagent_context_%'";
    block_on(async {
        let store = db.open().await;
        session(&store, "s1", "task-1").await;
        turn(&store, "t1", "s1", "task-1", 1).await;
        subagent_message(&store, "pending", "t1", at(5)).await;
        store
            .execute_raw("DELETE FROM fanout_meta WHERE key LIKE 'subagent_context_%'")
            .await
            .expect("remove the activation keys");
        store.close().await;
    });
    let (code, text, stderr) = health(&db.url(), false);
    assert_eq!(code, Some(2), "{text}{stderr}");
    assert!(text.contains("capture was never activated"), "{text}");
    assert!(text.contains("(not activated)"), "{text}");
    let report = fanout(&["report", "--db", &db.url(), "--format", "json"]);
    assert!(report.status.success(), "{}", stdout(&report));
    block_on(async {
        let store = db.open_read_only().await;
        assert_eq!(
            store.query_i64(keys).await.expect("keys"),
            0,
            "not activated"
        );
        assert_eq!(
            store.counts().await.expect("counts").subagents,
            0,
            "not backfilled"
        );
        store.close().await;
    });
}

#[test]
fn health_errors_exit_three_with_one_line() {
    let missing = Db::new();
    for url in [
        "bogus://x".to_owned(),
        missing.url(),
        "postgres://nobody@127.0.0.1:1/none".to_owned(),
    ] {
        let (code, _, stderr) = health(&url, false);
        assert_eq!(code, Some(3), "{url}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{url}: {stderr}");
        assert!(stderr.starts_with("fanout health: "), "{stderr}");
    }
    assert!(!missing.path.exists(), "health never creates a database");
}

#[test]
fn usage_errors_never_look_like_a_verdict() {
    let output = fanout(&["health", "--no-such-flag"]);
    let code = output.status.code();
    assert_eq!(
        code,
        Some(64),
        "a usage error must not read as healthy, shortfall, no verdict or check failure"
    );
}
