//! The cassette on disk (DESIGN 5.5): a directory holding `index.json` and one
//! JSONL file per recorded conversation, one line per exchange.
//!
//! ```text
//! index.json
//!   {"type":"fanout-cassette","version":1,"recordedAt","upstream",
//!    "declared":{"workspace":"/tmp/…/workspace",…},     run-specific values
//!    "identities":[{"key":"claude-agent:a1…","rung":"claude-agent",
//!                   "parent":"claude-session:…"|null}],  first-call order
//!    "conversations":[{"file":"conversation-001.jsonl",
//!                      "identity":"claude-agent:a1…"|null,
//!                      "endpoint":"POST /v1/messages","root":"sha256:…"|null,
//!                      "exchanges":2}]}                    first-call order
//! conversation-001.jsonl, one line per exchange:
//!   {"seq","startedMs","firstByteMs","endedMs","step",
//!    "request":{"method","path","headers":[[name,value]…],"body"|"bodyText"|"bodyBase64"},
//!    "response":{"status","headers",[…],"sse":["event: …\ndata: …\n\n",…]
//!                |"bodyText"|"bodyBase64"},
//!    "failure":"upstream unreachable: …"|null}
//! ```
//!
//! Header names are lower case; secrets (API keys, auth headers, cookies) are
//! never written (see [`is_secret_header`]). A JSON request body is kept as
//! JSON; a response keeps its exact bytes (its SSE events verbatim, in order).

use std::collections::BTreeMap;

use base64::Engine;
use serde::{Deserialize, Serialize};

/// The index's `type`.
pub const CASSETTE_TYPE: &str = "fanout-cassette";
/// The version this code writes and reads.
pub const CASSETTE_VERSION: u32 = 1;
/// The index file.
pub const INDEX_FILE: &str = "index.json";

/// The file of the `index`-th conversation (1-based): `conversation-001.jsonl`.
pub fn conversation_file_name(index: usize) -> String {
    format!("conversation-{index:03}.jsonl")
}

/// Whether `name` is a file a cassette consists of (what `--force` replaces).
pub fn is_cassette_file(name: &str) -> bool {
    name == INDEX_FILE
        || (name.starts_with("conversation-") && name.ends_with(".jsonl"))
        || (name.starts_with(".conversation-") && name.ends_with(".partial"))
        || name == ".index.json.partial"
}

/// Name fragments of headers that carry credentials: never written.
const SECRET_FRAGMENTS: [&str; 7] = [
    "auth",
    "key",
    "token",
    "secret",
    "cookie",
    "password",
    "signature",
];

/// Whether a header (lower-case name) may carry a secret and must not be written.
pub fn is_secret_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_FRAGMENTS
        .iter()
        .any(|fragment| name.contains(fragment))
}

/// Query parameters that carry credentials (Gemini's `key=`): their values
/// are replaced in recorded paths.
const SECRET_QUERY_PARAMS: [&str; 6] = ["key", "api_key", "apikey", "token", "access_token", "sig"];

/// `path` with the values of credential query parameters replaced.
pub fn redact_path(path: &str) -> String {
    let Some((base, query)) = path.split_once('?') else {
        return path.to_string();
    };
    let parts: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _))
                if SECRET_QUERY_PARAMS.contains(&name.to_ascii_lowercase().as_str()) =>
            {
                format!("{name}=REDACTED")
            }
            _ => pair.to_string(),
        })
        .collect();
    format!("{base}?{}", parts.join("&"))
}

/// `index.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Index {
    /// Always [`CASSETTE_TYPE`].
    #[serde(rename = "type")]
    pub kind: String,
    /// [`CASSETTE_VERSION`].
    pub version: u32,
    /// When recording started (RFC 3339, UTC).
    pub recorded_at: String,
    /// The upstream the requests were forwarded to.
    pub upstream: String,
    /// Run-specific values of the recording (name -> value), for the
    /// volatile-value rules and for replaying paths into a new run.
    #[serde(default)]
    pub declared: BTreeMap<String, String>,
    /// Caller identities, in first-call order.
    #[serde(default)]
    pub identities: Vec<IndexIdentity>,
    /// Conversations, in first-call order.
    pub conversations: Vec<IndexConversation>,
}

