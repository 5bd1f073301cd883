//! A reply built as its official result type, as the JSON-RPC layer sends
//! it. Its own file because the command files and the file requests
//! (`crate::files`) all build replies, and the dispatcher in `mod.rs`
//! imports them: here none of them imports the dispatcher.

use serde_json::Value;

use ahp_bridge_jsonrpc::{ErrorCode, RpcError};

/// The reply of a command whose official result has no fields of its own
/// (`createSession`, `disposeSession`): `{}`.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Empty {}

/// What `subscribe` answers: `SubscribeResult`'s shape, its snapshot moved
/// in as the host rendered it (the official `Snapshot` has no form for the
/// host channels' states nor for the opt-in extension field).
pub(crate) fn subscribed(snapshot: Value) -> Value {
    Value::Object(serde_json::Map::from_iter([(
        "snapshot".to_owned(),
        snapshot,
    )]))
}

/// The reply's JSON, made once, where the dispatcher hands it to the
/// JSON-RPC layer (the types always serialize; a failure would be a bug here).
pub(crate) fn to_result(result: impl serde::Serialize) -> Result<Value, RpcError> {
    serde_json::to_value(result)
        .map_err(|e| RpcError::new(ErrorCode::InternalError, format!("reply: {e}")))
}
