//! Recording through `replay record`'s proxy and replaying the cassette, over
//! real loopback sockets, against a scripted mock upstream (the model
//! provider is the only thing mocked): all three wire formats, streaming and
//! not, identity headers and header-less content, interleaving, misses, and
//! bad input.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fanout_harness::cassette::Cassette;
use fanout_harness::cassette::record::{RecordOptions, RunningRecorder};
use fanout_harness::cassette::serve::{CassetteServer, RunningCassetteServer};
use serde_json::{Value, json};
use tokio::sync::Notify;

use support::*;
#[tokio::test]
async fn a_nested_claude_run_records_and_replays_each_conversation_on_its_own() {
    let mock = Arc::new(Mock::default());
    let (upstream, mock_task) = start_mock(mock.clone()).await;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cassette");
    let recorded_ws = "/tmp/fanout-rec-1/workspace";
    let calls = claude_run("S-rec", "agent-a-rec", "agent-b-rec", recorded_ws);
    let answers = record(&calls, &out, &upstream, recorded_ws).await;
    assert!(
        answers.iter().all(|(status, _)| *status == 200),
        "{answers:?}"
    );
    assert!(
        answers[2]
            .1
            .contains("reply to FANOUT-CHILD-A read at step 0")
    );

    // Nothing secret is written; files are private.
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for secret in [
            KEY,
            "SECRET-COOKIE",
            "authorization",
            "x-api-key",
            "set-cookie",
        ] {
            assert!(
                !text
                    .to_ascii_lowercase()
                    .contains(&secret.to_ascii_lowercase()),
                "{} holds {secret}",
                path.display()
            );
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", path.display());
        }
    }
    let cassette = Cassette::load(&out).unwrap();
    let rungs: Vec<&str> = cassette
        .index
        .identities
        .iter()
        .map(|i| i.rung.as_str())
        .collect();
    assert_eq!(rungs, ["claude-session", "claude-agent", "claude-agent"]);
    assert_eq!(
        cassette.index.conversations.len(),
        4,
        "{:#?}",
        cassette.index.conversations
    );
    let exchanges: Vec<usize> = cassette
        .index
        .conversations
        .iter()
        .map(|c| c.exchanges)
        .collect();
    assert_eq!(exchanges, [2, 1, 2, 2]);

    // Replay with new ids, another workspace and another interleaving, the mock gone.
    mock_task.abort();
    let live_ws = "/tmp/fanout-live-2/workspace";
    let server = CassetteServer::new(Cassette::load(&out).unwrap(), &declared(live_ws)).unwrap();
    let running = RunningCassetteServer::start(server.clone(), "127.0.0.1:0")
        .await
        .unwrap();
    let live = claude_run("S-live", "agent-x", "agent-y", live_ws);
    let client = client();
    // Child B's calls first, then A's, the title last.
    let order = [0, 3, 4, 2, 5, 6, 1];
    for at in order {
        let (status, text) = send(&client, &running.base_url(), &live[at]).await;
        assert_eq!(
            (status, &text),
            (answers[at].0, &answers[at].1),
            "call {at}"
        );
    }
    assert!(server.binding().finished());
    assert!(server.binding().misses().is_empty());
    // One more parent call than was recorded: a loud miss.
    let extra = anthropic(
        claude("S-live", None),
        "You are Claude.",
        "FANOUT-PARENT go",
        2,
        true,
    );
    let (status, text) = send(&client, &running.base_url(), &extra).await;
    assert_eq!(status, 599);
    let miss: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(miss["fanout"]["rung"], "claude-session");
    assert!(
        miss["fanout"]["live"]
            .as_str()
            .unwrap()
            .starts_with("claude-session:S-live, root sha256:")
    );
    assert!(
        miss["error"]["message"]
            .as_str()
            .unwrap()
            .contains("request 8 (POST /v1/messages)"),
        "{miss}"
    );
    assert!(
        miss["fanout"]["closest"]["conversation"]
            .as_str()
            .unwrap()
            .starts_with("conversation-")
    );
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn responses_stream_through_as_they_arrive() {
    let hold = Arc::new(Notify::new());
    let mock = Arc::new(Mock {
        hold: Some(hold.clone()),
        ..Mock::default()
    });
    let (upstream, _mock_task) = start_mock(mock).await;
    let tmp = tempfile::tempdir().unwrap();
    let recorder = start_recorder(&upstream, &tmp.path().join("c"), BTreeMap::new()).await;
    let call = anthropic(Vec::new(), "sys", "hello", 0, true);
    let mut response = client()
        .post(format!("{}{}", recorder.base_url(), call.path))
        .header("x-api-key", KEY)
        .json(&call.body)
        .send()
        .await
        .unwrap();
    // The first event arrives while the upstream still holds the rest.
    let first = tokio::time::timeout(Duration::from_secs(10), response.chunk())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&first).starts_with("event: message_start"));
    hold.notify_one();
    let mut rest = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        rest.extend_from_slice(&chunk);
    }
    assert!(String::from_utf8_lossy(&rest).contains("message_stop"));
    recorder.finish().await.unwrap();
    let cassette = Cassette::load(&tmp.path().join("c")).unwrap();
    assert_eq!(
        cassette.index.conversations[0].identity, None,
        "header-less: identified by content"
    );
    assert!(
        cassette.index.conversations[0]
            .root
            .as_deref()
            .unwrap()
            .starts_with("sha256:")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_ended_exchanges_is_all_on_disk_before_finish() {
    let (upstream, _mock_task) = start_mock(Arc::new(Mock::default())).await;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    let recorder = start_recorder(&upstream, &out, BTreeMap::new()).await;
    const BURST: usize = 40;
    let call = anthropic(Vec::new(), "sys", "hello", 0, true);
    let requests = (0..BURST).map(|_| {
        let (base, call) = (recorder.base_url(), call.clone());
        tokio::spawn(async move { send(&client(), &base, &call).await })
    });
    for request in requests.collect::<Vec<_>>() {
        let (status, body) = request.await.unwrap();
        assert_eq!(status, 200);
        assert!(body.contains("message_stop"));
    }
    // Ends that came while a write was under way share a later write; the
    // last of them must still reach the disk, with no `finish` to force it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let on_disk = loop {
        let count = Cassette::load(&out)
            .ok()
            .map(|cassette| cassette.exchanges.iter().map(Vec::len).sum::<usize>());
        if count == Some(BURST) || std::time::Instant::now() > deadline {
            break count;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        on_disk,
        Some(BURST),
        "every ended exchange written without finish"
    );
    recorder.finish().await.unwrap();
    let cassette = Cassette::load(&out).unwrap();
    assert_eq!(cassette.exchanges.len(), 1, "one conversation");
    let mut seqs: Vec<u64> = cassette.exchanges[0].iter().map(|e| e.seq).collect();
    seqs.sort();
    assert_eq!(seqs, (1..=BURST as u64).collect::<Vec<_>>());
}

#[tokio::test]
async fn chat_completions_responses_and_json_answers_replay_byte_for_byte() {
    let mock = Arc::new(Mock::default());
    let (upstream, mock_task) = start_mock(mock).await;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cassette");
    let opencode = |session: &str, parent: Option<&str>, user: &str| Call {
        path: "/v1/chat/completions",
        headers: std::iter::once(("x-session-id", session.to_string()))
            .chain(parent.map(|p| ("x-parent-session-id", p.to_string())))
            .collect(),
        body: json!({"model": "m", "stream": true, "messages": [{"role": "system", "content": "You are opencode."}, {"role": "user", "content": user}]}),
    };
    let codex = |thread: &str, parent: Option<&str>, user: &str| Call {
        path: "/v1/responses",
        headers: [
            ("session-id", "root".to_string()),
            ("thread-id", thread.to_string()),
        ]
        .into_iter()
        .chain(parent.map(|p| ("x-codex-parent-thread-id", p.to_string())))
        .collect(),
        body: json!({"model": "m", "stream": true, "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": user}]}]}),
    };
    let plain = Call {
        path: "/v1/messages",
        headers: Vec::new(),
        body: json!({"model": "m", "stream": false, "messages": [{"role": "user", "content": "once"}]}),
    };
    let calls = vec![
        opencode("ses_p", None, "delegate"),
        opencode("ses_c", Some("ses_p"), "FANOUT-CHILD-TASK read"),
        codex("root", None, "spawn"),
        codex("t1", Some("root"), "FANOUT-CHILD-reader_a"),
        plain,
    ];
    let answers = record(&calls, &out, &upstream, "/w/x").await;
    mock_task.abort();
    let cassette = Cassette::load(&out).unwrap();
    let rungs: Vec<(&str, Option<&str>)> = cassette
        .index
        .identities
        .iter()
        .map(|i| (i.rung.as_str(), i.parent.as_deref()))
        .collect();
    assert_eq!(
        rungs,
        [
            ("opencode-session", None),
            ("opencode-session", Some("opencode-session:ses_p")),
            ("codex-thread", None),
            ("codex-thread", Some("codex-thread:root")),
        ]
    );
    let server = CassetteServer::new(cassette, &BTreeMap::new()).unwrap();
    let running = RunningCassetteServer::start(server, "127.0.0.1:0")
        .await
        .unwrap();
    let live = [
        opencode("ses_P2", None, "delegate"),
        opencode("ses_C2", Some("ses_P2"), "FANOUT-CHILD-TASK read"),
        codex("root2", None, "spawn"),
        codex("t2", Some("root2"), "FANOUT-CHILD-reader_a"),
        calls[4].clone(),
    ];
    let client = client();
    for (at, call) in live.iter().enumerate() {
        assert_eq!(
            send(&client, &running.base_url(), call).await,
            answers[at],
            "call {at}"
        );
    }
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_upstream_answers_502_and_is_recorded_as_a_failure() {
    // A port nothing listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    let calls = [
        anthropic(claude("S", None), "sys", "hi", 0, true),
        Call {
            path: "/v1/chat/completions",
            headers: Vec::new(),
            body: json!({"stream": true, "messages": [{"role": "user", "content": "x"}]}),
        },
    ];
    let answers = record(&calls, &out, &format!("http://{closed}"), "/w/x").await;
    assert_eq!(answers[0].0, 502);
    let anthropic_error: Value = serde_json::from_str(&answers[0].1).unwrap();
    assert_eq!(anthropic_error["type"], "error");
    assert!(
        anthropic_error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unreachable"),
        "{anthropic_error}"
    );
    let openai_error: Value = serde_json::from_str(&answers[1].1).unwrap();
    assert!(
        openai_error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unreachable")
    );
    let cassette = Cassette::load(&out).unwrap();
    let failure = cassette.exchanges[0][0].failure.clone().unwrap();
    assert!(
        failure.starts_with(&format!("upstream http://{closed} unreachable")),
        "{failure}"
    );
    // The failure replays as it happened.
    let server = CassetteServer::new(cassette, &BTreeMap::new()).unwrap();
    let running = RunningCassetteServer::start(server, "127.0.0.1:0")
        .await
        .unwrap();
    let replayed = send(
        &client(),
        &running.base_url(),
        &anthropic(claude("S2", None), "sys", "hi", 0, true),
    )
    .await;
    assert_eq!(replayed, answers[0]);
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn nothing_recorded_is_overwritten_without_force() {
    let mock = Arc::new(Mock::default());
    let (upstream, _task) = start_mock(mock).await;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    record(
        &[anthropic(Vec::new(), "s", "u", 0, true)],
        &out,
        &upstream,
        "/w/x",
    )
    .await;
    let before = std::fs::read(out.join("index.json")).unwrap();
    let options = |force| RecordOptions {
        upstream: upstream.clone(),
        out: out.clone(),
        force,
        declared: BTreeMap::new(),
    };
    let refused = RunningRecorder::start(options(false), "127.0.0.1:0")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.ends_with(
            "already holds a cassette (conversation-001.jsonl); pass --force to replace it"
        ) || refused.ends_with("already holds a cassette (index.json); pass --force to replace it"),
        "{refused}"
    );
    assert_eq!(std::fs::read(out.join("index.json")).unwrap(), before);
    let forced = RunningRecorder::start(options(true), "127.0.0.1:0")
        .await
        .unwrap();
    assert!(!out.join("index.json").exists(), "--force starts afresh");
    forced.finish().await.unwrap();
    for bad in ["ftp://x", "not a url", "http://"] {
        let err = RunningRecorder::start(
            RecordOptions {
                upstream: bad.into(),
                out: tmp.path().join("d"),
                force: false,
                declared: BTreeMap::new(),
            },
            "127.0.0.1:0",
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.starts_with(&format!("upstream {bad:?}: ")), "{err}");
    }
}

