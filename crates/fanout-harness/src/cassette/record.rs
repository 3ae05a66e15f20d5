//! `fanout replay record` (DESIGN 5.5): a forwarding HTTP proxy between an
//! agent and its model API that writes a cassette.
//!
//! Every request is forwarded untouched (method, path, query, headers
//! including the API key, body) to the upstream, and its response streams
//! back chunk by chunk as it arrives. Once an exchange ends, it is written to
//! its conversation's file and the index is rewritten (both replaced
//! atomically, 0600), so the cassette on disk is always whole. Secrets are
//! forwarded but never written. An upstream that cannot be reached gets the
//! agent a 502 in its API's error shape, recorded as a failure; a stream cut
//! short is recorded as far as it went, with the failure.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use fanout_replay::{Identity, VolatileRules, WireFormat, identify, request_content};
use futures::StreamExt;
use tokio::sync::{mpsc, watch};

use super::format::{
    CASSETTE_TYPE, CASSETTE_VERSION, Exchange, INDEX_FILE, Index, IndexConversation, IndexIdentity,
    RecordedRequest, RecordedResponse, RequestBody, ResponseBody, conversation_file_name,
    is_cassette_file, is_secret_header, redact_path,
};
use super::{declared_rules, endpoint};
use crate::error::HarnessError;
use crate::private_file;
use crate::server::BackgroundServer;
use crate::wire;

/// Request bodies carry whole conversations; allow far more than axum's 2 MB default.
const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;
/// How long in-flight exchanges may take to end once recording is stopped.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Headers that belong to one connection, never forwarded or recorded.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

fn is_hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.contains(&name)
}

/// What to record.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// The model API base URL requests are forwarded to.
    pub upstream: String,
    /// The cassette directory.
    pub out: PathBuf,
    /// Replace a cassette already in `out`.
    pub force: bool,
    /// Run-specific values (name -> value) for the volatile-value rules.
    pub declared: BTreeMap<String, String>,
}

/// One exchange slot of a conversation: in flight, or ended, held as its
/// cassette line (serialised once, when it ends: every write of the
/// conversation's file copies the lines instead of serialising each
/// exchange again).
#[derive(Debug)]
enum Slot {
    InFlight,
    Done(String),
}

#[derive(Debug)]
struct Conversation {
    identity: Option<String>,
    endpoint: String,
    root: Option<String>,
    last_step: Option<usize>,
    slots: Vec<Slot>,
}

#[derive(Debug, Default)]
struct RecordState {
    identities: Vec<IndexIdentity>,
    conversations: Vec<Conversation>,
    seq: u64,
    in_flight: usize,
    last_activity: Option<Instant>,
    write_error: Option<String>,
    /// Conversations with an exchange ended since their file was last
    /// written: one write takes them all, so a burst of ends costs one
    /// rewrite per conversation, not one per end.
    unwritten: BTreeSet<usize>,
}

/// A running recording: shared by every request the proxy serves.
#[derive(Debug)]
pub struct Recorder {
    upstream_text: String,
    client: reqwest::Client,
    out: PathBuf,
    declared: BTreeMap<String, String>,
    rules: VolatileRules,
    started: Instant,
    recorded_at: String,
    state: Mutex<RecordState>,
    /// Held while the files are written, so writes never overtake each other
    /// (each serialises the state inside it) and requests never wait on disk.
    writing: Mutex<()>,
    /// Writes started by ended exchanges and not done yet.
    pending_writes: AtomicUsize,
    stopping: watch::Sender<bool>,
}

/// Which conversations' files a write rewrites (the index always).
#[derive(Debug, Clone, Copy)]
enum Which {
    /// Those with an exchange ended since their last write.
    Unwritten,
    /// Every one (the last write, at `finish`).
    All,
}

/// Where one request's exchange goes.
#[derive(Debug, Clone, Copy)]
struct SlotRef {
    conversation: usize,
    slot: usize,
}

