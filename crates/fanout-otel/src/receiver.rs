//! The receiver: `opentelemetry-otlp`'s span exporter (OTLP over HTTP, protobuf) on
//! fanout's own reqwest client (rustls), which also tells a refusal (a 4xx other than
//! 408 and 429: sending it again cannot help) from a receiver that is down, slow or
//! overloaded (worth trying again).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::InstrumentationScope;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

use crate::OtelError;

/// Where the spans go and how.
#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// The OTLP/HTTP traces URL, used as given (e.g. `http://127.0.0.1:6006/v1/traces`).
    pub endpoint: String,
    /// Extra request headers (`authorization`, `x-honeycomb-team`, …).
    pub headers: Vec<(String, String)>,
    /// How long one request may take.
    pub timeout: Duration,
}

impl ReceiverConfig {
    /// `endpoint` with no headers and a 10 s timeout.
    pub fn new(endpoint: impl Into<String>) -> ReceiverConfig {
        ReceiverConfig {
            endpoint: endpoint.into(),
            headers: Vec::new(),
            timeout: Duration::from_secs(10),
        }
    }

    /// The endpoint with any user and password taken out: what marks and messages name
    /// (headers, where credentials usually are, are never named).
    pub fn receiver_name(&self) -> String {
        fanout_store::redact_url(&self.endpoint)
    }
}

/// Why a batch was not taken.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// Unreachable, timed out, or answered 408, 429 or 5xx: try again later.
    #[error("{0}")]
    Transient(String),
    /// Refused for what it is (another 4xx): trying again cannot help.
    #[error("the receiver refused the spans: HTTP {status}: {body}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The start of the response body.
        body: String,
    },
}

/// The last HTTP status the transport saw, so a failed export can be classified.
type LastStatus = Arc<Mutex<Option<u16>>>;

/// reqwest 0.12 (the workspace's, rustls) as the exporter's HTTP client.
#[derive(Debug)]
struct Transport {
    client: reqwest::Client,
    last_status: LastStatus,
}

#[async_trait::async_trait]
impl HttpClient for Transport {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        if let Ok(mut last) = self.last_status.lock() {
            *last = None;
        }
        let request = reqwest::Request::try_from(request)?;
        let response = self.client.execute(request).await?;
        let status = response.status();
        if let Ok(mut last) = self.last_status.lock() {
            *last = Some(status.as_u16());
        }
        let headers = response.headers().clone();
        let body = response.bytes().await?;
        let mut out = Response::builder().status(status);
        if let Some(map) = out.headers_mut() {
            *map = headers;
        }
        Ok(out.body(body)?)
    }
}

/// One OTLP/HTTP receiver.
pub struct Receiver {
    exporter: opentelemetry_otlp::SpanExporter,
    last_status: LastStatus,
    scope: InstrumentationScope,
    name: String,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("name", &self.name)
            .finish()
    }
}

impl Receiver {
    /// The exporter for `config`; the resource names the service `fanout`.
    pub fn new(config: &ReceiverConfig) -> Result<Receiver, OtelError> {
        let url = reqwest::Url::parse(&config.endpoint).map_err(|err| OtelError::Endpoint {
            endpoint: config.receiver_name(),
            reason: err.to_string(),
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(OtelError::Endpoint {
                endpoint: config.receiver_name(),
                reason: "expected an http:// or https:// URL (OTLP over HTTP)".to_owned(),
            });
        }
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|err| OtelError::Client(err.to_string()))?;
        let last_status = LastStatus::default();
        let headers: HashMap<String, String> = config.headers.iter().cloned().collect();
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(config.endpoint.clone())
            .with_timeout(config.timeout)
            .with_headers(headers)
            .with_http_client(Transport {
                client,
                last_status: Arc::clone(&last_status),
            })
            .build()
            .map_err(|err| OtelError::Endpoint {
                endpoint: config.receiver_name(),
                reason: err.to_string(),
            })?;
        let version = env!("CARGO_PKG_VERSION");
        exporter.set_resource(
            &Resource::builder_empty()
                .with_service_name("fanout")
                .with_attribute(opentelemetry::KeyValue::new("service.version", version))
                .build(),
        );
        Ok(Receiver {
            exporter,
            last_status,
            scope: InstrumentationScope::builder("fanout")
                .with_version(version)
                .build(),
            name: config.receiver_name(),
        })
    }

    /// The instrumentation scope every span is sent under.
    pub fn scope(&self) -> &InstrumentationScope {
        &self.scope
    }

    /// The receiver's name (its endpoint, credentials redacted).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sends one batch; `Ok` once the receiver answered 2xx.
    pub async fn send(&self, batch: Vec<SpanData>) -> Result<(), SendError> {
        match self.exporter.export(batch).await {
            Ok(()) => Ok(()),
            Err(err) => {
                let status = self.last_status.lock().ok().and_then(|s| *s);
                Err(classify(status, &err.to_string()))
            }
        }
    }
}

fn classify(status: Option<u16>, message: &str) -> SendError {
    match status {
        Some(status @ 400..=499) if status != 408 && status != 429 => SendError::Refused {
            status,
            body: message.chars().take(300).collect(),
        },
        _ => SendError::Transient(message.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_told_from_outages() {
        assert!(matches!(
            classify(Some(400), "bad"),
            SendError::Refused { status: 400, .. }
        ));
        for status in [None, Some(408), Some(429), Some(500), Some(503)] {
            assert!(matches!(classify(status, "x"), SendError::Transient(_)));
        }
    }

    #[test]
    fn an_endpoint_that_is_not_http_is_an_error_naming_it() {
        let err = Receiver::new(&ReceiverConfig::new("grpc://user:secret@host:4317")).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("host:4317") && !text.contains("secret"),
            "{text}"
        );
        assert!(Receiver::new(&ReceiverConfig::new("not a url")).is_err());
    }
}
