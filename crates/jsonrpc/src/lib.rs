//! The one JSON-RPC 2.0 layer both sides use: messages here, our calls in
//! [`peer`], the handling of every inbound message in [`inbound`].
//!
//! `ahp-types`' envelope takes only numeric ids and fails on `id: null`, and the
//! runtime numbers its own requests independently of ours, so the bridge parses
//! envelopes itself: ids are numbers or strings, params stay raw JSON (extension
//! fields survive), and a [`Peer`] correlates the calls we make with a deadline
//! on each and fails them all at once when the connection drops.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

mod inbound;
mod peer;
pub use inbound::{receive, Answer, Flow, InboundHandler, ReplyFuture};

pub use peer::{CallError, Peer};

/// The error codes JSON-RPC 2.0 itself defines; a protocol on top (AHP) adds
/// its own and converts them with `Into<i32>` the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
}

impl From<ErrorCode> for i32 {
    fn from(c: ErrorCode) -> i32 {
        match c {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
        }
    }
}

/// A JSON-RPC id: JSON-RPC 2.0 allows numbers and strings, and an answer
/// carries the id exactly as the request had it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Id {
    Num(i64),
    Str(String),
    /// A number no `i64` holds exactly (`18446744073709551616`, `1e3`), as
    /// the peer wrote it.
    Raw(String),
}

impl Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Id::Num(n) => s.serialize_i64(*n),
            Id::Str(v) => s.serialize_str(v),
            Id::Raw(raw) => RawValue::from_string(raw.clone())
                .map_err(serde::ser::Error::custom)?
                .serialize(s),
        }
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
            Id::Raw(raw) => f.write_str(raw),
        }
    }
}

/// A message's id as its text has it: the only way to keep a number no
/// `i64` holds (serde_json reads those as floats).
fn raw_id(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct IdOnly<'a> {
        #[serde(borrow)]
        id: &'a RawValue,
    }
    serde_json::from_str::<IdOnly>(text)
        .ok()
        .map(|m| m.id.get().to_owned())
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
    pub fn new(code: impl Into<i32>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            data: None,
        }
    }
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            ErrorCode::MethodNotFound,
            format!("method not found: {method}"),
        )
    }
    /// Whether this error carries `code`.
    pub fn is(&self, code: impl Into<i32>) -> bool {
        self.code == code.into()
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
        error: RpcError::new(ErrorCode::ParseError, format!("parse error: {e}")),
    })?;
    classify_with(value, || raw_id(text))
}

/// Decodes an already-parsed JSON value.
pub fn classify(value: Value) -> Result<Incoming, Malformed> {
    classify_with(value, || None)
}

/// The id of a message: `raw` gives the id's text when the parsed number
/// lost it.
fn id_of(v: Value, raw: impl FnOnce() -> Option<String>) -> Option<Id> {
    match v {
        Value::String(s) => Some(Id::Str(s)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Some(Id::Num(i)),
            None => Some(Id::Raw(raw().unwrap_or_else(|| n.to_string()))),
        },
        _ => None,
    }
}

fn classify_with(
    value: Value,
    raw: impl FnOnce() -> Option<String>,
) -> Result<Incoming, Malformed> {
    let invalid = |id: Option<Id>, why: &str| Malformed {
        id,
        error: RpcError::new(ErrorCode::InvalidRequest, format!("invalid request: {why}")),
    };
    let Value::Object(mut obj) = value else {
        return Err(invalid(None, "expected a JSON object"));
    };
    let id = match obj.remove("id") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(v) => match id_of(v, raw) {
            Some(id) => Some(Some(id)),
            None => return Err(invalid(None, "id must be a number or a string")),
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

pub fn notification<P: Serialize + ?Sized>(method: &str, params: &P) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// A response as it goes out, serialized in one pass (the id verbatim).
#[derive(Serialize)]
struct Outgoing<'a> {
    jsonrpc: &'static str,
    id: Option<&'a Id>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a RpcError>,
}

impl Outgoing<'_> {
    fn text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A response, serialized.
pub fn response(id: &Id, result: Result<Value, RpcError>) -> String {
    let (result, error) = match &result {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some(e)),
    };
    let out = Outgoing {
        jsonrpc: "2.0",
        id: Some(id),
        result,
        error,
    };
    out.text()
}

/// An error response to a message we could not identify (`id: null`), serialized.
pub fn error_response(id: Option<&Id>, error: RpcError) -> String {
    let out = Outgoing {
        jsonrpc: "2.0",
        id,
        result: None,
        error: Some(&error),
    };
    out.text()
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
    fn ids_are_answered_exactly_as_they_came() {
        for id in [
            "9223372036854775808",
            "18446744073709551616",
            "1e3",
            "-0.5",
            "7",
            "\"s\"",
        ] {
            let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            let Incoming::Request { id: got, .. } = parse(&text).unwrap() else {
                panic!("{text}")
            };
            let answer = response(&got, Ok(Value::Null));
            assert!(answer.contains(&format!("\"id\":{id}")), "{id}: {answer}");
        }
    }

    #[test]
    fn null_id_error_is_orphan_and_bad_shapes_are_invalid() {
        let r =
            parse(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#).unwrap();
        assert!(matches!(r, Incoming::OrphanError(_)));
        assert_eq!(
            parse("{").unwrap_err().error.code,
            i32::from(ErrorCode::ParseError)
        );
        assert_eq!(
            parse("[1]").unwrap_err().error.code,
            i32::from(ErrorCode::InvalidRequest)
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"1.0","id":1,"method":"a"}"#)
                .unwrap_err()
                .error
                .code,
            i32::from(ErrorCode::InvalidRequest)
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
}