impl Recorder {
    /// Prepares `options.out` (refusing to overwrite a cassette unless
    /// `force`) and the upstream client.
    pub fn new(options: RecordOptions) -> Result<Arc<Self>, HarnessError> {
        let upstream =
            url::Url::parse(&options.upstream).map_err(|err| HarnessError::Upstream {
                url: options.upstream.clone(),
                message: err.to_string(),
            })?;
        if !matches!(upstream.scheme(), "http" | "https") || upstream.host().is_none() {
            return Err(HarnessError::Upstream {
                url: options.upstream.clone(),
                message: "needs an http:// or https:// URL with a host".into(),
            });
        }
        prepare_out(&options.out, options.force)?;
        let loopback = match upstream.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            Some(url::Host::Domain(name)) => name == "localhost",
            None => false,
        };
        let mut client = reqwest::Client::builder().connect_timeout(Duration::from_secs(10));
        if loopback {
            // An agent's proxy settings are for the agent; a local upstream is direct.
            client = client.no_proxy();
        }
        let client = client.build().map_err(|err| HarnessError::Upstream {
            url: options.upstream.clone(),
            message: format!("cannot build an HTTP client: {err}"),
        })?;
        let (stopping, _) = watch::channel(false);
        Ok(Arc::new(Self {
            upstream_text: options.upstream.trim_end_matches('/').to_string(),
            client,
            rules: declared_rules(&options.declared),
            declared: options.declared,
            out: options.out,
            started: Instant::now(),
            recorded_at: fanout_sessionlog::Timestamp::now().to_string(),
            state: Mutex::new(RecordState::default()),
            writing: Mutex::new(()),
            pending_writes: AtomicUsize::new(0),
            stopping,
        }))
    }

    /// The cassette directory.
    pub fn out(&self) -> &Path {
        &self.out
    }

    fn lock(&self) -> MutexGuard<'_, RecordState> {
        match self.state.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Exchanges in flight, and when the last one started or ended.
    pub fn activity(&self) -> (usize, Option<Instant>) {
        let state = self.lock();
        (state.in_flight, state.last_activity)
    }

    /// How many exchanges have been recorded (ended) so far.
    pub fn recorded(&self) -> usize {
        self.lock()
            .conversations
            .iter()
            .flat_map(|c| &c.slots)
            .filter(|slot| matches!(slot, Slot::Done(_)))
            .count()
    }

    /// The router recording every request.
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new()
            .fallback(forward)
            .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
            .with_state(self.clone())
    }

    /// Assigns a request to its conversation (a new one when none continues).
    fn begin(
        &self,
        identity: Option<&Identity>,
        endpoint: &str,
        root: Option<&str>,
        step: Option<usize>,
    ) -> (u64, SlotRef) {
        let mut state = self.lock();
        state.seq += 1;
        state.in_flight += 1;
        state.last_activity = Some(Instant::now());
        let identity_key = identity.map(|identity| {
            if !state
                .identities
                .iter()
                .any(|known| known.key == identity.key)
            {
                // A parent that never called is not recorded: the child is then a
                // root, as it will be when replayed.
                let parent = identity
                    .parent
                    .clone()
                    .filter(|parent| state.identities.iter().any(|known| &known.key == parent));
                state.identities.push(IndexIdentity {
                    key: identity.key.clone(),
                    rung: identity.rung.as_str().to_string(),
                    parent,
                });
            }
            identity.key.clone()
        });
        let continues = state.conversations.iter().rposition(|c| {
            c.identity == identity_key
                && c.endpoint == endpoint
                && c.root.as_deref() == root
                && match (c.last_step, step) {
                    (Some(last), Some(step)) => last <= step,
                    _ => true,
                }
        });
        let conversation = match continues {
            Some(at) => at,
            None => {
                state.conversations.push(Conversation {
                    identity: identity_key,
                    endpoint: endpoint.to_string(),
                    root: root.map(str::to_string),
                    last_step: None,
                    slots: Vec::new(),
                });
                state.conversations.len() - 1
            }
        };
        let entry = &mut state.conversations[conversation];
        if step.is_some() {
            entry.last_step = step;
        }
        entry.slots.push(Slot::InFlight);
        let slot = entry.slots.len() - 1;
        (state.seq, SlotRef { conversation, slot })
    }

    /// Records an ended exchange; its conversation file and the index are
    /// rewritten off the async workers (the agent's next request does not
    /// wait for the disk).
    fn end(self: &Arc<Self>, at: SlotRef, exchange: Exchange) {
        // Serialised outside the lock: a request is tens of kilobytes to escape.
        let line = serde_json::to_string(&exchange);
        {
            let mut state = self.lock();
            state.in_flight = state.in_flight.saturating_sub(1);
            state.last_activity = Some(Instant::now());
            match line {
                Ok(line) => {
                    state.conversations[at.conversation].slots[at.slot] = Slot::Done(line);
                    state.unwritten.insert(at.conversation);
                }
                Err(err) => {
                    let err = format!("exchange {}: {err}", exchange.seq);
                    tracing::warn!(%err, "cannot serialise an exchange for the cassette");
                    state.write_error.get_or_insert(err);
                }
            }
        }
        let recorder = self.clone();
        self.pending_writes.fetch_add(1, Ordering::SeqCst);
        tokio::task::spawn_blocking(move || {
            let _ = recorder.write(Which::Unwritten);
            recorder.pending_writes.fetch_sub(1, Ordering::SeqCst);
        });
    }

    /// Writes the conversations' files `which` says and the index, as the
    /// state is once the write lock is held (nothing when no exchange ended
    /// since the last write); a failure is kept for `finish`.
    fn write(&self, which: Which) -> Result<(), String> {
        let _writing = match self.writing.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let (conversations, index) = {
            let mut state = self.lock();
            let unwritten = std::mem::take(&mut state.unwritten);
            let which: Vec<usize> = match which {
                Which::Unwritten if unwritten.is_empty() => return Ok(()),
                Which::Unwritten => unwritten.into_iter().collect(),
                Which::All => (0..state.conversations.len()).collect(),
            };
            let conversations: Vec<(String, String)> = which
                .into_iter()
                .map(|c| {
                    let text = Self::conversation_text(&state, c);
                    (conversation_file_name(c + 1), text)
                })
                .collect();
            (conversations, self.index_text(&state))
        };
        let replace = |name: &str, text: &str| {
            let path = self.out.join(name);
            private_file::replace(&path, text.as_bytes())
                .map_err(|err| format!("{}: {err}", path.display()))
        };
        let result = conversations
            .iter()
            .try_for_each(|(name, text)| replace(name, text))
            .and_then(|()| replace(INDEX_FILE, &index?));
        if let Err(err) = &result {
            tracing::warn!(%err, "cannot write the cassette");
            self.lock().write_error.get_or_insert(err.clone());
        }
        result
    }

    fn conversation_text(state: &RecordState, conversation: usize) -> String {
        let lines = state.conversations[conversation]
            .slots
            .iter()
            .filter_map(|slot| match slot {
                Slot::Done(line) => Some(line.as_str()),
                Slot::InFlight => None,
            });
        let mut text = String::new();
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        text
    }

    fn index_text(&self, state: &RecordState) -> Result<String, String> {
        let conversations = state
            .conversations
            .iter()
            .enumerate()
            .filter_map(|(at, c)| {
                let exchanges = c
                    .slots
                    .iter()
                    .filter(|s| matches!(s, Slot::Done(_)))
                    .count();
                (exchanges > 0).then(|| IndexConversation {
                    file: conversation_file_name(at + 1),
                    identity: c.identity.clone(),
                    endpoint: c.endpoint.clone(),
                    root: c.root.clone(),
                    exchanges,
                })
            })
            .collect();
        let index = Index {
            kind: CASSETTE_TYPE.to_string(),
            version: CASSETTE_VERSION,
            recorded_at: self.recorded_at.clone(),
            upstream: self.upstream_text.clone(),
            declared: self.declared.clone(),
            identities: state.identities.clone(),
            conversations,
        };
        let mut text = serde_json::to_string_pretty(&index).map_err(|err| err.to_string())?;
        text.push('\n');
        Ok(text)
    }

    /// Stops recording: in-flight exchanges end (recorded as interrupted) and
    /// the files are written. An error means some file could not be written.
    pub async fn finish(&self) -> Result<(), HarnessError> {
        let _ = self.stopping.send(true);
        let deadline = Instant::now() + STOP_GRACE;
        while self.activity().0 > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Every ended exchange's own write is done before the last one.
        while self.pending_writes.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let result = self.write(Which::All);
        let write_error = self.lock().write_error.clone();
        match write_error.map_or(result, Err) {
            Ok(()) => Ok(()),
            Err(message) => Err(HarnessError::Cassette {
                path: self.out.clone(),
                line: None,
                message: format!("the cassette could not be written: {message}"),
            }),
        }
    }

    fn upstream_url(&self, path_and_query: &str) -> String {
        format!("{}{path_and_query}", self.upstream_text)
    }
}

