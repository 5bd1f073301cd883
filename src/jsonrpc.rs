//! The one JSON-RPC 2.0 layer both sides use.
//!
//! `ahp-types`' envelope takes only numeric ids and fails on `id: null`, and the
//! runtime numbers its own requests independently of ours, so the bridge parses
//! envelopes itself: ids are numbers or strings, params stay raw JSON (extension
//! fields survive), and a [`Peer`] correlates the calls we make with a deadline
//! on each and fails them all at once when the connection drops.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::oneshot;

pub const PARSE_ERROR: i32 = -32700;
pub const INVALID_REQUEST: i32 = -32600;
pub const METHOD_NOT_FOUND: i32 = -32601;
pub const INVALID_PARAMS: i32 = -32602;
pub const INTERNAL_ERROR: i32 = -32603;

/// A JSON-RPC id: JSON-RPC 2.0 allows numbers and strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Id {
    Num(i64),
    Str(String),
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    pub code: i32,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("method not found: {method}"))
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// One decoded inbound message.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request {
        id: Id,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    Response {
        id: Id,
        result: Result<Value, RpcError>,
    },
    /// An error response whose id is null (the peer could not parse our message).
    OrphanError(RpcError),
}

/// Why an inbound text is not a JSON-RPC message; carries the error to answer with.
#[derive(Debug, Clone, PartialEq)]
pub struct Malformed {
    pub id: Option<Id>,
    pub error: RpcError,
}

/// Decodes one message. Parse errors are -32700, shape errors -32600.
pub fn parse(text: &str) -> Result<Incoming, Malformed> {
    let value: Value = serde_json::from_str(text).map_err(|e| Malformed {
        id: None,
        error: RpcError::new(PARSE_ERROR, format!("parse error: {e}")),
    })?;
    classify(value)
}

/// Decodes an already-parsed JSON value.
pub fn classify(value: Value) -> Result<Incoming, Malformed> {
    let invalid = |id: Option<Id>, why: &str| Malformed {
        id,
        error: RpcError::new(INVALID_REQUEST, format!("invalid request: {why}")),
    };
    let Value::Object(mut obj) = value else {
        return Err(invalid(None, "expected a JSON object"));
    };
    let id = match obj.remove("id") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(v) => match serde_json::from_value::<Id>(v) {
            Ok(id) => Some(Some(id)),
            Err(_) => return Err(invalid(None, "id must be a number or a string")),
        },
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(id.flatten(), "jsonrpc must be \"2.0\""));
    }
    if let Some(method) = obj.remove("method") {
        let Value::String(method) = method else {
            return Err(invalid(id.flatten(), "method must be a string"));
        };
        let params = obj.remove("params").unwrap_or(Value::Null);
        return Ok(match id {
            None => Incoming::Notification { method, params },
            Some(None) => return Err(invalid(None, "a request id may not be null")),
            Some(Some(id)) => Incoming::Request { id, method, params },
        });
    }
    let error = match obj.remove("error") {
        Some(e) => Some(
            serde_json::from_value::<RpcError>(e)
                .map_err(|_| invalid(id.clone().flatten(), "malformed error object"))?,
        ),
        None => None,
    };
    match (id, error) {
        (Some(Some(id)), Some(error)) => Ok(Incoming::Response {
            id,
            result: Err(error),
        }),
        (Some(None), Some(error)) | (None, Some(error)) => Ok(Incoming::OrphanError(error)),
        (Some(Some(id)), None) => match obj.remove("result") {
            Some(result) => Ok(Incoming::Response {
                id,
                result: Ok(result),
            }),
            None => Err(invalid(Some(id), "response without result or error")),
        },
        _ => Err(invalid(None, "neither a request nor a response")),
    }
}

