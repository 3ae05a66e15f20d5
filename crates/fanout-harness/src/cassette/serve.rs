//! `fanout replay serve --cassette` (DESIGN 5.5): a cassette's recorded
//! responses over HTTP, each live conversation bound to its own recorded one
//! by `fanout-replay`'s [`CassetteBinding`].
//!
//! Every method and path is served (the agent's base URL points here); the
//! recorded exchange is sent back as recorded (status, headers, the exact
//! body or SSE events), with the recording's declared run-specific values
//! (its workspace path, say) replaced by the live run's. A request that binds
//! to nothing is answered HTTP 599 with a JSON body naming the rung tried,
//! the live key and the closest recorded conversation; the misses are kept
//! for the exit status. `GET /_fanout/status` reports progress.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use fanout_replay::{
    CassetteBinding, LiveRequest, Miss, MissReason, VolatileRules, WireFormat, identify,
    request_content,
};
use serde_json::{Value, json};

use super::format::Exchange;
use super::learn::LearnedIds;
use super::substitute::Substitutions;
use super::{Cassette, declared_rules, endpoint};
use crate::error::HarnessError;
use crate::server::BackgroundServer;

/// The status path (never a model API path).
pub const STATUS_PATH: &str = "/_fanout/status";
/// The status of a miss: outside every range an API uses, so it cannot be
/// mistaken for a recorded answer.
pub const MISS_STATUS: u16 = 599;
const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

/// A cassette being served.
#[derive(Debug)]
pub struct CassetteServer {
    cassette: Cassette,
    binding: CassetteBinding,
    live_rules: VolatileRules,
    /// The recording's declared values (recorded, live).
    declared: Vec<(String, String)>,
    /// Ids the live run made up, learned from its requests and bindings.
    learned: Mutex<LearnedIds>,
    requests: AtomicU64,
    activity: Mutex<(usize, Option<Instant>)>,
}

impl CassetteServer {
    /// Serves `cassette` to a live run that declared `declared` (its own
    /// workspace, home, …).
    pub fn new(
        cassette: Cassette,
        declared: &BTreeMap<String, String>,
    ) -> Result<Arc<Self>, HarnessError> {
        let binding = CassetteBinding::new(cassette.scripts()?);
        let declared_pairs = cassette
            .index
            .declared
            .iter()
            .filter_map(|(name, recorded)| Some((recorded.clone(), declared.get(name)?.clone())))
            .collect();
        Ok(Arc::new(Self {
            cassette,
            binding,
            live_rules: declared_rules(declared),
            declared: declared_pairs,
            learned: Mutex::new(LearnedIds::default()),
            requests: AtomicU64::new(0),
            activity: Mutex::new((0, None)),
        }))
    }

    /// The cassette.
    pub fn cassette(&self) -> &Cassette {
        &self.cassette
    }

    /// The binding (progress, misses, bound identities).
    pub fn binding(&self) -> &CassetteBinding {
        &self.binding
    }

    /// Requests in flight, and when the last one started or ended.
    pub fn activity(&self) -> (usize, Option<Instant>) {
        match self.activity.lock() {
            Ok(activity) => *activity,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }

    fn touch(&self, delta: isize) {
        let mut activity = match self.activity.lock() {
            Ok(activity) => activity,
            Err(poisoned) => poisoned.into_inner(),
        };
        activity.0 = activity.0.saturating_add_signed(delta);
        activity.1 = Some(Instant::now());
    }

    /// The router serving the cassette.
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new()
            .route(STATUS_PATH, axum::routing::get(status))
            .fallback(replay)
            .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
            .with_state(self.clone())
    }