/// Creates `out` (0700), or checks it holds no cassette (`force`: removes it).
fn prepare_out(out: &Path, force: bool) -> Result<(), HarnessError> {
    match std::fs::read_dir(out) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            private_file::create_dir(out).map_err(HarnessError::io(out))
        }
        Err(error) => Err(HarnessError::Io {
            path: out.to_path_buf(),
            error,
        }),
        Ok(entries) => {
            for entry in entries {
                let entry = entry.map_err(HarnessError::io(out))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if !is_cassette_file(&name) {
                    continue;
                }
                if !force {
                    return Err(HarnessError::CassetteExists {
                        dir: out.to_path_buf(),
                        file: name,
                    });
                }
                std::fs::remove_file(entry.path()).map_err(HarnessError::io(entry.path()))?;
            }
            Ok(())
        }
    }
}

/// The headers worth keeping: lower-case names, no secrets, no hop-by-hop.
fn recorded_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| !is_hop_by_hop(name.as_str()) && !is_secret_header(name.as_str()))
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}

async fn forward(State(recorder): State<Arc<Recorder>>, request: Request) -> Response {
    let started_ms = recorder.elapsed_ms();
    let (parts, body) = request.into_parts();
    let path_and_query = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let body = match axum::body::to_bytes(body, MAX_REQUEST_BYTES).await {
        Ok(body) => body,
        Err(err) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("fanout replay record: cannot read the request body: {err}"),
            )
                .into_response();
        }
    };
    let method = parts.method.as_str().to_string();
    let format = WireFormat::of_path(parts.uri.path());
    let endpoint = endpoint(&method, parts.uri.path());
    let identity = match identify(|name| parts.headers.get(name).map(HeaderValue::as_bytes)) {
        Ok(identity) => identity,
        Err(err) => {
            tracing::warn!(%err, %endpoint, "recording the request without its identity");
            None
        }
    };
    let recorded_body = RequestBody::from_bytes(&body);
    let content = match recorded_body.json() {
        Some(json) => request_content(format, json, &recorder.rules),
        None => {
            if format != WireFormat::Other && !body.is_empty() {
                tracing::warn!(%endpoint, "the request body is not JSON: recorded, identified by its headers only");
            }
            Default::default()
        }
    };
    let root = content.root.as_ref().map(|r| r.hash.clone());
    let (seq, at) = recorder.begin(identity.as_ref(), &endpoint, root.as_deref(), content.step);
    let request = RecordedRequest {
        method,
        path: redact_path(&path_and_query),
        headers: recorded_headers(&parts.headers),
        body: recorded_body,
    };
    let start = ExchangeStart {
        seq,
        started_ms,
        step: content.step,
        request,
    };
    let mut upstream = recorder
        .client
        .request(parts.method.clone(), recorder.upstream_url(&path_and_query))
        .body(body);
    for (name, value) in &parts.headers {
        if !is_hop_by_hop(name.as_str()) {
            upstream = upstream.header(name, value);
        }
    }
    let mut stopping = recorder.stopping.subscribe();
    let sent = tokio::select! {
        sent = upstream.send() => sent,
        _ = stopping.wait_for(|stop| *stop) => {
            let message = "recording stopped before the upstream answered".to_string();
            let answer = upstream_error(format, &message);
            recorder.end(at, start.end(&recorder, recorded_answer(&answer), None, Some(message), false));
            return answer.into_response();
        }
    };
    let upstream_response = match sent {
        Ok(response) => response,
        Err(err) => {
            let message = format!(
                "upstream {} unreachable: {}",
                recorder.upstream_text,
                error_chain(&err)
            );
            tracing::warn!(%message, %endpoint, "forwarding failed");
            let answer = upstream_error(format, &message);
            recorder.end(
                at,
                start.end(
                    &recorder,
                    recorded_answer(&answer),
                    None,
                    Some(message),
                    false,
                ),
            );
            return answer.into_response();
        }
    };
    let status = upstream_response.status();
    let headers = upstream_response.headers().clone();
    let event_stream = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let encoded = headers
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes() != b"identity");
    let mut builder = Response::builder().status(status.as_u16());
    for (name, value) in &headers {
        if !is_hop_by_hop(name.as_str()) {
            builder = builder.header(name, value);
        }
    }
    let (sender, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(32);
    let recorded_status = status.as_u16();
    let recorded_response_headers = recorded_headers(&headers);
    let task_recorder = recorder.clone();
    tokio::spawn(async move {
        let mut stream = upstream_response.bytes_stream();
        let mut collected: Vec<u8> = Vec::new();
        let mut first_byte_ms = None;
        let mut failure = None;
        loop {
            let next = tokio::select! {
                next = stream.next() => next,
                _ = stopping.wait_for(|stop| *stop) => {
                    failure = Some(format!("recording stopped after {} byte(s) of the response", collected.len()));
                    break;
                }
            };
            match next {
                None => break,
                Some(Ok(chunk)) => {
                    first_byte_ms.get_or_insert_with(|| task_recorder.elapsed_ms());
                    collected.extend_from_slice(&chunk);
                    if sender.send(Ok(chunk)).await.is_err() {
                        failure = Some(format!(
                            "the agent went away after {} byte(s) of the response",
                            collected.len()
                        ));
                        break;
                    }
                }
                Some(Err(err)) => {
                    let message = format!(
                        "the upstream response failed after {} byte(s): {}",
                        collected.len(),
                        error_chain(&err)
                    );
                    let _ = sender
                        .send(Err(std::io::Error::other(message.clone())))
                        .await;
                    failure = Some(message);
                    break;
                }
            }
        }
        drop(sender);
        let response = RecordedResponse {
            status: recorded_status,
            headers: recorded_response_headers,
            body: ResponseBody::from_bytes(&collected, event_stream && !encoded),
        };
        let truncated = failure.is_some();
        let exchange = start.end(&task_recorder, response, first_byte_ms, failure, truncated);
        task_recorder.end(at, exchange);
    });
    let body = Body::from_stream(futures::stream::unfold(
        receiver,
        |mut receiver| async move { receiver.recv().await.map(|item| (item, receiver)) },
    ));
    builder
        .body(body)
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}

