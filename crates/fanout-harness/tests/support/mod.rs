//! Shared by the cassette tests: a scripted mock upstream (the model provider
//! is the only thing mocked), agent-shaped calls, and recording through
//! `replay record`'s proxy over real loopback sockets.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use fanout_harness::cassette::record::{RecordOptions, RunningRecorder};
use serde_json::{Value, json};
use tokio::sync::Notify;

pub const KEY: &str = "sk-ant-test-SECRET-never-written";

/// The mock upstream: answers by the first user text and the step, in the
/// request's own wire format; `hold` makes the first streamed answer wait after
/// its first event until released.
#[derive(Default)]
pub struct Mock {
    pub seen: Mutex<Vec<String>>,
    pub hold: Option<Arc<Notify>>,
}

pub fn first_user_text(body: &Value) -> String {
    let items = body
        .get("messages")
        .or_else(|| body.get("input"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for item in items {
        if item["role"] == "user" {
            return match &item["content"] {
                Value::String(text) => text.clone(),
                Value::Array(blocks) => blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                _ => String::new(),
            };
        }
    }
    String::new()
}

pub fn step(body: &Value) -> usize {
    let items = body
        .get("messages")
        .or_else(|| body.get("input"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    items
        .iter()
        .filter(|i| i["role"] == "assistant" || i["type"] == "function_call")
        .count()
}

pub fn sse(events: &[(Option<&str>, Value)]) -> Vec<String> {
    events
        .iter()
        .map(|(name, data)| match name {
            Some(name) => format!("event: {name}\ndata: {data}\n\n"),
            None => format!("data: {data}\n\n"),
        })
        .collect()
}

pub fn answer_events(path: &str, text: &str) -> Vec<String> {
    if path.ends_with("/messages") {
        sse(&[
            (
                Some("message_start"),
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [], "usage": {"input_tokens": 3, "output_tokens": 1}}}),
            ),
            (
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            (
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            ),
            (
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": 0}),
            ),
            (
                Some("message_delta"),
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
            ),
            (Some("message_stop"), json!({"type": "message_stop"})),
        ])
    } else if path.ends_with("/chat/completions") {
        let mut events = sse(&[
            (
                None,
                json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]}),
            ),
            (
                None,
                json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            ),
        ]);
        events.push("data: [DONE]\n\n".into());
        events
    } else {
        sse(&[
            (
                Some("response.created"),
                json!({"type": "response.created", "response": {"id": "resp_1"}}),
            ),
            (
                Some("response.output_text.delta"),
                json!({"type": "response.output_text.delta", "delta": text}),
            ),
            (
                Some("response.completed"),
                json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}}),
            ),
        ])
    }
}

pub async fn mock_handler(
    State(mock): State<Arc<Mock>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let key = headers
        .get("x-api-key")
        .or_else(|| headers.get("authorization"))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    assert!(
        key.contains(KEY),
        "the key reaches the upstream untouched: {key:?}"
    );
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let text = format!(
        "reply to {} at step {}",
        first_user_text(&body),
        step(&body)
    );
    mock.seen.lock().unwrap().push(text.clone());
    let path = uri.path().to_string();
    if body["stream"] != true {
        return axum::Json(
            json!({"id": "msg_1", "type": "message", "content": [{"type": "text", "text": text}]}),
        )
        .into_response();
    }
    let events = answer_events(&path, &text);
    let hold = mock.hold.clone();
    let stream = futures::stream::unfold(
        (events.into_iter(), 0usize, hold),
        |(mut events, at, hold)| async move {
            let event = events.next()?;
            if at == 1
                && let Some(hold) = &hold
            {
                hold.notified().await;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
            Some((
                Ok::<_, std::io::Error>(Bytes::from(event)),
                (events, at + 1, hold),
            ))
        },
    );
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("request-id", "req_mock")
        .header("set-cookie", "session=SECRET-COOKIE")
        .body(Body::from_stream(stream))
        .unwrap()
}

pub async fn start_mock(mock: Arc<Mock>) -> (String, tokio::task::JoinHandle<()>) {
    let app = axum::Router::new().fallback(mock_handler).with_state(mock);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, task)
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// A request as an agent sends it.
#[derive(Clone)]
pub struct Call {
    pub path: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Value,
}

pub fn anthropic(
    headers: Vec<(&'static str, String)>,
    system: &str,
    user: &str,
    history: usize,
    stream: bool,
) -> Call {
    let mut messages = vec![json!({"role": "user", "content": [{"type": "text", "text": user}]})];
    for n in 0..history {
        messages.push(
            json!({"role": "assistant", "content": [{"type": "text", "text": format!("a{n}")}]}),
        );
        messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]}));
    }
    Call {
        path: "/v1/messages?beta=true",
        headers,
        body: json!({"model": "m", "stream": stream, "system": system, "messages": messages}),
    }
}

