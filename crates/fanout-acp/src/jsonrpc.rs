//! JSON-RPC 2.0 classification of single lines, and request/response correlation.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde_json::{Map, Value};

/// Which way a line travelled through the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Client (editor, orchestrator) to agent: the agent's stdin.
    ClientToAgent,
    /// Agent to client: the agent's stdout.
    AgentToClient,
}

impl Direction {
    /// The transcript tag (`c2a` / `a2c`, DESIGN 3.1).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClientToAgent => "c2a",
            Self::AgentToClient => "a2c",
        }
    }

    /// Parses a transcript tag.
    pub fn from_tag(tag: &str) -> Option<Self> {
        match tag {
            "c2a" => Some(Self::ClientToAgent),
            "a2c" => Some(Self::AgentToClient),
            _ => None,
        }
    }
}

/// A JSON-RPC request id: a number or a string (`1` and `"1"` are different ids).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RequestId {
    /// A JSON number.
    Number(serde_json::Number),
    /// A JSON string.
    String(String),
}

impl fmt::Display for RequestId {
    /// Numbers as their JSON text, strings verbatim (used for turn ids).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::String(s) => f.write_str(s),
        }
    }
}

/// A JSON-RPC error object, read leniently.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// `code`, when an integer.
    pub code: Option<i64>,
    /// `message`, when a non-empty string.
    pub message: Option<String>,
    /// The whole `error` member as sent.
    pub raw: Value,
}

impl RpcError {
    fn from_value(raw: Value) -> Self {
        Self {
            code: raw.get("code").and_then(Value::as_i64),
            message: raw
                .get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .map(str::to_owned),
            raw,
        }
    }

    /// The message, or the raw error as JSON text when it has none.
    pub fn summary(&self) -> String {
        match &self.message {
            Some(message) => message.clone(),
            None => self.raw.to_string(),
        }
    }
}

/// How a response ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseOutcome {
    /// `result`.
    Result(Value),
    /// `error` (it wins when both are present).
    Error(RpcError),
}

/// One understood JSON-RPC 2.0 message. `params` is `Value::Null` when absent.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request: it has an `id` and a `method`.
    Request {
        /// Its id.
        id: RequestId,
        /// Its method.
        method: String,
        /// Its params.
        params: Value,
    },
    /// A notification: a `method` and no `id`.
    Notification {
        /// Its method.
        method: String,
        /// Its params.
        params: Value,
    },
    /// A response: `result` or `error`.
    Response {
        /// `None` for the `"id": null` of errors about unreadable requests.
        id: Option<RequestId>,
        /// How it ended.
        outcome: ResponseOutcome,
    },
}

/// Why a line was not understood. The proxy still forwards it; the tap counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotUnderstoodReason {
    /// Empty or whitespace-only line.
    Blank,
    /// Not UTF-8.
    InvalidUtf8,
    /// Not JSON.
    InvalidJson,
    /// Valid JSON but not an object (batches are not used by ACP).
    NotAnObject,
    /// `jsonrpc` present with a value other than `"2.0"`.
    WrongVersion,
    /// `method` present but not a string.
    InvalidMethod,
    /// `id` of a type other than number or string (or `null` on a request).
    InvalidId,
    /// Neither `method` nor `result`/`error`.
    NeitherRequestNorResponse,
}

/// Classifies one line (without its newline). Never panics.
///
/// Lenient where it costs nothing: a missing `jsonrpc` member is accepted, unknown
/// members are ignored, and a response carrying both `result` and `error` is an error.
pub fn classify(line: &str) -> Result<Message, NotUnderstoodReason> {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return Err(NotUnderstoodReason::Blank);
    }
    let value: Value =
        serde_json::from_str(trimmed).map_err(|_| NotUnderstoodReason::InvalidJson)?;
    classify_value(value)
}