/// What is known of an exchange when its request arrives.
#[derive(Debug)]
struct ExchangeStart {
    seq: u64,
    started_ms: u64,
    step: Option<usize>,
    request: RecordedRequest,
}

impl ExchangeStart {
    fn end(
        self,
        recorder: &Recorder,
        response: RecordedResponse,
        first_byte_ms: Option<u64>,
        failure: Option<String>,
        truncated: bool,
    ) -> Exchange {
        Exchange {
            seq: self.seq,
            started_ms: self.started_ms,
            first_byte_ms,
            ended_ms: recorder.elapsed_ms(),
            step: self.step,
            request: self.request,
            response,
            failure,
            truncated,
        }
    }
}

/// An error and its causes, one line.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The 502 the agent gets when the upstream cannot answer, in its API's shape.
struct UpstreamError {
    body: String,
}

impl IntoResponse for UpstreamError {
    fn into_response(self) -> Response {
        (
            StatusCode::BAD_GATEWAY,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            self.body,
        )
            .into_response()
    }
}

fn upstream_error(format: WireFormat, message: &str) -> UpstreamError {
    let body = match format {
        WireFormat::AnthropicMessages => wire::anthropic_error_body("api_error", message),
        _ => wire::openai_error_body("api_error", message),
    };
    UpstreamError {
        body: body.to_string(),
    }
}

