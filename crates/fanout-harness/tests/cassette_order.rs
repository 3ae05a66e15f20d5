//! The order of recorded conversations: subagents that ran one after the
//! other bind by first-call order, so a cassette listing them the other way
//! round is a loud miss; subagents that ran at the same time are independent,
//! so the order they were recorded in does not matter.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fanout_harness::cassette::Cassette;
use fanout_harness::cassette::serve::{CassetteServer, RunningCassetteServer};
use serde_json::Value;
use support::*;

/// Swaps the cassette's two subagent identities and their conversations in
/// `index.json`: the same run, recorded with the other subagent first.
fn swap_subagents(out: &Path) {
    let path = out.join("index.json");
    let mut index: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let identities = index["identities"].as_array_mut().unwrap();
    identities.swap(1, 2);
    let conversations = index["conversations"].as_array_mut().unwrap();
    let children: Vec<usize> = conversations
        .iter()
        .enumerate()
        .filter(|(_, c)| c["identity"].as_str().unwrap().starts_with("claude-agent:"))
        .map(|(at, _)| at)
        .collect();
    assert_eq!(children.len(), 2);
    conversations.swap(children[0], children[1]);
    std::fs::write(&path, serde_json::to_string_pretty(&index).unwrap()).unwrap();
}

#[tokio::test]
async fn reordered_sequential_subagents_miss_and_reordered_independent_ones_do_not() {
    let mock = Arc::new(Mock::default());
    let (upstream, mock_task) = start_mock(mock.clone()).await;
    let tmp = tempfile::tempdir().unwrap();
    let ws = "/tmp/fanout-rec-3/workspace";
    let run = claude_run("S-rec", "agent-a", "agent-b", ws);
    // (order of the calls, whether the two subagents overlap)
    let sequential = [0, 1, 2, 5, 3, 4, 6];
    let concurrent = [0, 1, 2, 3, 4, 5, 6];
    let mut recorded = Vec::new();
    for (name, order) in [("sequential", sequential), ("concurrent", concurrent)] {
        let calls: Vec<Call> = order.iter().map(|&at| run[at].clone()).collect();
        let out = tmp.path().join(name);
        let answers = record_paced(&calls, &out, &upstream, ws, Duration::from_millis(5)).await;
        assert!(answers.iter().all(|(status, _)| *status == 200));
        swap_subagents(&out);
        recorded.push((out, calls, answers));
    }
    mock_task.abort();

    let client = client();
    let live_ws = "/tmp/fanout-live-3/workspace";
    for (at, (out, calls, answers)) in recorded.iter().enumerate() {
        let server = CassetteServer::new(Cassette::load(out).unwrap(), &declared(live_ws)).unwrap();
        let running = RunningCassetteServer::start(server.clone(), "127.0.0.1:0")
            .await
            .unwrap();
        let live: Vec<Call> = calls
            .iter()
            .map(|call| {
                let mut call = call.clone();
                for (_, value) in &mut call.headers {
                    *value = value.replace("agent-", "live-").replace("S-rec", "S-live");
                }
                call
            })
            .collect();
        let mut got = Vec::new();
        for call in &live {
            got.push(send(&client, &running.base_url(), call).await);
        }
        if at == 0 {
            // Subagent A finished before B started: the first live subagent
            // takes the first recorded one, now B's, and its request is not
            // B's: a loud miss naming the rung and the closest conversation.
            let (status, text) = &got[2];
            assert_eq!(*status, 599, "{text}");
            let miss: Value = serde_json::from_str(text).unwrap();
            assert_eq!(miss["fanout"]["rung"], "claude-agent", "{miss}");
            assert!(
                miss["fanout"]["live"]
                    .as_str()
                    .unwrap()
                    .starts_with("claude-agent:live-a"),
                "{miss}"
            );
            assert!(
                miss["fanout"]["closest"]["conversation"].is_string(),
                "{miss}"
            );
            assert!(!server.binding().misses().is_empty());
        } else {
            // The subagents overlapped: independent, so each binds its own.
            assert_eq!(&got, answers);
            assert!(server.binding().misses().is_empty());
            assert!(server.binding().finished());
        }
        running.shutdown().await.unwrap();
    }
}