#[test]
fn broken_cassettes_are_reported_with_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let index = |conversations: &str| {
        format!(
            r#"{{"type":"fanout-cassette","version":1,"recordedAt":"x","upstream":"u","identities":[],"conversations":[{conversations}]}}"#
        )
    };
    let entry = r#"{"file":"conversation-001.jsonl","identity":null,"endpoint":"POST /v1/messages","root":null,"exchanges":1}"#;
    let exchange = r#"{"seq":1,"startedMs":0,"endedMs":1,"request":{"method":"POST","path":"/v1/messages","headers":[],"noBody":true},"response":{"status":200,"headers":[],"bodyText":"ok"}}"#;
    let load = || Cassette::load(dir).unwrap_err().to_string();
    let index_path = dir.join("index.json");
    let file = dir.join("conversation-001.jsonl");

    assert!(
        load().starts_with(&format!("{}: ", index_path.display())),
        "{}",
        load()
    );
    std::fs::write(
        &index_path,
        "{\n  \"type\": \"fanout-cassette\",\n  \"version\": 1,\n  oops\n}",
    )
    .unwrap();
    assert!(
        load().starts_with(&format!("{}:4: ", index_path.display())),
        "{}",
        load()
    );
    std::fs::write(&index_path, index(entry)).unwrap();
    assert_eq!(
        load(),
        format!(
            "{}: missing: index.json lists it as a conversation of 1 exchange(s)",
            file.display()
        )
    );
    std::fs::write(&file, format!("{exchange}\n{{\"seq\": \"two\"}}\n")).unwrap();
    assert!(
        load().starts_with(&format!("{}:2: ", file.display())),
        "{}",
        load()
    );
    std::fs::write(&file, format!("{exchange}\n{exchange}\n")).unwrap();
    assert_eq!(
        load(),
        format!(
            "{}: holds 2 exchange(s) but index.json says 1",
            file.display()
        )
    );
    std::fs::write(
        &index_path,
        index(&entry.replace("conversation-001.jsonl", "../escape.jsonl")),
    )
    .unwrap();
    assert!(
        load().contains("must be a plain file name beside the index"),
        "{}",
        load()
    );
    std::fs::write(
        &index_path,
        index(&entry.replace("\"identity\":null", "\"identity\":\"claude-agent:nobody\"")),
    )
    .unwrap();
    assert!(
        load().ends_with(
            "conversation-001.jsonl names identity claude-agent:nobody, which is not listed"
        ),
        "{}",
        load()
    );
    std::fs::write(
        &index_path,
        index(entry).replace("\"version\":1", "\"version\":9"),
    )
    .unwrap();
    assert!(
        load().contains("not a fanout-cassette version 1 index"),
        "{}",
        load()
    );
    std::fs::write(&index_path, index(entry)).unwrap();
    std::fs::write(&file, format!("{exchange}\n")).unwrap();
    assert_eq!(Cassette::load(dir).unwrap().exchanges.len(), 1);
}

#[tokio::test]
async fn a_request_body_that_is_not_json_binds_by_its_headers() {
    let mock = Arc::new(Mock::default());
    let (upstream, task) = start_mock(mock).await;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    let recorder = start_recorder(&upstream, &out, BTreeMap::new()).await;
    let client = client();
    let raw = |base: String, session: &'static str| {
        client
            .post(format!("{base}/v1/messages"))
            .header("x-api-key", KEY)
            .header("x-session-id", session)
            .body("this is not JSON")
            .send()
    };
    let recorded = raw(recorder.base_url(), "ses_1")
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    recorder.finish().await.unwrap();
    task.abort();
    let cassette = Cassette::load(&out).unwrap();
    assert_eq!(cassette.index.conversations[0].root, None);
    let server = CassetteServer::new(cassette, &BTreeMap::new()).unwrap();
    let running = RunningCassetteServer::start(server, "127.0.0.1:0")
        .await
        .unwrap();
    let replayed = raw(running.base_url(), "ses_2")
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(replayed, recorded);
    running.shutdown().await.unwrap();
}
