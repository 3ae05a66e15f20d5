//! The web UI in a real browser: Debian's chromium, headless, driven through the
//! DevTools protocol (a WebSocket on loopback), against a running `fanout serve` on a
//! fixture database. The sessions list shows every session; a session page shows
//! every invocation's description and exactly one timeline bar per invocation; a row
//! written while the page is open appears on it without a reload. Under `CI=true` a
//! missing chromium is a failure, never a skip.

mod look_support;

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use look_support::*;
use serde_json::{Value, json};
use tungstenite::{Message, WebSocket, stream::MaybeTlsStream};

/// Kills a child process when dropped (by its own pid), so a failing assertion leaves
/// nothing running.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|name| {
        Command::new(name)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// `fanout serve` on a free loopback port; returns it and its base URL.
fn serve(db: &Fixture) -> (Running, String) {
    let stats = db.dir.path().join("stats");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fanout"))
        .args([
            "serve",
            "--db",
            &db.url(),
            "--listen",
            "127.0.0.1:0",
            "--stats-dir",
        ])
        .arg(&stats)
        .env_remove("FANOUT_DATABASE_URL")
        .env_remove("FANOUT_PRICES")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start fanout serve");
    let stdout = child.stdout.take().expect("stdout");
    let running = Running(child);
    let mut banner = String::new();
    BufReader::new(stdout)
        .read_line(&mut banner)
        .expect("banner");
    let start = banner.find("http://").expect("a URL in the banner");
    let url: String = banner[start..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    (running, url.trim_end_matches('/').to_owned())
}

/// A DevTools session on one page.
struct Browser {
    _process: Running,
    socket: WebSocket<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    session: Option<String>,
}

impl Browser {
    fn launch(binary: &str, profile: &Path) -> Browser {
        let process = Running(
            Command::new(binary)
                .args([
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--remote-debugging-port=0",
                    "--window-size=1280,900",
                ])
                .arg(format!("--user-data-dir={}", profile.display()))
                .arg("about:blank")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start chromium"),
        );
        // Chromium writes its port and browser endpoint here once it listens.
        let port_file = profile.join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(30);
        let endpoint = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                let mut lines = text.lines();
                if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                    break format!("ws://127.0.0.1:{port}{path}");
                }
            }
            assert!(
                Instant::now() < deadline,
                "chromium never opened its DevTools port"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let (socket, _) = tungstenite::connect(endpoint.as_str()).expect("DevTools WebSocket");
        let mut browser = Browser {
            _process: process,
            socket,
            next_id: 0,
            session: None,
        };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let target_id = target["targetId"].as_str().expect("targetId").to_owned();
        let attached = browser.call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        );
        browser.session = Some(
            attached["sessionId"]
                .as_str()
                .expect("sessionId")
                .to_owned(),
        );
        browser
    }

    /// One DevTools command; its result (events in between are skipped).
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = &self.session {
            message["sessionId"] = json!(session);
        }
        self.socket
            .send(Message::text(message.to_string()))
            .expect("send to chromium");
        loop {
            let reply = self.socket.read().expect("read from chromium");
            let Message::Text(text) = reply else { continue };
            let value: Value = serde_json::from_str(text.as_str()).expect("DevTools JSON");
            if value["id"] == json!(id) {
                assert!(value.get("error").is_none(), "{method} failed: {value}");
                return value["result"].clone();
            }
        }
    }

    /// The value of a JavaScript expression in the page.
    fn eval(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        );
        result["result"]["value"].clone()
    }

    fn open(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url}));
        self.until(&format!(
            "document.readyState === 'complete' && location.href === {}",
            json!(url)
        ));
    }

    /// Waits (10 s at most) until `condition` is true in the page.
    fn until(&mut self, condition: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.eval(condition) != json!(true) {
            assert!(
                Instant::now() < deadline,
                "never true in the page: {condition}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn the_web_ui_in_a_real_browser() {
    let Some(binary) = chromium() else {
        fanout_types::skip_unless_ci(
            "the browser test",
            "no chromium on PATH (.ci/run installs Debian's chromium)",
        );
        return;
    };
    let db = fixture();
    let (_server, base) = serve(&db);
    let profile = tempfile::tempdir().expect("profile directory");
    let mut browser = Browser::launch(binary, profile.path());

    // The sessions list shows every session.
    browser.open(&format!("{base}/"));
    let listed = browser
        .eval("[...document.querySelectorAll('tr.session')].map(r => r.dataset.session).sort()");
    assert_eq!(listed, json!([TREE, EMPTY, WIDE]));
    browser.open(&format!("{base}/?task=task-wide"));
    assert_eq!(
        browser.eval("document.querySelectorAll('tr.session').length"),
        json!(1)
    );

    // A session page: every invocation's description, one bar per invocation.
    browser.open(&format!("{base}/sessions/{TREE}"));
    let descriptions = browser.eval(
        "[...document.querySelectorAll('tr.invocation .description')].map(e => e.textContent)",
    );
    let cleaned_hostile = HOSTILE.replace('\u{1b}', "\\u{1b}");
    assert_eq!(
        descriptions,
        json!(["review the parser", "find the grammar", cleaned_hostile])
    );
    assert_eq!(
        browser.eval("document.querySelectorAll('script:not([src])').length"),
        json!(1),
        "only fanout's own script; the hostile one stayed text"
    );
    let bars = browser.eval("[...document.querySelectorAll('rect.bar')].map(r => r.dataset.call)");
    assert_eq!(bars, json!(["call-a", "call-b", "call-c"]));
    assert_eq!(
        browser.eval("document.querySelectorAll('rect.bar.open').length"),
        json!(1)
    );

    // A row written while the page is open appears without a reload: a marker set on
    // the window survives (a reload would clear it).
    browser.eval("window.stillThisPage = true");
    block_on(async {
        let store = fanout_store::SqlStore::open(&db.url()).await.unwrap();
        fanout_store::Store::upsert_subagent(
            &store,
            &invocation(
                TREE,
                "call-live",
                None,
                "reviewer",
                "appeared live",
                50,
                None,
            ),
        )
        .await
        .unwrap();
        store.close().await;
    });
    browser.until("document.querySelectorAll('rect.bar').length === 4");
    assert_eq!(
        browser.eval("window.stillThisPage === true"),
        json!(true),
        "no reload"
    );
    let descriptions = browser.eval(
        "[...document.querySelectorAll('tr.invocation .description')].map(e => e.textContent)",
    );
    assert!(
        descriptions
            .as_array()
            .unwrap()
            .contains(&json!("appeared live"))
    );

    // The report page renders, and /metrics carries the database's figures.
    browser.open(&format!("{base}/report"));
    assert_eq!(
        browser.eval("document.querySelectorAll('table.by_invocation tbody tr').length"),
        json!(204)
    );
    browser.open(&format!("{base}/metrics"));
    let metrics = browser.eval("document.body.innerText");
    let metrics = metrics.as_str().unwrap();
    assert!(metrics.contains("fanout_db_subagent_invocations{harness=\"claude\",model=\"claude-sonnet-4-5\",subagent_type=\"reviewer\"} 2"), "{metrics}");
    assert!(
        metrics.contains(
            "fanout_db_usage_unpriced_responses{harness=\"claude\",model=\"mock-model\"} 1"
        ),
        "{metrics}"
    );
}
