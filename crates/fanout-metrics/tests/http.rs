//! The read-only routes over real HTTP on loopback, from a live registry and from a
//! stats directory.

use std::sync::Arc;
use std::time::Duration;

use fanout_metrics::{MetricsSource, Registry, StatsDir, StatsFile, serve_http};
use fanout_types::Timestamp;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

struct Reply {
    status: u16,
    content_type: String,
    body: String,
}

/// One HTTP/1.1 request on its own connection.
async fn request(addr: std::net::SocketAddr, method: &str, path: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!("{method} {path} HTTP/1.1\r\nHost: fanout\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_default();
    Reply {
        status,
        content_type,
        body: body.to_owned(),
    }
}

/// Serves `source` on a free loopback port; the sender stops the server.
async fn start(
    source: Arc<dyn MetricsSource>,
) -> (
    std::net::SocketAddr,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), fanout_metrics::ServeError>>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve_http(listener, source, async {
        let _ = stopped.await;
    }));
    (addr, stop, server)
}

#[tokio::test]
async fn the_live_registry_is_served_read_only() {
    let registry = Registry::new();
    metrics::with_local_recorder(&registry, || {
        metrics::describe_counter!("fanout_proxy_frames_total", "Lines seen.");
        metrics::counter!("fanout_proxy_frames_total", "direction" => "c2a").increment(6);
    });
    let (addr, stop, server) = start(Arc::new(registry)).await;

    let page = request(addr, "GET", "/metrics").await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.content_type,
        "text/plain; version=0.0.4; charset=utf-8"
    );
    assert!(
        page.body
            .lines()
            .any(|l| l == "fanout_proxy_frames_total{direction=\"c2a\"} 6"),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("# HELP fanout_proxy_frames_total Lines seen.")
    );

    let vars = request(addr, "GET", "/debug/vars").await;
    assert_eq!(vars.status, 200);
    assert_eq!(vars.content_type, "application/json; charset=utf-8");
    let vars: serde_json::Value = serde_json::from_str(&vars.body).unwrap();
    assert_eq!(vars["fanout_proxy_frames_total"]["c2a"], 6);
    assert_eq!(vars["subagent_context_total"]["persisted"], 0);

    let health = request(addr, "GET", "/healthz").await;
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    assert_eq!(request(addr, "HEAD", "/metrics").await.status, 200);
    assert_eq!(request(addr, "POST", "/metrics").await.status, 405);
    assert_eq!(request(addr, "GET", "/nothing").await.status, 404);

    stop.send(()).unwrap();
    let stopped = tokio::time::timeout(Duration::from_secs(10), server).await;
    assert!(matches!(stopped, Ok(Ok(Ok(())))), "{stopped:?}");
}

#[tokio::test]
async fn a_stats_dir_is_served_as_its_sum() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::new();
    metrics::with_local_recorder(&registry, || {
        metrics::counter!("fanout_proxy_frames_total", "direction" => "a2c").increment(2);
    });
    for id in ["a", "b"] {
        StatsFile {
            execution_id: id.to_owned(),
            task_id: None,
            agent_command: vec!["cat".to_owned()],
            pid: 1,
            started_at: Timestamp::now(),
            updated_at: Timestamp::now(),
            finished: true,
            metrics: registry.snapshot(),
        }
        .write(dir.path())
        .unwrap();
    }
    let source = StatsDir::new(dir.path(), Duration::from_secs(30));
    let (addr, stop, server) = start(Arc::new(source)).await;
    let page = request(addr, "GET", "/metrics").await;
    for line in [
        "fanout_proxy_frames_total{direction=\"a2c\"} 4",
        "fanout_proxy_executions{state=\"finished\"} 2",
        "fanout_proxy_executions{state=\"running\"} 0",
    ] {
        assert!(
            page.body.lines().any(|l| l == line),
            "{line}: {}",
            page.body
        );
    }
    stop.send(()).unwrap();
    let stopped = tokio::time::timeout(Duration::from_secs(10), server).await;
    assert!(matches!(stopped, Ok(Ok(Ok(())))), "{stopped:?}");
}