fn recorded_answer(answer: &UpstreamError) -> RecordedResponse {
    RecordedResponse {
        status: StatusCode::BAD_GATEWAY.as_u16(),
        headers: vec![(
            header::CONTENT_TYPE.as_str().to_string(),
            "application/json".to_string(),
        )],
        body: ResponseBody::Text(answer.body.clone()),
    }
}

/// A recording proxy running on a background task (for the harness and tests).
#[derive(Debug)]
pub struct RunningRecorder {
    background: BackgroundServer,
    recorder: Arc<Recorder>,
}

impl RunningRecorder {
    /// Starts recording on `addr` (`127.0.0.1:0` for any free port).
    pub async fn start(options: RecordOptions, addr: &str) -> Result<Self, HarnessError> {
        let recorder = Recorder::new(options)?;
        let background = BackgroundServer::start(recorder.router(), addr).await?;
        Ok(Self {
            background,
            recorder,
        })
    }

    /// `http://ADDR`.
    pub fn base_url(&self) -> String {
        self.background.base_url()
    }

    /// The recorder (for its activity).
    pub fn recorder(&self) -> &Arc<Recorder> {
        &self.recorder
    }

    /// Stops: in-flight exchanges end as interrupted, the files are written.
    pub async fn finish(self) -> Result<(), HarnessError> {
        let finished = self.recorder.finish().await;
        self.background.shutdown(Some(STOP_GRACE)).await?;
        finished
    }
}

/// Serves the recording proxy on `listener` until `shutdown` resolves, then
/// finishes the cassette (what `fanout replay record` runs).
pub async fn serve(
    listener: tokio::net::TcpListener,
    recorder: Arc<Recorder>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HarnessError> {
    let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(crate::server::serve_router(
        listener,
        recorder.router(),
        async {
            let _ = stopped_rx.await;
        },
    ));
    shutdown.await;
    let finished = recorder.finish().await;
    let _ = stopped_tx.send(());
    if let Ok(Ok(Err(error))) = tokio::time::timeout(STOP_GRACE, server).await {
        return Err(error);
    }
    finished
}