/// [`classify`] for raw bytes; invalid UTF-8 is not understood.
pub fn classify_bytes(line: &[u8]) -> Result<Message, NotUnderstoodReason> {
    let text = std::str::from_utf8(line).map_err(|_| NotUnderstoodReason::InvalidUtf8)?;
    classify(text)
}

/// Classifies an already parsed JSON value.
pub fn classify_value(value: Value) -> Result<Message, NotUnderstoodReason> {
    let Value::Object(mut map) = value else {
        return Err(NotUnderstoodReason::NotAnObject);
    };
    if let Some(version) = map.get("jsonrpc")
        && version.as_str() != Some("2.0")
    {
        return Err(NotUnderstoodReason::WrongVersion);
    }
    let params = map.remove("params").unwrap_or(Value::Null);
    match map.remove("method") {
        Some(Value::String(method)) => match map.remove("id") {
            None => Ok(Message::Notification { method, params }),
            Some(id) => Ok(Message::Request {
                id: request_id(id).ok_or(NotUnderstoodReason::InvalidId)?,
                method,
                params,
            }),
        },
        Some(_) => Err(NotUnderstoodReason::InvalidMethod),
        None => classify_response(map),
    }
}

fn classify_response(mut map: Map<String, Value>) -> Result<Message, NotUnderstoodReason> {
    let error = map.remove("error").filter(|e| !e.is_null());
    let result = map.remove("result");
    let outcome = match (error, result) {
        (Some(error), _) => ResponseOutcome::Error(RpcError::from_value(error)),
        (None, Some(result)) => ResponseOutcome::Result(result),
        (None, None) => return Err(NotUnderstoodReason::NeitherRequestNorResponse),
    };
    let id = match map.remove("id") {
        None | Some(Value::Null) => None,
        Some(id) => Some(request_id(id).ok_or(NotUnderstoodReason::InvalidId)?),
    };
    Ok(Message::Response { id, outcome })
}

fn request_id(value: Value) -> Option<RequestId> {
    match value {
        Value::Number(n) => Some(RequestId::Number(n)),
        Value::String(s) => Some(RequestId::String(s)),
        _ => None,
    }
}

/// Requests awaiting their response, for ONE direction of travel of the request.
///
/// Bounded: past `capacity` the oldest pending request is forgotten (its response will
/// then count as unmatched), so an agent that never answers cannot grow memory.
#[derive(Debug)]
pub(crate) struct PendingRequests<T> {
    by_id: HashMap<RequestId, (u64, T)>,
    by_age: BTreeMap<u64, RequestId>,
    next_seq: u64,
    capacity: usize,
}