    /// Learns the live run's ids from a request bound to `exchange`: those
    /// in its body, and the ids of the identities bound so far.
    fn learn(&self, exchange: &Exchange, live_body: Option<&Value>) {
        let mut learned = match self.learned.lock() {
            Ok(learned) => learned,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let (Some(recorded), Some(live)) = (exchange.request.body.json(), live_body) {
            learned.learn(recorded, live);
        }
        for (live, recorded) in self.binding.bound_identities() {
            if let Some(identity) = self.cassette.index.identities.get(recorded) {
                learned.insert(id_of_key(&identity.key), id_of_key(&live));
            }
        }
    }

    /// What a recorded answer has replaced: the declared values and the
    /// learned ids.
    fn substitutions(&self) -> Substitutions {
        let learned = match self.learned.lock() {
            Ok(learned) => learned,
            Err(poisoned) => poisoned.into_inner(),
        };
        Substitutions::new(self.declared.iter().cloned().chain(learned.pairs()))
    }

    fn answer(&self, exchange: &Exchange) -> Response {
        let recorded = &exchange.response;
        let status = StatusCode::from_u16(recorded.status).unwrap_or(StatusCode::BAD_GATEWAY);
        let mut builder = Response::builder().status(status);
        for (name, value) in &recorded.headers {
            if name == "content-length" {
                continue;
            }
            if let Ok(value) = HeaderValue::from_str(value) {
                builder = builder.header(name.as_str(), value);
            }
        }
        let bytes = self.substitutions().body(&recorded.body);
        let body = if exchange.truncated {
            // The recorded response stopped short: send what was recorded, then
            // cut the connection, as happened when recording.
            let failure = exchange
                .failure
                .clone()
                .unwrap_or_else(|| "the recorded response stopped short".into());
            Body::from_stream(futures::stream::iter([
                Ok::<Bytes, std::io::Error>(Bytes::from(bytes)),
                Err(std::io::Error::other(failure)),
            ]))
        } else {
            Body::from(bytes)
        };
        builder
            .body(body)
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
    }
}

/// The JSON body of a miss: an error in both Anthropic's and OpenAI's shape,
/// plus the binding's details under `fanout`.
pub fn miss_body(miss: &Miss) -> Value {
    let reason = match &miss.reason {
        MissReason::NoIdentity { recorded } => {
            json!({"kind": "no-identity", "recordedWithinParent": recorded})
        }
        MissReason::NoConversation => json!({"kind": "no-conversation"}),
        MissReason::Exhausted {
            conversation,
            recorded,
        } => {
            json!({"kind": "exhausted", "conversation": conversation, "recorded": recorded})
        }
        MissReason::StepMismatch {
            conversation,
            expected,
            got,
        } => {
            json!({"kind": "step-mismatch", "conversation": conversation, "expectedStep": expected, "step": got})
        }
    };
    let closest = miss.closest.as_ref().map(|closest| {
        json!({
            "conversation": closest.conversation,
            "rung": closest.rung.as_str(),
            "root": closest.root,
            "firstDifference": closest.difference.as_ref().map(|d| json!({
                "at": d.at, "live": d.live, "recorded": d.recorded})),
        })
    });
    json!({
        "type": "error",
        "error": {"type": "fanout_replay_miss", "message": miss.to_string(), "code": "fanout_replay_miss"},
        "fanout": {
            "request": miss.request,
            "rung": miss.rung.as_str(),
            "live": miss.live,
            "reason": reason,
            "closest": closest,
        },
    })
}

fn miss_response(miss: &Miss) -> Response {
    let status = StatusCode::from_u16(MISS_STATUS).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, axum::Json(miss_body(miss))).into_response();
    // SDKs retry 5xx; a miss stays a miss.
    response
        .headers_mut()
        .insert("x-should-retry", HeaderValue::from_static("false"));
    response
}

async fn replay(State(server): State<Arc<CassetteServer>>, request: Request) -> Response {
    server.touch(1);
    let response = replay_one(&server, request).await;
    server.touch(-1);
    response
}

