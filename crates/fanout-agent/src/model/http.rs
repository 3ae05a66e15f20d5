//! What the HTTP providers share: the provider itself ([`HttpProvider`], generic over
//! the wire format), the redacted key type, the client, error mapping, and turning an
//! SSE body into a [`ChunkStream`].

use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use super::sse::{SseDecoder, SseEvent};
use super::{
    Chunk, ChunkStream, GenerateOptions, LanguageModel, ModelError, ModelRequest,
    ProviderConfigError, SESSION_ID_HEADER,
};

/// One streaming HTTP API: where it lives, how it authenticates, how a request body
/// looks and how its SSE events decode. The providers differ only in these.
pub trait WireFormat: Send + Sync + 'static {
    /// Endpoint discovery and authentication.
    const SPEC: EndpointSpec;
    /// The streaming path under the base URL.
    const PATH: &'static str;
    /// Headers every request carries besides the key and the session id.
    const HEADERS: &'static [(&'static str, &'static str)];
    /// The SSE decoder of one response.
    type Sse: SseProtocol + Default;
    /// The JSON body of a streaming request.
    fn request_body(request: &ModelRequest) -> Value;
}

/// A model behind a streaming HTTP API in wire format `W`.
pub struct HttpProvider<W> {
    endpoint: Endpoint,
    format: PhantomData<W>,
}

impl<W> fmt::Debug for HttpProvider<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpProvider")
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl<W: WireFormat> HttpProvider<W> {
    /// Base URL from the argument, else the base-URL environment variable, else the
    /// public endpoint; key from the environment only (see [`Endpoint::from_env`]).
    pub fn from_env(base_url: Option<&str>) -> Result<Self, ProviderConfigError> {
        Endpoint::from_env(&W::SPEC, base_url).map(Self::with)
    }

    /// A provider for `base_url` with an optional key.
    pub fn new(base_url: &str, api_key: Option<String>) -> Result<Self, ProviderConfigError> {
        Endpoint::new(base_url, api_key).map(Self::with)
    }

    fn with(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            format: PhantomData,
        }
    }
}

#[async_trait::async_trait]
impl<W: WireFormat> LanguageModel for HttpProvider<W> {
    fn provider_name(&self) -> &str {
        W::SPEC.provider
    }

    async fn stream(
        &self,
        request: ModelRequest,
        options: GenerateOptions,
    ) -> Result<ChunkStream, ModelError> {
        let response = self
            .endpoint
            .post_stream(
                &W::SPEC,
                W::PATH,
                W::HEADERS,
                &W::request_body(&request),
                &options,
            )
            .await?;
        Ok(sse_stream(W::SPEC.provider, response, W::Sse::default()))
    }
}

/// An API key. It has no `Display`, its `Debug` is redacted, and it is only
/// ever put into a request header marked sensitive.
#[derive(Clone)]
pub(crate) struct ApiKey(String);

impl ApiKey {
    pub(crate) fn new(key: String) -> Option<Self> {
        let key = key.trim().to_string();
        (!key.is_empty()).then_some(Self(key))
    }

