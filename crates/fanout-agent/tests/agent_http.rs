//! The agent with the real Anthropic provider against a loopback mock: every
//! HTTP model call carries the calling session's id in `x-fanout-session-id`,
//! the parent's and the child's each their own.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fanout_agent::model::anthropic::AnthropicProvider;
use fanout_agent::{AgentConfig, serve};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

fn text_response(text: &str) -> String {
    sse(&[
        json!({"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":1}}}),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}),
        json!({"type":"content_block_stop","index":0}),
        json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}),
        json!({"type":"message_stop"}),
    ])
}

fn subagent_response() -> String {
    let args = json!({"description":"Help","prompt":"Say hi","mode":"spawn"}).to_string();
    sse(&[
        json!({"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":1}}}),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_sub","name":"subagent","input":{}}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":&args[..10]}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":&args[10..]}}),
        json!({"type":"content_block_stop","index":0}),
        json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}),
        json!({"type":"message_stop"}),
    ])
}

/// Serves `bodies` in order (one connection each); records each request's
/// session-id header and message count.
async fn mock(bodies: Vec<String>) -> (String, Arc<Mutex<Vec<(Option<String>, usize)>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        for body in bodies {
            let (sock, _) = listener.accept().await.unwrap();
            let mut reader = BufReader::new(sock);
            let mut session = None;
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).await.unwrap();
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    match k.to_ascii_lowercase().as_str() {
                        "x-fanout-session-id" => session = Some(v.trim().to_string()),
                        "content-length" => len = v.trim().parse().unwrap(),
                        _ => {}
                    }
                }
            }
            let mut request = vec![0u8; len];
            reader.read_exact(&mut request).await.unwrap();
            let request: Value = serde_json::from_slice(&request).unwrap();
            let messages = request["messages"].as_array().unwrap().len();
            log.lock().unwrap().push((session, messages));
            let mut sock = reader.into_inner();
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            sock.write_all(head.as_bytes()).await.unwrap();
            sock.write_all(body.as_bytes()).await.unwrap();
            let _ = sock.shutdown().await;
        }
    });
    (format!("http://{addr}"), seen)
}

#[tokio::test]
async fn each_session_stamps_its_own_id_on_http_model_calls() {
    let (base, seen) = mock(vec![
        subagent_response(),
        text_response("hi from the child"),
        text_response("parent done"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = AgentConfig {
        model: Arc::new(AnthropicProvider::new(&base, Some("k".into())).unwrap()),
        model_name: "claude-test".into(),
        sessions_root: dir.path().join("sessions"),
        max_depth: 3,
        max_tokens: 64,
        max_steps: 5,
        system_prompt: "test".into(),
    };
    let (client, agent) = tokio::io::duplex(1 << 16);
    let (agent_read, agent_write) = tokio::io::split(agent);
    let task = tokio::spawn(serve(agent_read, agent_write, config));
    let (read, mut write) = tokio::io::split(client);
    let mut lines = BufReader::new(read).lines();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        serde_json::from_str(&line).unwrap()
    };

    let cwd = dir.path();
    for msg in [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}),
        json!({"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":cwd,"mcpServers":[]}}),
    ] {
        write
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .unwrap();
    }
    assert_eq!(next().await["id"], 1);
    let new = next().await;
    let parent = new["result"]["sessionId"].as_str().unwrap().to_string();
    let prompt = json!({"jsonrpc":"2.0","id":3,"method":"session/prompt",
        "params":{"sessionId":parent,"prompt":[{"type":"text","text":"delegate"}]}});
    write
        .write_all(format!("{prompt}\n").as_bytes())
        .await
        .unwrap();
    let mut child = None;
    let response = loop {
        let msg = next().await;
        let update = &msg["params"]["update"];
        if update["sessionUpdate"] == "tool_call" {
            child = update["_meta"]["fanout"]["subagent"]["childSessionId"]
                .as_str()
                .map(str::to_string);
        }
        if msg.get("id").is_some() {
            break msg;
        }
    };
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let child = child.expect("the subagent tool call names its child");
    write.shutdown().await.unwrap();
    task.await.unwrap().unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (Some(parent.clone()), 1),
            (Some(child), 1),
            (Some(parent), 3),
        ],
        "session ids per call, and the parent's history grew by the tool round trip"
    );
}
