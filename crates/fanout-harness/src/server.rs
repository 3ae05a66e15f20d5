//! The HTTP replay server: the [`ReplayBinding`] behind Anthropic Messages
//! (`POST /v1/messages`) and OpenAI chat completions (`POST /v1/chat/completions`,
//! `POST /chat/completions`), both streaming (SSE), keyed by the
//! [`SESSION_ID_HEADER`] (`x-fanout-session-id`). Any HTTP agent pointed at it replays a
//! scenario without a key.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use fanout_replay::{BindingError, ReplayBinding, ReplayedResponse, SESSION_ID_HEADER};
use serde_json::{Value, json};

use crate::error::HarnessError;
use crate::wire;

/// The default listen address: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";

/// Request bodies carry whole conversations; allow far more than axum's 2 MB default.
const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug)]
struct ServerState {
    binding: Arc<ReplayBinding>,
    responses_served: AtomicU64,
}

/// Which wire format a request speaks.
#[derive(Debug, Clone, Copy)]
enum Dialect {
    Anthropic,
    OpenAi,
}

impl Dialect {
    fn error(self, status: StatusCode, kind: &str, message: &str) -> Response {
        let body = match self {
            Dialect::Anthropic => wire::anthropic_error_body(kind, message),
            Dialect::OpenAi => wire::openai_error_body(kind, message),
        };
        (status, axum::Json(body)).into_response()
    }
}

/// The router serving `binding`.
pub fn router(binding: Arc<ReplayBinding>) -> Router {
    let state = Arc::new(ServerState {
        binding,
        responses_served: AtomicU64::new(0),
    });
    Router::new()
        .route("/", get(status))
        .route("/v1/messages", post(anthropic))
        .route("/v1/chat/completions", post(openai))
        .route("/chat/completions", post(openai))
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .with_state(state)
}

/// Binds `addr` (e.g. `127.0.0.1:0` for any free port).
pub async fn bind(addr: &str) -> Result<tokio::net::TcpListener, HarnessError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|error| HarnessError::Serve {
            addr: addr.to_string(),
            error,
        })
}

/// `listener` with TCP_NODELAY on every accepted connection: a streamed
/// answer is many small writes, which Nagle's algorithm would hold back until
/// the client's delayed ACK (40 ms a chunk).
pub fn no_delay(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Addr = SocketAddr> {
    use axum::serve::ListenerExt;
    listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    })
}

/// Serves `binding` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    binding: Arc<ReplayBinding>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HarnessError> {
    serve_router(listener, router(binding), shutdown).await
}

/// Serves `app` on `listener` (`TCP_NODELAY`) until `shutdown` resolves, letting open
/// responses finish: the foreground loop of every harness server.
pub async fn serve_router(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HarnessError> {
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    axum::serve(no_delay(listener), app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|error| HarnessError::Serve { addr, error })
}

/// A router served on a background task until shut down: how the replay
/// servers and the recording proxy run inside the harness and in tests.
#[derive(Debug)]
pub struct BackgroundServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), HarnessError>>,
}