pub fn request(id: &Id, method: &str, params: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

pub fn notification(method: &str, params: &Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

pub fn response(id: &Id, result: Result<Value, RpcError>) -> Value {
    match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
    }
}

/// An error response to a message we could not identify (`id: null`).
pub fn error_response(id: Option<&Id>, error: RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// Nesting depth of a JSON text (arrays and objects), scanned without parsing,
/// so that a deep document is refused before serde recurses into it.
pub fn json_depth(text: &str) -> usize {
    let (mut depth, mut max, mut in_str, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_str {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Why a call we made did not return a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("connection closed")]
    Closed,
    #[error("peer answered with an error: {0}")]
    Rpc(RpcError),
}

type Sender = Box<dyn Fn(Value) -> bool + Send + Sync>;

/// Our side of a JSON-RPC connection: numbers the calls we make, keeps them
/// pending until the answer, a deadline, or the connection closing.
pub struct Peer {
    next_id: AtomicI64,
    pending: Mutex<HashMap<Id, oneshot::Sender<Result<Value, RpcError>>>>,
    closed: AtomicBool,
    send: Sender,
}

impl Peer {
    /// `send` queues one message for the wire and says whether it was accepted.
    pub fn new(send: impl Fn(Value) -> bool + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(Self {
            next_id: AtomicI64::new(1),
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            send: Box::new(send),
        })
    }

    fn pending(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<Id, oneshot::Sender<Result<Value, RpcError>>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Calls `method` and waits at most `timeout` for the answer.
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(CallError::Closed);
        }
        let id = Id::Num(self.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        self.pending().insert(id.clone(), tx);
        // A close that raced the insert above must still fail this call.
        if self.closed.load(Ordering::Acquire) || !(self.send)(request(&id, method, &params)) {
            self.pending().remove(&id);
            return Err(CallError::Closed);
        }
        let outcome = tokio::time::timeout(timeout, rx).await;
        match outcome {
            Ok(Ok(Ok(v))) => Ok(v),
            Ok(Ok(Err(e))) => Err(CallError::Rpc(e)),
            Ok(Err(_)) => Err(CallError::Closed),
            Err(_) => {
                self.pending().remove(&id);
                Err(CallError::Timeout(timeout))
            }
        }
    }

    /// Sends a notification; false when the connection no longer takes messages.
    pub fn notify(&self, method: &str, params: Value) -> bool {
        !self.closed.load(Ordering::Acquire) && (self.send)(notification(method, &params))
    }

    /// Sends any prepared message (a response, say).
    pub fn send_raw(&self, message: Value) -> bool {
        !self.closed.load(Ordering::Acquire) && (self.send)(message)
    }

    /// Delivers an answer; false when nobody waits for that id (late or unknown).
    pub fn complete(&self, id: &Id, result: Result<Value, RpcError>) -> bool {
        match self.pending().remove(id) {
            Some(tx) => tx.send(result).is_ok(),
            None => false,
        }
    }

    /// Fails every pending call at once and refuses new ones.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.pending().clear();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_and_number_ids_are_requests() {
        let r = parse(r#"{"jsonrpc":"2.0","id":"a-1","method":"ping","params":{}}"#).unwrap();
        assert!(matches!(r, Incoming::Request { id: Id::Str(ref s), .. } if s == "a-1"));
        let r = parse(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).unwrap();
        assert!(matches!(r, Incoming::Request { id: Id::Num(7), .. }));
        let r = parse(r#"{"jsonrpc":"2.0","method":"x"}"#).unwrap();
        assert!(matches!(r, Incoming::Notification { .. }));
    }

    #[test]
    fn null_id_error_is_orphan_and_bad_shapes_are_invalid() {
        let r =
            parse(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#).unwrap();
        assert!(matches!(r, Incoming::OrphanError(_)));
        assert_eq!(parse("{").unwrap_err().error.code, PARSE_ERROR);
        assert_eq!(parse("[1]").unwrap_err().error.code, INVALID_REQUEST);
        assert_eq!(
            parse(r#"{"jsonrpc":"1.0","id":1,"method":"a"}"#)
                .unwrap_err()
                .error
                .code,
            INVALID_REQUEST
        );
        let m = parse(r#"{"jsonrpc":"2.0","id":3,"method":5}"#).unwrap_err();
        assert_eq!(m.id, Some(Id::Num(3)));
    }

    #[test]
    fn depth_ignores_brackets_in_strings() {
        assert_eq!(json_depth(r#"{"a":[1,{"b":"[[[{"}]}"#), 3);
        assert_eq!(json_depth(&"[".repeat(200)), 200);
        assert_eq!(json_depth(r#""\"[""#), 0);
    }

    #[tokio::test]
    async fn call_times_out_and_close_fails_pending() {
        let peer = Peer::new(|_| true);
        let e = peer
            .call("x", Value::Null, Duration::from_millis(10))
            .await
            .unwrap_err();
        assert!(matches!(e, CallError::Timeout(_)));
        let p2 = peer.clone();
        let h =
            tokio::spawn(async move { p2.call("y", Value::Null, Duration::from_secs(60)).await });
        while peer.pending().is_empty() {
            tokio::task::yield_now().await;
        }
        peer.close();
        assert_eq!(h.await.unwrap().unwrap_err(), CallError::Closed);
        assert_eq!(
            peer.call("z", Value::Null, Duration::from_secs(1))
                .await
                .unwrap_err(),
            CallError::Closed
        );
    }

    #[tokio::test]
    async fn late_answer_is_not_delivered() {
        let peer = Peer::new(|_| true);
        let _ = peer.call("x", Value::Null, Duration::from_millis(5)).await;
        assert!(!peer.complete(&Id::Num(1), Ok(Value::Null)));
    }
}