/// One identity of the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexIdentity {
    /// `<rung>:<id>`.
    pub key: String,
    /// The rung (`claude-agent`, …).
    pub rung: String,
    /// The parent identity's key.
    #[serde(default)]
    pub parent: Option<String>,
}

/// One conversation of the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexConversation {
    /// Its JSONL file, beside the index.
    pub file: String,
    /// Its caller's identity key; `null` when identified by content.
    #[serde(default)]
    pub identity: Option<String>,
    /// `METHOD /path`.
    pub endpoint: String,
    /// Its content root's hash, as recorded.
    #[serde(default)]
    pub root: Option<String>,
    /// How many exchanges its file holds.
    pub exchanges: usize,
}

/// One line of a conversation file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Exchange {
    /// Arrival order over the whole recording (1-based).
    pub seq: u64,
    /// When the request arrived (ms from the start of the recording).
    pub started_ms: u64,
    /// When the first response byte arrived.
    #[serde(default)]
    pub first_byte_ms: Option<u64>,
    /// When the response ended.
    pub ended_ms: u64,
    /// The request's step in its conversation, if known.
    #[serde(default)]
    pub step: Option<usize>,
    /// The request, minus secrets.
    pub request: RecordedRequest,
    /// What the agent was answered.
    pub response: RecordedResponse,
    /// Why the exchange did not complete normally, if it did not.
    #[serde(default)]
    pub failure: Option<String>,
    /// The response stopped short (its stream failed or was abandoned): a
    /// replay sends the recorded bytes, then cuts the connection.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// A recorded request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// `POST`, …
    pub method: String,
    /// Path and query (credential parameters redacted).
    pub path: String,
    /// Headers (lower-case names) minus secrets and hop-by-hop ones.
    pub headers: Vec<(String, String)>,
    /// The body.
    #[serde(flatten)]
    pub body: RequestBody,
}

/// A request body: JSON when it parses, else its text or bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RequestBody {
    /// No body.
    #[serde(rename = "noBody")]
    Empty(bool),
    /// A JSON body.
    #[serde(rename = "body")]
    Json(serde_json::Value),
    /// A UTF-8 body that is not JSON.
    #[serde(rename = "bodyText")]
    Text(String),
    /// Anything else, base64.
    #[serde(rename = "bodyBase64")]
    Base64(String),
}

impl RequestBody {
    /// The body of raw request bytes.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        if bytes.is_empty() {
            return RequestBody::Empty(true);
        }
        if let Ok(value) = serde_json::from_slice(bytes) {
            return RequestBody::Json(value);
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => RequestBody::Text(text.to_string()),
            Err(_) => RequestBody::Base64(base64::engine::general_purpose::STANDARD.encode(bytes)),
        }
    }

    /// The JSON value, if the body is JSON.
    pub fn json(&self) -> Option<&serde_json::Value> {
        match self {
            RequestBody::Json(value) => Some(value),
            _ => None,
        }
    }
}

/// A recorded response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedResponse {
    /// HTTP status.
    pub status: u16,
    /// Headers (lower-case names) minus secrets and hop-by-hop ones.
    pub headers: Vec<(String, String)>,
    /// The body.
    #[serde(flatten)]
    pub body: ResponseBody,
}

/// A response body, byte-exact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResponseBody {
    /// Server-sent events, each block verbatim (its blank line included).
    #[serde(rename = "sse")]
    Events(Vec<String>),
    /// A UTF-8 body.
    #[serde(rename = "bodyText")]
    Text(String),
    /// Anything else (a compressed body, say), base64.
    #[serde(rename = "bodyBase64")]
    Base64(String),
}

impl ResponseBody {
    /// The body of `bytes`: SSE blocks for an event stream that is UTF-8.
    pub fn from_bytes(bytes: &[u8], event_stream: bool) -> Self {
        match std::str::from_utf8(bytes) {
            Ok(text) if event_stream => ResponseBody::Events(sse_blocks(text)),
            Ok(text) => ResponseBody::Text(text.to_string()),
            Err(_) => ResponseBody::Base64(base64::engine::general_purpose::STANDARD.encode(bytes)),
        }
    }