pub async fn send(client: &reqwest::Client, base: &str, call: &Call) -> (u16, String) {
    let mut request = client
        .post(format!("{base}{}", call.path))
        .header("x-api-key", KEY)
        .header("authorization", format!("Bearer {KEY}"))
        .json(&call.body);
    for (name, value) in &call.headers {
        request = request.header(*name, value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

pub fn claude(session: &str, agent: Option<&str>) -> Vec<(&'static str, String)> {
    let mut headers = vec![("X-Claude-Code-Session-Id", session.to_string())];
    if let Some(agent) = agent {
        headers.push(("x-claude-code-agent-id", agent.to_string()));
    }
    headers
}

/// A nested Claude run: the parent, two subagents (interleaved), a title call.
pub fn claude_run(session: &str, a: &str, b: &str, workspace: &str) -> Vec<Call> {
    let system = format!(
        "You are Claude.\n# Environment\n - Primary working directory: {workspace}\n - Today: 2026-12-01\n\nBe brief."
    );
    let title = Call {
        path: "/v1/messages",
        headers: claude(session, None),
        body: json!({"model": "m", "stream": false, "system": "You are naming a coding session",
            "messages": [{"role": "user", "content": "<session>go</session>"}]}),
    };
    vec![
        anthropic(claude(session, None), &system, "FANOUT-PARENT go", 0, true),
        title,
        anthropic(
            claude(session, Some(a)),
            &system,
            "FANOUT-CHILD-A read",
            0,
            true,
        ),
        anthropic(
            claude(session, Some(b)),
            &system,
            "FANOUT-CHILD-B read",
            0,
            true,
        ),
        anthropic(
            claude(session, Some(b)),
            &system,
            "FANOUT-CHILD-B read",
            1,
            true,
        ),
        anthropic(
            claude(session, Some(a)),
            &system,
            "FANOUT-CHILD-A read",
            1,
            true,
        ),
        anthropic(claude(session, None), &system, "FANOUT-PARENT go", 1, true),
    ]
}

pub fn declared(workspace: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("workspace".to_string(), workspace.to_string())])
}

/// A recording proxy on a free loopback port, forwarding to `upstream` and
/// writing a new cassette in `out`.
pub async fn start_recorder(
    upstream: &str,
    out: &Path,
    declared: BTreeMap<String, String>,
) -> RunningRecorder {
    RunningRecorder::start(
        RecordOptions {
            upstream: upstream.to_string(),
            out: out.to_path_buf(),
            force: false,
            declared,
        },
        "127.0.0.1:0",
    )
    .await
    .unwrap()
}

pub async fn record(
    calls: &[Call],
    out: &Path,
    upstream: &str,
    workspace: &str,
) -> Vec<(u16, String)> {
    record_paced(calls, out, upstream, workspace, Duration::ZERO).await
}

/// [`record`], waiting `pause` between calls (so that recorded spans, in
/// milliseconds, tell calls one after the other from calls at once).
pub async fn record_paced(
    calls: &[Call],
    out: &Path,
    upstream: &str,
    workspace: &str,
    pause: Duration,
) -> Vec<(u16, String)> {
    let recorder = start_recorder(upstream, out, declared(workspace)).await;
    let client = client();
    let mut answers = Vec::new();
    for call in calls {
        answers.push(send(&client, &recorder.base_url(), call).await);
        tokio::time::sleep(pause).await;
    }
    recorder.finish().await.unwrap();
    answers
}
