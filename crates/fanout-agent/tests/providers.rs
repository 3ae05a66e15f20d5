//! The HTTP providers against local servers on loopback written here: streaming
//! text, tool-use deltas split across SSE events and TCP writes, HTTP errors,
//! and streams that break mid-response.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fanout_agent::model::anthropic::AnthropicProvider;
use fanout_agent::model::openai::OpenAiProvider;
use fanout_agent::model::{Chunk, Message, ModelStopReason, Usage};
use fanout_agent::{GenerateOptions, LanguageModel, ModelError, ModelRequest};
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const KEY: &str = "sk-test-very-secret";

/// A request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    head: String,
    body: serde_json::Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// One canned HTTP response: status, content type, body pieces written with
/// a flush and a pause between them.
struct Canned {
    status: &'static str,
    content_type: &'static str,
    pieces: Vec<String>,
}

/// Serves the canned responses, one connection each, then stops.
async fn server(responses: Vec<Canned>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        for canned in responses {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let mut buf = Vec::new();
            let mut tmp = [0u8; 4096];
            let head_end = loop {
                let n = sock.read(&mut tmp).await.unwrap();
                assert!(n > 0, "client closed early");
                buf.extend_from_slice(&tmp[..n]);
                if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break pos + 4;
                }
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            while buf.len() < head_end + len {
                let n = sock.read(&mut tmp).await.unwrap();
                assert!(n > 0);
                buf.extend_from_slice(&tmp[..n]);
            }
            let body = serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or_default();
            log.lock().unwrap().push(Seen { head, body });
            let start = format!(
                "HTTP/1.1 {}\r\ncontent-type: {}\r\nconnection: close\r\n\r\n",
                canned.status, canned.content_type
            );
            sock.write_all(start.as_bytes()).await.unwrap();
            for piece in canned.pieces {
                sock.write_all(piece.as_bytes()).await.unwrap();
                sock.flush().await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let _ = sock.shutdown().await;
        }
    });
    (format!("http://{addr}"), seen)
}

fn sse(pieces: &[&str]) -> Canned {
    Canned {
        status: "200 OK",
        content_type: "text/event-stream",
        pieces: pieces.iter().map(ToString::to_string).collect(),
    }
}

fn error(status: &'static str, body: &str) -> Canned {
    Canned {
        status,
        content_type: "application/json",
        pieces: vec![body.to_string()],
    }
}

fn request() -> ModelRequest {
    ModelRequest {
        model: "test-model".into(),
        system: Some("be brief".into()),
        messages: vec![Message::user_text("hello")],
        tools: fanout_agent::tools::tool_specs(),
        max_tokens: 100,
    }
}

async fn collect(
    model: &dyn LanguageModel,
    session: Option<&str>,
) -> Result<Vec<Result<Chunk, ModelError>>, ModelError> {
    let options = GenerateOptions {
        session_id: session.map(str::to_string),
    };
    let stream = model.stream(request(), options).await?;
    Ok(stream.collect().await)
}

fn ok_chunks(items: Vec<Result<Chunk, ModelError>>) -> Vec<Chunk> {
    items.into_iter().map(|c| c.unwrap()).collect()
}

