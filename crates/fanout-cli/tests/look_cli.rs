//! `fanout sessions`, `fanout show` and the usage part of `fanout report`, as a user
//! runs them: the real binary on a SQLite file written through the store API, bad
//! input included (unknown and ambiguous ids, no turns, 200 subagents, hostile text,
//! a read-only file, a database another process is writing).

mod look_support;

use look_support::*;
use serde_json::Value;

#[test]
fn sessions_lists_every_session_newest_first_with_cost() {
    let db = fixture();
    let text = stdout(&fanout(&["sessions", "--db", &db.url()]));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("SESSION"), "{text}");
    assert!(lines[1].starts_with("bbbb3333"), "newest first: {text}");
    assert!(lines[3].starts_with("aaaa1111"), "{text}");
    assert!(
        lines[3].contains("claude"),
        "harness from the agent command: {text}"
    );
    assert!(
        text.contains("have no known price"),
        "unpriced named: {text}"
    );
    let json: Value = serde_json::from_slice(
        &fanout(&["sessions", "--db", &db.url(), "--format", "json"]).stdout,
    )
    .unwrap();
    let sessions = json["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 3);
    let tree = sessions.iter().find(|s| s["id"] == TREE).unwrap();
    assert_eq!(tree["subagents"], 3);
    assert_eq!(tree["async_subagents"], 1);
    assert_eq!(tree["unsettled_subagents"], 1);
    assert_eq!(tree["usage"]["responses"], 4);
    assert_eq!(tree["usage"]["cost"]["unpriced_responses"], 1);
    assert_eq!(
        tree["usage"]["cost"]["unpriced_models"],
        serde_json::json!(["mock-model"])
    );
    // own $3 + $0.15 output; a $3; b $1 + $5 (haiku, dated id); cache reads 4 x 100.
    let usd = tree["usage"]["cost"]["usd"].as_f64().unwrap();
    let expected = 3.0 + 0.15 + 3.0 + 6.0 + 100.0 * (0.30 * 2.0 + 0.10) / 1e6;
    assert!((usd - expected).abs() < 1e-9, "{usd} vs {expected}");
    let filtered = stdout(&fanout(&[
        "sessions",
        "--db",
        &db.url(),
        "--task",
        "task-wide",
    ]));
    assert_eq!(
        filtered.lines().filter(|l| l.starts_with("bbbb")).count(),
        1
    );
    assert!(!filtered.contains("aaaa1111"));
}

#[test]
fn show_draws_the_tree_and_the_timeline() {
    let db = fixture();
    let text = stdout(&fanout(&["show", "--db", &db.url(), "aaaa1"]));
    assert!(text.contains("session aaaa1111"), "{text}");
    assert!(text.contains("├─ reviewer: review the parser"), "{text}");
    assert!(
        text.contains("│  └─ explore: find the grammar"),
        "nested under its parent: {text}"
    );
    assert!(text.contains("└─ general-purpose"), "{text}");
    assert!(text.contains("[async, unsettled, unpriced]"), "{text}");
    assert!(
        text.contains("$3.00 / $9.00"),
        "own cost of a (sonnet 1M input): {text}"
    );
    assert!(
        text.contains("(reported 1.2k)"),
        "reported beside measured: {text}"
    );
    assert!(text.contains("timeline of turn 1"), "{text}");
    assert!(
        text.contains('▸'),
        "the unsettled bar is drawn open: {text}"
    );
    let timeline: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("timeline"))
        .skip(2)
        .collect();
    assert_eq!(timeline.len(), 3, "one bar per invocation: {text}");
    for line in text.lines() {
        assert!(
            unicode_width::UnicodeWidthStr::width(line) <= 100,
            "fitted to COLUMNS=100: {line:?}"
        );
    }
    // By the harness's own session id, and one turn.
    let by_harness = stdout(&fanout(&[
        "show",
        "--db",
        &db.url(),
        TREE_HARNESS_ID,
        "--turn",
        "1",
    ]));
    assert!(by_harness.contains("review the parser"));
    let missing = fanout(&["show", "--db", &db.url(), TREE, "--turn", "7"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("has no turn 7"));
}