impl BackgroundServer {
    /// Binds `addr` (`127.0.0.1:0` for any free port) and serves `app` there.
    pub async fn start(app: Router, addr: &str) -> Result<Self, HarnessError> {
        let listener = bind(addr).await?;
        let local = listener.local_addr().map_err(|error| HarnessError::Serve {
            addr: addr.to_string(),
            error,
        })?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve_router(listener, app, async {
            let _ = stopped.await;
        }));
        Ok(Self {
            addr: local,
            stop: Some(stop),
            task,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`: the base URL for Anthropic clients (they add `/v1/messages`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, lets open responses finish (all of them, or for at
    /// most `grace`), and waits.
    pub async fn shutdown(
        mut self,
        grace: Option<std::time::Duration>,
    ) -> Result<(), HarnessError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let addr = self.addr.to_string();
        let joined = match grace {
            None => (&mut self.task).await,
            Some(grace) => match tokio::time::timeout(grace, &mut self.task).await {
                Ok(joined) => joined,
                Err(_) => {
                    self.task.abort();
                    return Ok(());
                }
            },
        };
        match joined {
            Ok(served) => served,
            Err(err) => Err(HarnessError::Serve {
                addr,
                error: std::io::Error::other(err),
            }),
        }
    }
}

/// A replay server running on a background task, for tests and embedding.
#[derive(Debug)]
pub struct RunningServer(BackgroundServer);

impl RunningServer {
    /// Starts serving `binding` on `addr`.
    pub async fn start(binding: Arc<ReplayBinding>, addr: &str) -> Result<Self, HarnessError> {
        BackgroundServer::start(router(binding), addr)
            .await
            .map(Self)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.0.addr()
    }

    /// `http://ADDR`: the base URL for Anthropic clients (they add `/v1/messages`).
    pub fn base_url(&self) -> String {
        self.0.base_url()
    }

    /// Stops accepting, lets open responses finish, and waits.
    pub async fn shutdown(self) -> Result<(), HarnessError> {
        self.0.shutdown(None).await
    }
}

async fn status(State(state): State<Arc<ServerState>>) -> axum::Json<Value> {
    let scripts = state.binding.scripts().scripts();
    let progress = state.binding.progress();
    let sessions: Vec<Value> = scripts
        .iter()
        .zip(progress.iter().chain(std::iter::repeat(&0)))
        .map(|(script, served)| {
            json!({"log": script.label, "recordedSession": script.recorded_id,
                "backend": script.backend.as_str(), "responses": script.responses.len(),
                "served": served})
        })
        .collect();
    axum::Json(json!({
        "service": "fanout replay",
        "responsesServed": state.responses_served.load(Ordering::Relaxed),
        "scripts": sessions,
    }))
}

async fn anthropic(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    replay(&state, Dialect::Anthropic, &headers, &body)
}

async fn openai(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    replay(&state, Dialect::OpenAi, &headers, &body)
}

fn replay(state: &ServerState, dialect: Dialect, headers: &HeaderMap, body: &[u8]) -> Response {
    let request: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(err) => {
            return dialect.error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &format!("the request body is not JSON: {err}"),
            );
        }
    };
    if request.get("stream").and_then(Value::as_bool) != Some(true) {
        return dialect.error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "fanout replay serves streaming responses only: send \"stream\": true",
        );
    }
    let session = match headers.get(SESSION_ID_HEADER).map(|v| v.to_str()) {
        None => None,
        Some(Ok(id)) => Some(id),
        Some(Err(_)) => {
            return dialect.error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &format!("the {SESSION_ID_HEADER} header is not visible ASCII"),
            );
        }
    };
    let response = match state.binding.next_response(session) {
        Ok(response) => response,
        Err(err) => {
            tracing::warn!(%err, "no recorded response for a replay request");
            let status = match err {
                BindingError::Poisoned => StatusCode::INTERNAL_SERVER_ERROR,
                _ => StatusCode::CONFLICT,
            };
            return dialect.error(status, "replay_error", &err.to_string());
        }
    };
    let serial = state.responses_served.fetch_add(1, Ordering::Relaxed) + 1;
    // Echo the requested model, as a provider would; fall back to the recorded one.
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(&response.model)
        .to_string();
    let events = encode(dialect, &response, &model, serial);
    sse_response(events)
}

fn encode(dialect: Dialect, response: &ReplayedResponse, model: &str, serial: u64) -> Vec<String> {
    match dialect {
        Dialect::Anthropic => {
            wire::anthropic_events(response, model, &format!("msg_replay_{serial:06}"))
        }
        Dialect::OpenAi => {
            wire::openai_events(response, model, &format!("chatcmpl-replay-{serial:06}"))
        }
    }
}

/// The whole stream in one body: every event is known when the request
/// arrives, so writing them one frame at a time would only add latency
/// (clients parse SSE incrementally either way).
fn sse_response(events: Vec<String>) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from(events.concat()))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