#[tokio::test]
async fn anthropic_streams_text_and_split_tool_use() {
    // Event boundaries deliberately fall inside lines and inside JSON.
    let (base, seen) = server(vec![sse(&[
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me \"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_de",
        "lta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"look.\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"read_file\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"pa\"}}\n",
        "\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"th\\\": \\\"a.txt\\\"}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":30}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    ])])
    .await;
    let model = AnthropicProvider::new(&base, Some(KEY.into())).unwrap();
    let chunks = ok_chunks(collect(&model, Some("session-A")).await.unwrap());
    assert_eq!(
        chunks,
        vec![
            Chunk::TextDelta {
                text: "Let me ".into()
            },
            Chunk::TextDelta {
                text: "look.".into()
            },
            Chunk::ToolUseStart {
                id: "toolu_01".into(),
                name: "read_file".into()
            },
            Chunk::ToolUseDelta {
                id: "toolu_01".into(),
                partial_json: "{\"pa".into()
            },
            Chunk::ToolUseDelta {
                id: "toolu_01".into(),
                partial_json: "th\": \"a.txt\"}".into()
            },
            Chunk::Stop {
                stop_reason: ModelStopReason::ToolUse,
                usage: Usage {
                    input_tokens: 12,
                    output_tokens: 30,
                    ..Usage::default()
                },
            },
        ]
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let req = &seen[0];
    assert!(
        req.head.starts_with("POST /v1/messages HTTP/1.1"),
        "{}",
        req.head
    );
    assert_eq!(
        req.header("x-fanout-session-id").as_deref(),
        Some("session-A")
    );
    assert_eq!(req.header("x-api-key").as_deref(), Some(KEY));
    assert_eq!(
        req.header("anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    assert_eq!(req.body["model"], "test-model");
    assert_eq!(req.body["stream"], true);
    assert_eq!(req.body["system"], "be brief");
    assert_eq!(req.body["tools"][0]["name"], "subagent");
    assert_eq!(req.body["messages"][0]["content"][0]["text"], "hello");
}

#[tokio::test]
async fn openai_streams_text_and_split_tool_calls() {
    let (base, seen) = server(vec![sse(&[
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Checking\"}}]}\n\ndata: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" now\"}}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"list_dir\",\"arguments\":\"\"}}]}}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"path\\\"\"}}]}}]}\n\ndata: {\"id\":\"c\",\"choi",
        "ces\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\": \\\"src\\\"}\"}}]}}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{}\"}}]}}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4,\"total_tokens\":13}}\n\n",
        "data: [DONE]\n\n",
    ])])
    .await;
    let model = OpenAiProvider::new(&format!("{base}/v1"), Some(KEY.into())).unwrap();
    let chunks = ok_chunks(collect(&model, Some("session-B")).await.unwrap());
    assert_eq!(
        chunks,
        vec![
            Chunk::TextDelta {
                text: "Checking".into()
            },
            Chunk::TextDelta {
                text: " now".into()
            },
            Chunk::ToolUseStart {
                id: "call_1".into(),
                name: "list_dir".into()
            },
            Chunk::ToolUseDelta {
                id: "call_1".into(),
                partial_json: "{\"path\"".into()
            },
            Chunk::ToolUseDelta {
                id: "call_1".into(),
                partial_json: ": \"src\"}".into()
            },
            Chunk::ToolUseStart {
                id: "call_2".into(),
                name: "read_file".into()
            },
            Chunk::ToolUseDelta {
                id: "call_2".into(),
                partial_json: "{}".into()
            },
            Chunk::Stop {
                stop_reason: ModelStopReason::ToolUse,
                usage: Usage {
                    input_tokens: 9,
                    output_tokens: 4,
                    ..Usage::default()
                },
            },
        ]
    );
    let req = seen.lock().unwrap()[0].clone();
    assert!(
        req.head.starts_with("POST /v1/chat/completions HTTP/1.1"),
        "{}",
        req.head
    );
    assert_eq!(
        req.header("x-fanout-session-id").as_deref(),
        Some("session-B")
    );
    assert_eq!(req.header("authorization"), Some(format!("Bearer {KEY}")));
    assert_eq!(req.body["messages"][0]["role"], "system");
    assert_eq!(req.body["stream_options"]["include_usage"], true);
    assert_eq!(req.body["tools"][1]["function"]["name"], "read_file");
}

#[tokio::test]
async fn no_session_id_means_no_header() {
    let (base, seen) = server(vec![sse(&[
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
    ])])
    .await;
    let model = OpenAiProvider::new(&base, None).unwrap();
    let chunks = ok_chunks(collect(&model, None).await.unwrap());
    assert!(matches!(
        chunks.last(),
        Some(Chunk::Stop {
            stop_reason: ModelStopReason::EndTurn,
            ..
        })
    ));
    let req = seen.lock().unwrap()[0].clone();
    assert_eq!(req.header("x-fanout-session-id"), None);
    assert_eq!(req.header("authorization"), None);
}

#[tokio::test]
async fn http_errors_surface_clearly_for_both_providers() {
    let cases = [
        (
            "401 Unauthorized",
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
            401,
            &[
                "HTTP 401",
                "invalid x-api-key",
                "authentication failed: check",
            ][..],
        ),
        (
            "429 Too Many Requests",
            r#"{"error":{"type":"rate_limit_error","message":"slow down"}}"#,
            429,
            &["HTTP 429", "slow down", "rate limited"][..],
        ),
        (
            "500 Internal Server Error",
            "upstream exploded",
            500,
            &["HTTP 500", "upstream exploded", "server error"][..],
        ),
    ];
    for (status, body, code, needles) in cases {
        let (base, _) = server(vec![error(status, body), error(status, body)]).await;
        let anthropic = AnthropicProvider::new(&base, Some(KEY.into())).unwrap();
        let openai = OpenAiProvider::new(&base, Some(KEY.into())).unwrap();
        for (model, env) in [
            (&anthropic as &dyn LanguageModel, "ANTHROPIC_API_KEY"),
            (&openai as &dyn LanguageModel, "OPENAI_API_KEY"),
        ] {
            let err = collect(model, Some("s")).await.unwrap_err();
            assert!(
                matches!(err, ModelError::Http { status, .. } if status == code),
                "{err:?}"
            );
            let text = err.to_string();
            for needle in needles {
                assert!(text.contains(needle), "{text:?} should contain {needle:?}");
            }
            if code == 401 {
                assert!(text.contains(env), "{text}");
            }
            assert!(!text.contains(KEY), "the key leaked: {text}");
            assert!(!format!("{err:?}").contains(KEY));
        }
    }
}

#[tokio::test]
async fn streams_that_break_mid_response_are_errors() {
    let (base, _) = server(vec![
        sse(&[
            "data: {\"type\":\"message_start\",\"message\":{}}\n\n",
            "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"par\"}}\n\ndata: {\"type\":\"content_bl",
        ]),
        sse(&["data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"par\"}}]}\n\n"]),
        sse(&["data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"]),
    ])
    .await;
    let anthropic = AnthropicProvider::new(&base, None).unwrap();
    let items = collect(&anthropic, None).await.unwrap();
    assert_eq!(items[0], Ok(Chunk::TextDelta { text: "par".into() }));
    let last = items.last().unwrap().clone().unwrap_err();
    assert!(matches!(last, ModelError::Stream { .. }), "{last:?}");
    assert!(last.to_string().contains("before message_stop"), "{last}");

    let openai = OpenAiProvider::new(&base, None).unwrap();
    let items = collect(&openai, None).await.unwrap();
    let last = items.last().unwrap().clone().unwrap_err();
    assert!(
        last.to_string().contains("before a finish_reason"),
        "{last}"
    );

    let items = collect(&anthropic, None).await.unwrap();
    let last = items.last().unwrap().clone().unwrap_err();
    assert!(
        last.to_string().contains("overloaded_error: Overloaded"),
        "{last}"
    );
}

#[tokio::test]
async fn unreachable_server_is_a_transport_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let model = AnthropicProvider::new(&format!("http://{addr}"), Some(KEY.into())).unwrap();
    let err = collect(&model, None).await.unwrap_err();
    assert!(matches!(err, ModelError::Transport { .. }), "{err:?}");
    assert!(!err.to_string().contains(KEY));
}

#[test]
fn bad_base_urls_are_config_errors() {
    assert!(AnthropicProvider::new("not a url", None).is_err());
    assert!(OpenAiProvider::new("ftp://x", None).is_err());
    assert!(
        !format!(
            "{:?}",
            AnthropicProvider::new("http://127.0.0.1:1", Some(KEY.into())).unwrap()
        )
        .contains(KEY)
    );
}
