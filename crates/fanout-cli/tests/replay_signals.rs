//! `fanout replay record` and `fanout replay serve --cassette` stopped by real
//! signals (SIGINT, SIGTERM through `kill`) as real processes: `record`
//! finishes its files, an exchange still streaming included, and exits 0;
//! `serve` exits 0, or 1 when a request missed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A scripted upstream on a thread: `POST /v1/messages` with `"stream":false`
/// answers a JSON message; a streamed one sends one event and then holds the
/// response open (an answer still streaming when the signal comes).
fn start_upstream() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || answer(stream));
        }
    });
    url
}

fn answer(mut stream: TcpStream) {
    let body = read_request(&mut stream);
    if body.contains("\"stream\":true") {
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
              event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
        );
        let _ = stream.flush();
        std::thread::sleep(Duration::from_secs(60));
        return;
    }
    let json = r#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":1,"output_tokens":1}}"#;
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{json}",
        json.len()
    );
}

/// Reads one HTTP request; returns its body.
fn read_request(stream: &mut TcpStream) -> String {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    String::from_utf8_lossy(&body).into_owned()
}

/// Sends `body` to `url/v1/messages`; returns (status, body). With `wait`
/// false, returns as soon as the response head arrived.
fn post(url: &str, body: &str, wait: bool) -> (u16, String, TcpStream) {
    let addr = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "POST /v1/messages HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         x-api-key: sk-ant-SIGNAL-TEST-SECRET\r\nx-claude-code-session-id: s-1\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut text = String::new();
    if wait {
        let _ = reader.read_to_string(&mut text);
    }
    (status, text, stream)
}

fn request(user: &str, stream: bool) -> String {
    format!(
        r#"{{"model":"m","stream":{stream},"system":"You are Claude.","messages":[{{"role":"user","content":"{user}"}}]}}"#
    )
}

/// A fanout child and the URL its banner names.
fn start(args: &[&str], dir: &Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fanout"))
        .args(args)
        .arg(dir)
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("FANOUT_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fanout");
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in the banner {first:?}"))
        .to_string();
    (child, url)
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name}");
}

/// Waits (at most 20 s) for the exit; (status, stdout rest, stderr).
fn wait(mut child: Child) -> (ExitStatus, String, String) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("fanout did not exit after the signal");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    let mut err = String::new();
    let _ = child.stdout.take().unwrap().read_to_string(&mut out);
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    (status, out, err)
}

#[test]
fn record_finishes_its_files_on_sigint_and_sigterm() {
    let upstream = start_upstream();
    for name in ["INT", "TERM"] {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("cassette");
        let (child, url) = start(
            &["replay", "record", "--upstream", &upstream, "--out"],
            &out,
        );
        let (status, text, _) = post(&url, &request("FANOUT-PARENT hello", false), true);
        assert_eq!(status, 200, "{text}");
        assert!(text.contains("\"text\":\"hi\""), "{text}");
        // An answer still streaming when the signal comes.
        let (status, _, open) = post(&url, &request("FANOUT-CHILD streaming", true), false);
        assert_eq!(status, 200);
        signal(&child, name);
        let (status, stdout, stderr) = wait(child);
        drop(open);
        assert_eq!(status.code(), Some(0), "SIG{name}: {stdout}{stderr}");
        assert!(
            stdout.contains("recorded 2 exchange(s)"),
            "SIG{name}: {stdout}{stderr}"
        );
        let index: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("index.json")).unwrap())
                .unwrap();
        let exchanges: usize = index["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["exchanges"].as_u64().unwrap() as usize)
            .sum();
        assert_eq!(exchanges, 2, "SIG{name}: {index}");
        let mut interrupted = 0;
        for entry in std::fs::read_dir(&out).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(!text.contains("SIGNAL-TEST-SECRET"), "{}", path.display());
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{}", path.display());
            }
            for line in text
                .lines()
                .filter(|_| path.extension().is_some_and(|e| e == "jsonl"))
            {
                let exchange: Value = serde_json::from_str(line).unwrap();
                if exchange["truncated"] == true {
                    interrupted += 1;
                    assert!(exchange["failure"].is_string(), "{exchange}");
                }
            }
        }
        assert_eq!(
            interrupted, 1,
            "SIG{name}: the streaming exchange is kept, cut short"
        );
    }
}

#[test]
fn serve_exits_0_on_a_signal_and_1_after_a_miss() {
    let upstream = start_upstream();
    let tmp = tempfile::tempdir().unwrap();
    let cassette = tmp.path().join("cassette");
    let (child, url) = start(
        &["replay", "record", "--upstream", &upstream, "--out"],
        &cassette,
    );
    let (status, recorded, _) = post(&url, &request("FANOUT-PARENT hello", false), true);
    assert_eq!(status, 200);
    signal(&child, "INT");
    assert_eq!(wait(child).0.code(), Some(0));

    for (name, miss) in [
        ("TERM", false),
        ("INT", false),
        ("TERM", true),
        ("INT", true),
    ] {
        let (child, url) = start(&["replay", "serve", "--cassette"], &cassette);
        let (status, text, _) = post(&url, &request("FANOUT-PARENT hello", false), true);
        assert_eq!(status, 200, "{text}");
        // The recorded answer (the proxy streamed it back chunked).
        assert!(recorded.contains(r#""text":"hi""#), "{recorded}");
        assert!(text.contains(r#"{"id":"msg_1","type":"message""#), "{text}");
        if miss {
            // One more call than was recorded.
            let (status, text, _) = post(&url, &request("FANOUT-PARENT hello", false), true);
            assert_eq!(status, 599, "{text}");
            assert!(text.contains("fanout_replay_miss"), "{text}");
        }
        signal(&child, name);
        let (status, stdout, stderr) = wait(child);
        let want = if miss { 1 } else { 0 };
        assert_eq!(status.code(), Some(want), "SIG{name}: {stdout}{stderr}");
        assert!(stdout.contains("1/1 exchange(s) served"), "{stdout}");
        assert_eq!(stderr.contains("MISS"), miss, "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