    /// The exact bytes; `None` for base64 that does not decode.
    pub fn bytes(&self) -> Option<Vec<u8>> {
        match self {
            ResponseBody::Events(events) => Some(events.concat().into_bytes()),
            ResponseBody::Text(text) => Some(text.clone().into_bytes()),
            ResponseBody::Base64(encoded) => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok(),
        }
    }
}

/// `text` split after each blank line (`\n\n` or `\r\n\r\n`); a trailing
/// partial event is the last block. Concatenating the blocks gives `text`.
pub fn sse_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut rest = text;
    loop {
        let lf = rest.find("\n\n").map(|at| at + 2);
        let crlf = rest.find("\r\n\r\n").map(|at| at + 4);
        let end = match (lf, crlf) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => break,
        };
        blocks.push(rest[..end].to_string());
        rest = &rest[end..];
    }
    if !rest.is_empty() {
        blocks.push(rest.to_string());
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_blocks_are_verbatim_and_complete() {
        let text = "event: a\ndata: {}\n\nevent: b\r\ndata: 1\r\n\r\ndata: [DONE]\n\npartial";
        let blocks = sse_blocks(text);
        assert_eq!(
            blocks,
            [
                "event: a\ndata: {}\n\n",
                "event: b\r\ndata: 1\r\n\r\n",
                "data: [DONE]\n\n",
                "partial"
            ]
        );
        assert_eq!(blocks.concat(), text);
        assert!(sse_blocks("").is_empty());
    }

    #[test]
    fn secrets_are_recognised_in_headers_and_queries() {
        for name in [
            "authorization",
            "x-api-key",
            "api-key",
            "x-goog-api-key",
            "cookie",
            "set-cookie",
            "proxy-authorization",
            "openai-session-token",
        ] {
            assert!(is_secret_header(name), "{name}");
        }
        for name in [
            "x-claude-code-session-id",
            "thread-id",
            "content-type",
            "x-session-id",
        ] {
            assert!(!is_secret_header(name), "{name}");
        }
        assert_eq!(
            redact_path("/v1beta/models/m:streamGenerateContent?alt=sse&key=AIza123"),
            "/v1beta/models/m:streamGenerateContent?alt=sse&key=REDACTED"
        );
        assert_eq!(
            redact_path("/v1/messages?beta=true"),
            "/v1/messages?beta=true"
        );
    }

    #[test]
    fn bodies_round_trip_through_json() {
        let exchange = Exchange {
            seq: 1,
            started_ms: 0,
            first_byte_ms: Some(2),
            ended_ms: 3,
            step: Some(0),
            request: RecordedRequest {
                method: "POST".into(),
                path: "/v1/messages".into(),
                headers: vec![("content-type".into(), "application/json".into())],
                body: RequestBody::from_bytes(br#"{"stream":true}"#),
            },
            response: RecordedResponse {
                status: 200,
                headers: vec![],
                body: ResponseBody::from_bytes(b"data: x\n\n", true),
            },
            failure: None,
            truncated: false,
        };
        let line = serde_json::to_string(&exchange).unwrap();
        assert!(
            line.contains(r#""body":{"stream":true}"#) && line.contains(r#""sse":["data: x\n\n"]"#),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<Exchange>(&line).unwrap(), exchange);
        for (bytes, kind) in [
            (&b""[..], "noBody"),
            (b"not json", "bodyText"),
            (b"\xff\xfe", "bodyBase64"),
        ] {
            let body = serde_json::to_string(&RecordedRequest {
                method: "POST".into(),
                path: "/".into(),
                headers: vec![],
                body: RequestBody::from_bytes(bytes),
            })
            .unwrap();
            assert!(body.contains(kind), "{body}");
        }
        assert_eq!(
            ResponseBody::from_bytes(b"\x1f\x8b\x08", true)
                .bytes()
                .unwrap(),
            b"\x1f\x8b\x08"
        );
    }
}