impl<T> PendingRequests<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            by_id: HashMap::new(),
            by_age: BTreeMap::new(),
            next_seq: 0,
            capacity: capacity.max(1),
        }
    }

    /// Records a request; a reused id replaces the older request.
    pub(crate) fn insert(&mut self, id: RequestId, pending: T) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some((old_seq, _)) = self.by_id.insert(id.clone(), (seq, pending)) {
            self.by_age.remove(&old_seq);
        }
        self.by_age.insert(seq, id);
        while self.by_id.len() > self.capacity {
            let Some((_, oldest)) = self.by_age.pop_first() else {
                break;
            };
            self.by_id.remove(&oldest);
        }
    }

    /// Removes and returns the request a response answers.
    pub(crate) fn take(&mut self, id: &RequestId) -> Option<T> {
        let (seq, pending) = self.by_id.remove(id)?;
        self.by_age.remove(&seq);
        Some(pending)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classifies_requests_notifications_and_responses() {
        let request =
            classify(r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/p"}}"#);
        assert_eq!(
            request,
            Ok(Message::Request {
                id: RequestId::Number(1.into()),
                method: "session/new".into(),
                params: json!({"cwd": "/p"}),
            })
        );
        let notification = classify(r#"{"jsonrpc":"2.0","method":"session/update"}"#);
        assert_eq!(
            notification,
            Ok(Message::Notification {
                method: "session/update".into(),
                params: Value::Null
            })
        );
        let response = classify(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#);
        assert_eq!(
            response,
            Ok(Message::Response {
                id: Some(RequestId::String("a".into())),
                outcome: ResponseOutcome::Result(json!({})),
            })
        );
        let Ok(Message::Response {
            id: None,
            outcome: ResponseOutcome::Error(error),
        }) = classify(
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
        )
        else {
            panic!("expected an error response");
        };
        assert_eq!(error.code, Some(-32700));
        assert_eq!(error.summary(), "Parse error");
    }

    #[test]
    fn rejects_what_is_not_json_rpc() {
        assert_eq!(classify(""), Err(NotUnderstoodReason::Blank));
        assert_eq!(classify("  \r"), Err(NotUnderstoodReason::Blank));
        assert_eq!(classify("hello"), Err(NotUnderstoodReason::InvalidJson));
        assert_eq!(classify("[1,2]"), Err(NotUnderstoodReason::NotAnObject));
        assert_eq!(classify("3"), Err(NotUnderstoodReason::NotAnObject));
        assert_eq!(
            classify(r#"{"jsonrpc":"1.0","method":"x"}"#),
            Err(NotUnderstoodReason::WrongVersion)
        );
        assert_eq!(
            classify(r#"{"method":7}"#),
            Err(NotUnderstoodReason::InvalidMethod)
        );
        assert_eq!(
            classify(r#"{"method":"m","id":{}}"#),
            Err(NotUnderstoodReason::InvalidId)
        );
        assert_eq!(
            classify(r#"{"method":"m","id":null}"#),
            Err(NotUnderstoodReason::InvalidId)
        );
        assert_eq!(
            classify(r#"{"id":[],"result":1}"#),
            Err(NotUnderstoodReason::InvalidId)
        );
        assert_eq!(
            classify(r#"{"id":1}"#),
            Err(NotUnderstoodReason::NeitherRequestNorResponse)
        );
        assert_eq!(
            classify_bytes(&[0xff, 0xfe]),
            Err(NotUnderstoodReason::InvalidUtf8)
        );
    }

    #[test]
    fn accepts_missing_version_and_prefers_error_over_result() {
        assert!(matches!(
            classify(r#"{"method":"m"}"#),
            Ok(Message::Notification { .. })
        ));
        assert!(matches!(
            classify(r#"{"id":2,"result":1,"error":{"code":1}}"#),
            Ok(Message::Response {
                outcome: ResponseOutcome::Error(_),
                ..
            })
        ));
        assert!(matches!(
            classify(r#"{"id":2,"result":1,"error":null}"#),
            Ok(Message::Response {
                outcome: ResponseOutcome::Result(_),
                ..
            })
        ));
    }

    #[test]
    fn error_summary_falls_back_to_raw_json() {
        let error = RpcError::from_value(json!("boom"));
        assert_eq!(error.code, None);
        assert_eq!(error.summary(), "\"boom\"");
    }

    #[test]
    fn request_ids_of_different_types_differ() {
        assert_ne!(RequestId::Number(1.into()), RequestId::String("1".into()));
        assert_eq!(RequestId::Number(7.into()).to_string(), "7");
        assert_eq!(RequestId::String("x-1".into()).to_string(), "x-1");
    }

    #[test]
    fn pending_requests_are_bounded_oldest_first() {
        let mut pending = PendingRequests::new(2);
        pending.insert(RequestId::Number(1.into()), "a");
        pending.insert(RequestId::Number(2.into()), "b");
        pending.insert(RequestId::Number(3.into()), "c");
        assert_eq!(pending.len(), 2);
        assert_eq!(pending.take(&RequestId::Number(1.into())), None);
        assert_eq!(pending.take(&RequestId::Number(2.into())), Some("b"));
        pending.insert(RequestId::Number(3.into()), "c2");
        assert_eq!(pending.take(&RequestId::Number(3.into())), Some("c2"));
        assert_eq!(pending.len(), 0);
    }
}