#[test]
fn show_json_has_the_stable_fields() {
    let db = fixture();
    let json: Value = serde_json::from_slice(
        &fanout(&["show", "--db", &db.url(), TREE, "--format", "json"]).stdout,
    )
    .unwrap();
    assert_eq!(json["harness"], "claude");
    let session = &json["session"];
    assert_eq!(session["session"]["id"], TREE);
    assert_eq!(session["invocations"], 3);
    let turn = &session["turns"][0];
    assert_eq!(turn["number"], 1);
    let a = &turn["invocations"][0];
    assert_eq!(a["tool_call_id"], "call-a");
    assert_eq!(a["own"]["cost"]["usd"], 3.0 + 100.0 * 0.30 / 1e6);
    assert_eq!(a["with_descendants"]["responses"], 2);
    assert_eq!(a["children"][0]["tool_call_id"], "call-b");
    assert_eq!(session["usage"]["subagents"]["responses"], 3);
    assert!(session["usage"]["subagent_token_share"].as_f64().unwrap() > 0.5);
}

#[test]
fn unknown_and_ambiguous_ids_are_named() {
    let db = fixture();
    let unknown = fanout(&["show", "--db", &db.url(), "zzzz"]);
    assert!(!unknown.status.success());
    let message = String::from_utf8_lossy(&unknown.stderr);
    assert!(message.contains("no session matches \"zzzz\""), "{message}");
    let ambiguous = fanout(&["show", "--db", &db.url(), "aaaa"]);
    assert!(!ambiguous.status.success());
    let message = String::from_utf8_lossy(&ambiguous.stderr);
    assert!(message.contains("ambiguous: 2 sessions match"), "{message}");
    assert!(
        message.contains(TREE) && message.contains(EMPTY),
        "candidates named: {message}"
    );
    assert!(!message.contains("panicked"));
}

#[test]
fn a_session_with_no_turns_says_so() {
    let db = fixture();
    let text = stdout(&fanout(&["show", "--db", &db.url(), EMPTY]));
    assert!(text.contains("no turns and no subagents"), "{text}");
}

#[test]
fn a_turn_with_200_subagents_has_200_bars() {
    let db = fixture();
    let text = stdout(&fanout(&["show", "--db", &db.url(), WIDE]));
    let tree = text.lines().filter(|l| l.contains("worker: part")).count();
    assert_eq!(tree, 400, "200 tree lines and 200 timeline bars");
    let html = db.dir.path().join("wide.html");
    stdout(&fanout(&[
        "show",
        "--db",
        &db.url(),
        WIDE,
        "--html",
        html.to_str().unwrap(),
    ]));
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("<rect class=\"bar").count(), 200);
}

#[test]
fn hostile_text_is_escaped_never_interpreted() {
    let db = fixture();
    let output = fanout_wide(&["show", "--db", &db.url(), TREE]);
    let text = stdout(&output);
    assert!(
        !output.stdout.contains(&0x1b),
        "no escape byte reaches the terminal when not a TTY"
    );
    assert!(text.contains("\\u{1b}[2J"), "shown as text: {text}");
    let html = db.dir.path().join("tree.html");
    stdout(&fanout(&[
        "show",
        "--db",
        &db.url(),
        TREE,
        "--html",
        html.to_str().unwrap(),
    ]));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(!page.contains("<script>alert"), "markup escaped");
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;")
            || page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{page}"
    );
    assert!(!page.contains('\u{1b}'));
    assert!(
        !page.contains("<script"),
        "a written page is self-contained, with no script"
    );
}