async fn replay_one(server: &CassetteServer, request: Request) -> Response {
    let number = server.requests.fetch_add(1, Ordering::Relaxed) + 1;
    let (parts, body) = request.into_parts();
    let endpoint = endpoint(parts.method.as_str(), parts.uri.path());
    let label = format!("request {number} ({endpoint})");
    let body = match axum::body::to_bytes(body, MAX_REQUEST_BYTES).await {
        Ok(body) => body,
        Err(err) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("{label}: cannot read the body: {err}"),
            )
                .into_response();
        }
    };
    let identity = match identify(|name| parts.headers.get(name).map(HeaderValue::as_bytes)) {
        Ok(identity) => identity,
        Err(err) => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"type": "error",
                "error": {"type": "invalid_request_error", "message": format!("{label}: {err}")}})),
            )
                .into_response();
        }
    };
    let format = WireFormat::of_path(parts.uri.path());
    let json = match serde_json::from_slice::<Value>(&body) {
        Ok(json) => Some(json),
        Err(err) => {
            if format != WireFormat::Other && !body.is_empty() {
                tracing::warn!(%label, %err, "the request body is not JSON; binding by its headers only");
            }
            None
        }
    };
    let content = json
        .as_ref()
        .map(|json| request_content(format, json, &server.live_rules))
        .unwrap_or_default();
    let live = LiveRequest {
        label: &label,
        identity: identity.as_ref(),
        endpoint: &endpoint,
        root: content.root.as_ref(),
        step: content.step,
    };
    match server.binding.bind(&live) {
        Ok(served) => {
            tracing::debug!(%label, conversation = served.conversation, exchange = served.exchange, "replayed");
            let exchange = &server.cassette.exchanges[served.conversation][served.exchange];
            server.learn(exchange, json.as_ref());
            server.answer(exchange)
        }
        Err(miss) => {
            tracing::warn!(%miss, "replay miss");
            miss_response(&miss)
        }
    }
}

/// The id part of an identity key (`rung:id`).
pub(crate) fn id_of_key(key: &str) -> String {
    key.split_once(':').map_or(key, |(_, id)| id).to_string()
}

async fn status(State(server): State<Arc<CassetteServer>>) -> axum::Json<Value> {
    let scripts = server.binding.scripts();
    let progress = server.binding.progress();
    let conversations: Vec<Value> = scripts
        .conversations()
        .iter()
        .zip(&progress)
        .enumerate()
        .map(|(at, (conversation, served))| {
            json!({"file": conversation.name, "rung": scripts.recorded_rung(at).as_str(),
                "endpoint": conversation.endpoint, "exchanges": conversation.steps.len(), "served": served})
        })
        .collect();
    axum::Json(json!({
        "service": "fanout replay",
        "cassette": server.cassette.dir.display().to_string(),
        "requests": server.requests.load(Ordering::Relaxed),
        "conversations": conversations,
        "misses": server.binding.misses().iter().map(ToString::to_string).collect::<Vec<_>>(),
    }))
}

/// A cassette server running on a background task (for the harness and tests).
#[derive(Debug)]
pub struct RunningCassetteServer {
    background: BackgroundServer,
    server: Arc<CassetteServer>,
}

impl RunningCassetteServer {
    /// Starts serving on `addr` (`127.0.0.1:0` for any free port).
    pub async fn start(server: Arc<CassetteServer>, addr: &str) -> Result<Self, HarnessError> {
        let background = BackgroundServer::start(server.router(), addr).await?;
        Ok(Self { background, server })
    }

    /// `http://ADDR`.
    pub fn base_url(&self) -> String {
        self.background.base_url()
    }

    /// The server (binding, activity).
    pub fn server(&self) -> &Arc<CassetteServer> {
        &self.server
    }

    /// Stops accepting, lets open responses finish, and waits.
    pub async fn shutdown(self) -> Result<(), HarnessError> {
        self.background.shutdown(None).await
    }
}

/// Serves `server` on `listener` until `shutdown` resolves (what `fanout
/// replay serve --cassette` runs).
pub async fn serve(
    listener: tokio::net::TcpListener,
    server: Arc<CassetteServer>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HarnessError> {
    crate::server::serve_router(listener, server.router(), shutdown).await
}
