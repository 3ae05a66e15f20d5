//! The HTTP replay server over real loopback sockets: both dialects, per-session
//! keying by header, and loud errors.

use std::sync::Arc;

use fanout_harness::server::RunningServer;
use fanout_replay::{ReplayBinding, SESSION_ID_HEADER, ScenarioScripts};
use fanout_sessionlog::{
    Backend, Chunk, Event, Header, ModelStopReason, SessionLog, Timestamp, Usage,
};
use serde_json::{Value, json};

fn log(id: &str, created: i64, parent: Option<&str>, texts: &[&str]) -> SessionLog {
    let ts = Timestamp::from_micros(1_754_235_140_000_000 + created).unwrap();
    let mut events = Vec::new();
    for (ordinal, text) in texts.iter().enumerate() {
        events.push(Event::ModelRequest {
            ts,
            ordinal: ordinal as u64,
            model: "recorded".into(),
        });
        events.push(Event::AssistantChunk {
            ts,
            chunk: Chunk::TextDelta {
                text: (*text).into(),
            },
        });
        events.push(Event::AssistantChunk {
            ts,
            chunk: Chunk::Stop {
                stop_reason: ModelStopReason::EndTurn,
                usage: Usage {
                    input_tokens: 7,
                    output_tokens: 3,
                    ..Usage::default()
                },
            },
        });
    }
    SessionLog {
        path: format!("{id}.jsonl").into(),
        header: Header {
            created_at: ts,
            ..match parent {
                Some(parent) => Header::child(id, "/w", parent, "call", Backend::Spawn, None),
                None => Header::root(id, "/w"),
            }
        },
        events,
    }
}

async fn start() -> RunningServer {
    let scripts = ScenarioScripts::from_logs(&[
        log("parent", 0, None, &["p0", "p1"]),
        log("child", 10, Some("parent"), &["c0"]),
    ])
    .unwrap();
    RunningServer::start(Arc::new(ReplayBinding::new(scripts)), "127.0.0.1:0")
        .await
        .unwrap()
}

async fn post(url: &str, session: Option<&str>, body: Value) -> (u16, String) {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut request = client.post(url).json(&body);
    if let Some(id) = session {
        request = request.header(SESSION_ID_HEADER, id);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

fn data(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

fn anthropic_text(body: &str) -> String {
    data(body)
        .iter()
        .filter_map(|d| d.pointer("/delta/text").and_then(Value::as_str))
        .collect()
}

fn openai_text(body: &str) -> String {
    data(body)
        .iter()
        .filter_map(|d| {
            d.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
        })
        .collect()
}

#[tokio::test]
async fn sessions_are_keyed_by_header_across_both_dialects() {
    let server = start().await;
    let base = server.base_url();
    let messages = format!("{base}/v1/messages");
    let chat = format!("{base}/v1/chat/completions");
    let body = json!({"model": "claude-x", "stream": true, "messages": []});

    let (status, first) = post(&messages, Some("live-parent"), body.clone()).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(anthropic_text(&first), "p0");
    let events = data(&first);
    assert_eq!(
        events[0]["message"]["model"], "claude-x",
        "echoes the requested model"
    );
    assert_eq!(events.last().unwrap()["type"], "message_stop");

    // The child, then the parent again through the OpenAI route: each keeps its cursor.
    let (_, child) = post(&chat, Some("live-child"), body.clone()).await;
    assert_eq!(openai_text(&child), "c0");
    assert!(child.trim_end().ends_with("data: [DONE]"));
    let usage = data(&child)
        .into_iter()
        .find(|d| d.get("usage").is_some())
        .unwrap();
    assert_eq!(usage["usage"]["prompt_tokens"], 7);
    let (_, second) = post(
        &format!("{base}/chat/completions"),
        Some("live-parent"),
        body.clone(),
    )
    .await;
    assert_eq!(openai_text(&second), "p1");

    // Past the end, and an unrecorded session: 409 with a message naming both.
    let (status, exhausted) = post(&messages, Some("live-child"), body.clone()).await;
    assert_eq!(status, 409);
    let message = serde_json::from_str::<Value>(&exhausted).unwrap()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("live session live-child made model call 2 but its script child.jsonl"),
        "{message}"
    );
    let (status, extra) = post(&chat, Some("stranger"), body.clone()).await;
    assert_eq!(status, 409);
    assert!(extra.contains("distinct caller number 3"), "{extra}");

    // Bad requests consume nothing.
    let (status, _) = post(&messages, Some("x"), json!({"stream": false})).await;
    assert_eq!(status, 400);
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let status = client
        .post(&messages)
        .body("not json")
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 400);

    let info: Value = client
        .get(format!("{base}/"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["responsesServed"], 3);
    assert_eq!(info["scripts"][0]["served"], 2);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_call_without_session_header_is_a_plain_replay() {
    let server = start().await;
    let url = format!("{}/v1/messages", server.base_url());
    let body = json!({"model": "m", "stream": true});
    let (_, a) = post(&url, None, body.clone()).await;
    let (_, b) = post(&url, None, body.clone()).await;
    assert_eq!(
        (anthropic_text(&a), anthropic_text(&b)),
        ("p0".into(), "p1".into())
    );
    server.shutdown().await.unwrap();
}