#[test]
fn a_read_only_database_file_is_read_and_left_alone() {
    use std::os::unix::fs::PermissionsExt;
    let db = fixture();
    let before = database_bytes(&db.path);
    std::fs::set_permissions(&db.path, std::fs::Permissions::from_mode(0o444)).unwrap();
    for args in [
        vec!["sessions", "--db", &db.url()],
        vec!["show", "--db", &db.url(), TREE],
        vec!["report", "--db", &db.url()],
    ] {
        let output = fanout(&args);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert_eq!(database_bytes(&db.path), before, "nothing modified");
    let missing = fanout(&[
        "sessions",
        "--db",
        &format!("sqlite://{}/nope.db", db.dir.path().display()),
    ]);
    assert!(!missing.status.success());
    assert!(!String::from_utf8_lossy(&missing.stderr).contains("panicked"));
}

#[test]
fn a_database_another_process_is_writing_is_read_consistently() {
    let db = fixture();
    let url = db.url();
    let writer = std::thread::spawn(move || {
        block_on(async {
            let store = fanout_store::SqlStore::open(&url).await.unwrap();
            for i in 0..40 {
                let call = format!("late-{i}");
                fanout_store::Store::upsert_subagent(
                    &store,
                    &invocation(TREE, &call, None, "late", "written meanwhile", 30, None),
                )
                .await
                .unwrap();
            }
            store.close().await;
        });
    });
    for _ in 0..5 {
        let output = fanout(&["show", "--db", &db.url(), TREE, "--format", "json"]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let json: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert!(json["session"]["invocations"].as_u64().unwrap() >= 3);
    }
    writer.join().unwrap();
    let json: Value = serde_json::from_slice(
        &fanout(&["show", "--db", &db.url(), TREE, "--format", "json"]).stdout,
    )
    .unwrap();
    assert_eq!(json["session"]["invocations"], 43);
}

#[test]
fn the_report_tells_usage_in_every_format() {
    let db = fixture();
    let table = stdout(&fanout(&["report", "--db", &db.url()]));
    assert!(table.contains("USAGE (measured from the ledger"), "{table}");
    assert!(table.contains("Usage per subagent type"), "{table}");
    assert!(
        table.contains("unpriced: 1 response(s) of mock-model"),
        "{table}"
    );
    let json: Value =
        serde_json::from_slice(&fanout(&["report", "--db", &db.url(), "--format", "json"]).stdout)
            .unwrap();
    let usage = &json["usage"];
    assert_eq!(usage["total"]["total"]["responses"], 4);
    assert_eq!(usage["by_model"].as_array().unwrap().len(), 3);
    let reviewer = usage["by_type"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["key"] == "reviewer")
        .unwrap();
    assert_eq!(reviewer["with_descendants"]["responses"], 2);
    let a = usage["by_invocation"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["tool_call_id"] == "call-a")
        .unwrap();
    assert_eq!(a["reported_total_tokens"], 1_234);
    assert_eq!(a["own"]["input_tokens"], 1_000_000);
    let csv = stdout(&fanout(&["report", "--db", &db.url(), "--format", "csv"]));
    assert!(
        csv.contains(&format!(
            "usage_by_invocation,{TREE}/call-a.own.input_tokens,1000000"
        )),
        "{csv}"
    );
    assert!(
        csv.contains("usage_by_model,mock-model.cost_usd,\n"),
        "unpriced is empty, never 0: {csv}"
    );
    let html = db.dir.path().join("report.html");
    stdout(&fanout(&[
        "report",
        "--db",
        &db.url(),
        "--html",
        html.to_str().unwrap(),
    ]));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Usage per invocation"));
    assert!(page.contains("Fan-out"));
    assert!(!page.contains("<script>alert"));
}

#[test]
fn an_override_price_file_prices_what_was_unpriced() {
    let db = fixture();
    let prices = db.dir.path().join("prices.json");
    std::fs::write(&prices, r#"{"models": {"mock-model": {"input": 1000000, "output": 0, "cache_write": 0, "cache_read": 0}}}"#).unwrap();
    let json: Value = serde_json::from_slice(
        &fanout(&[
            "sessions",
            "--db",
            &db.url(),
            "--prices",
            prices.to_str().unwrap(),
            "--format",
            "json",
        ])
        .stdout,
    )
    .unwrap();
    let tree = json["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == TREE)
        .unwrap()
        .clone();
    assert_eq!(tree["usage"]["cost"]["unpriced_responses"], 0);
    let bad = db.dir.path().join("bad.json");
    std::fs::write(&bad, "not json").unwrap();
    let output = fanout(&[
        "sessions",
        "--db",
        &db.url(),
        "--prices",
        bad.to_str().unwrap(),
    ]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not a price table"));
}