    pub(crate) fn header_value(
        &self,
        prefix: &str,
    ) -> Result<reqwest::header::HeaderValue, String> {
        let mut value = reqwest::header::HeaderValue::from_str(&format!("{prefix}{}", self.0))
            .map_err(|_| "the API key contains characters not allowed in a header".to_string())?;
        value.set_sensitive(true);
        Ok(value)
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// How an HTTP provider finds its endpoint and authenticates.
pub struct EndpointSpec {
    pub provider: &'static str,
    pub default_base_url: &'static str,
    pub base_url_env: &'static str,
    pub api_key_env: &'static str,
    /// The header that carries the key, and the text before the key in it.
    pub key_header: &'static str,
    pub key_prefix: &'static str,
}

/// One configured endpoint: the client, the base URL and the key, if any.
#[derive(Debug)]
pub(crate) struct Endpoint {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<ApiKey>,
}

impl Endpoint {
    /// Base URL from the argument, else the spec's environment variable, else the
    /// public endpoint; key from the environment only. A missing key is an error for
    /// the public endpoint; a custom endpoint (a local mock or replay server) is
    /// called without one.
    pub(crate) fn from_env(
        spec: &EndpointSpec,
        base_url: Option<&str>,
    ) -> Result<Self, ProviderConfigError> {
        let (base, key) = resolve(spec, base_url, env_non_empty)?;
        Self::new(&base, key)
    }

    /// An endpoint for `base_url` with an optional key.
    pub(crate) fn new(
        base_url: &str,
        api_key: Option<String>,
    ) -> Result<Self, ProviderConfigError> {
        Ok(Self {
            client: build_client(base_url).map_err(ProviderConfigError)?,
            base_url: base_url.to_string(),
            api_key: api_key.and_then(ApiKey::new),
        })
    }

    /// POSTs a streaming request to `path` with the key and the calling session's id
    /// (`x-fanout-session-id`), and returns the successful response.
    pub(crate) async fn post_stream(
        &self,
        spec: &EndpointSpec,
        path: &str,
        extra_headers: &[(&'static str, &'static str)],
        body: &Value,
        options: &GenerateOptions,
    ) -> Result<reqwest::Response, ModelError> {
        let mut builder = self
            .client
            .post(join_url(&self.base_url, path))
            .header("accept", "text/event-stream")
            .json(body);
        for (name, value) in extra_headers {
            builder = builder.header(*name, *value);
        }
        if let Some(key) = &self.api_key {
            let value =
                key.header_value(spec.key_prefix)
                    .map_err(|message| ModelError::Transport {
                        provider: spec.provider.into(),
                        message,
                    })?;
            builder = builder.header(spec.key_header, value);
        }
        if let Some(id) = &options.session_id {
            builder = builder.header(SESSION_ID_HEADER, id);
        }
        send(spec.provider, Some(spec.api_key_env), builder).await
    }
}

/// The base URL and key of [`Endpoint::from_env`], with the environment lookup
/// given (so the rule is testable without touching the process environment).
fn resolve(
    spec: &EndpointSpec,
    base_url: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(String, Option<String>), ProviderConfigError> {
    let base = base_url
        .map(str::to_string)
        .or_else(|| env(spec.base_url_env))
        .unwrap_or_else(|| spec.default_base_url.to_string());
    let key = env(spec.api_key_env);
    if key.is_none() && base.trim_end_matches('/') == spec.default_base_url {
        return Err(ProviderConfigError(format!(
            "{} is not set (needed for {})",
            spec.api_key_env, spec.default_base_url
        )));
    }
    Ok((base, key))
}

/// Reads an environment variable, treating empty as unset.
pub(crate) fn env_non_empty(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.trim().is_empty())
}

/// A client for one base URL. Loopback URLs bypass any configured proxy, so
/// local test servers and replay servers are always reached directly.
pub(crate) fn build_client(base_url: &str) -> Result<reqwest::Client, String> {
    let url =
        reqwest::Url::parse(base_url).map_err(|e| format!("invalid base URL {base_url:?}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("base URL {base_url:?} must be http or https"));
    }
    let host = url.host_str().unwrap_or("");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let mut builder = reqwest::Client::builder().connect_timeout(Duration::from_secs(30));
    if loopback {
        builder = builder.no_proxy();
    }
    builder
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// Joins a base URL and a path without doubling or dropping the `/`.
pub(crate) fn join_url(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// Describes a reqwest error with its causes (never includes headers).
pub(crate) fn describe(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Sends a request; a non-2xx status becomes [`ModelError::Http`] with the
/// provider's own error message.
pub(crate) async fn send(
    provider: &str,
    hint_env: Option<&'static str>,
    request: reqwest::RequestBuilder,
) -> Result<reqwest::Response, ModelError> {
    let response = request.send().await.map_err(|e| ModelError::Transport {
        provider: provider.to_string(),
        message: describe(&e),
    })?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = response.text().await.unwrap_or_default();
    Err(ModelError::Http {
        provider: provider.to_string(),
        status: status.as_u16(),
        message: error_message(&body)
            .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_string()),
        hint_env,
    })
}

/// The message of an error body: `{"error":{"message":…}}`, `{"error":"…"}`,
/// `{"message":…}`, or the start of a non-JSON body.
pub(crate) fn error_message(body: &str) -> Option<String> {
    let body = body.trim();
    if body.is_empty() {
        return None;
    }
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        let error = value.get("error");
        let found = error
            .and_then(|e| e.get("message"))
            .or_else(|| error.filter(|e| e.is_string()))
            .or_else(|| value.get("message"))
            .and_then(Value::as_str);
        if let Some(message) = found {
            let kind = error
                .and_then(|e| e.get("type"))
                .and_then(Value::as_str)
                .map(|t| format!("{t}: "))
                .unwrap_or_default();
            return Some(format!("{kind}{message}"));
        }
    }
    Some(body.chars().take(300).collect())
}

/// Decodes one provider's SSE events into chunks.
pub trait SseProtocol: Send + 'static {
    /// Handles one event; an `Err` breaks the stream with that message.
    fn on_event(&mut self, event: SseEvent) -> Result<Vec<Chunk>, String>;
    /// Whether the response is complete (no more reading needed).
    fn is_done(&self) -> bool;
    /// The body ended; returns final chunks or why the response is incomplete.
    fn on_eof(&mut self) -> Result<Vec<Chunk>, String>;
}

struct SseState<P> {
    body: futures::stream::BoxStream<'static, Result<Vec<u8>, String>>,
    decoder: SseDecoder,
    protocol: P,
    pending: VecDeque<Result<Chunk, ModelError>>,
    finished: bool,
    provider: String,
}

/// Turns a successful streaming response into chunks.
pub(crate) fn sse_stream<P: SseProtocol>(
    provider: &str,
    response: reqwest::Response,
    protocol: P,
) -> ChunkStream {
    let body = response
        .bytes_stream()
        .map(|r| r.map(|b| b.to_vec()).map_err(|e| describe(&e)))
        .boxed();
    let state = SseState {
        body,
        decoder: SseDecoder::new(),
        protocol,
        pending: VecDeque::new(),
        finished: false,
        provider: provider.to_string(),
    };
    Box::pin(futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(item) = st.pending.pop_front() {
                return Some((item, st));
            }
            if st.finished {
                return None;
            }
            let broke = |st: &SseState<P>, message: String| ModelError::Stream {
                provider: st.provider.clone(),
                message,
            };
            match st.body.next().await {
                Some(Ok(bytes)) => {
                    for event in st.decoder.push(&bytes) {
                        match st.protocol.on_event(event) {
                            Ok(chunks) => st.pending.extend(chunks.into_iter().map(Ok)),
                            Err(message) => {
                                let err = broke(&st, message);
                                st.pending.push_back(Err(err));
                                st.finished = true;
                                break;
                            }
                        }
                        if st.protocol.is_done() {
                            st.finished = true;
                            break;
                        }
                    }
                }
                Some(Err(message)) => {
                    let err = broke(&st, format!("connection broke mid-response: {message}"));
                    st.pending.push_back(Err(err));
                    st.finished = true;
                }
                None => {
                    match st.protocol.on_eof() {
                        Ok(chunks) => st.pending.extend(chunks.into_iter().map(Ok)),
                        Err(message) => {
                            let err = broke(&st, message);
                            st.pending.push_back(Err(err));
                        }
                    }
                    st.finished = true;
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_are_extracted() {
        assert_eq!(
            error_message(r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#)
                .unwrap(),
            "authentication_error: invalid x-api-key"
        );
        assert_eq!(error_message(r#"{"error":"nope"}"#).unwrap(), "nope");
        assert_eq!(error_message("plain text").unwrap(), "plain text");
        assert_eq!(error_message("  "), None);
    }

    #[test]
    fn keys_are_redacted_in_debug() {
        let key = ApiKey::new("sk-secret".into()).unwrap();
        assert!(!format!("{key:?}").contains("sk-secret"));
        assert!(ApiKey::new("  ".into()).is_none());
        assert!(key.header_value("Bearer ").unwrap().is_sensitive());
    }

    #[test]
    fn a_key_or_a_custom_base_url_makes_the_endpoint_usable() {
        use crate::model::anthropic::AnthropicApi;
        let spec = &<AnthropicApi as WireFormat>::SPEC;
        // As `env_non_empty` reads it: blank is unset.
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(var, value)| *var == name && !value.trim().is_empty())
                    .map(|(_, value)| value.to_string())
            }
        };
        let err = resolve(spec, None, env(&[])).unwrap_err().to_string();
        assert_eq!(
            err,
            "ANTHROPIC_API_KEY is not set (needed for https://api.anthropic.com)"
        );
        assert!(
            resolve(spec, None, env(&[("ANTHROPIC_API_KEY", "  ")])).is_err(),
            "a blank key is no key"
        );
        assert!(
            resolve(spec, Some("https://api.anthropic.com/"), env(&[])).is_err(),
            "the public endpoint named explicitly still needs the key"
        );
        let keyed = resolve(spec, None, env(&[("ANTHROPIC_API_KEY", "sk-test")])).unwrap();
        assert_eq!(
            keyed,
            ("https://api.anthropic.com".into(), Some("sk-test".into()))
        );
        assert_eq!(
            resolve(spec, Some("http://127.0.0.1:1"), env(&[])).unwrap(),
            ("http://127.0.0.1:1".into(), None),
            "a custom endpoint needs no key"
        );
        assert_eq!(
            resolve(
                spec,
                None,
                env(&[("ANTHROPIC_BASE_URL", "http://127.0.0.1:2")])
            )
            .unwrap(),
            ("http://127.0.0.1:2".into(), None),
            "nor does one from the environment"
        );
        assert_eq!(
            resolve(
                spec,
                Some("http://127.0.0.1:1"),
                env(&[("ANTHROPIC_BASE_URL", "http://127.0.0.1:2")])
            )
            .unwrap()
            .0,
            "http://127.0.0.1:1",
            "the flag wins over the environment"
        );
    }

    #[test]
    fn urls_join_cleanly() {
        assert_eq!(
            join_url("http://h/v1/", "/chat/completions"),
            "http://h/v1/chat/completions"
        );
        assert_eq!(join_url("http://h", "v1/messages"), "http://h/v1/messages");
    }
}
