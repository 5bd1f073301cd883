//! The one inbound-message step both sides share. Whatever arrives, from a
//! client or from the runtime: an answer completes our pending call, a request
//! goes to the handler and its answer always goes back, a notification goes to
//! the handler, and a message that is not JSON-RPC is answered with its error.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use tracing::debug;

use super::{error_response, parse, response, Incoming, Peer, RpcError};

pub type ReplyFuture = Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send>>;

/// How a handler answers a request.
pub enum Answer {
    /// Answered at once.
    Now(Result<Value, RpcError>),
    /// Answered at once, and then the connection closes (nothing more can be
    /// said on it, e.g. no common protocol version).
    Last(Result<Value, RpcError>),
    /// Answered when the future ends; it runs on its own task, so the reader
    /// goes on meanwhile (the runtime keeps streaming while a client thinks).
    Later(ReplyFuture),
}

/// What one side does with the requests and notifications it receives.
pub trait InboundHandler: Send + Sync + 'static {
    fn request(&self, method: &str, params: Value) -> Answer;
    fn notification(&self, method: &str, params: Value);
}

/// Whether the connection goes on after a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Close,
}

/// Handles one inbound text from `from` (named in logs only).
pub fn receive(text: &str, peer: &Arc<Peer>, handler: &dyn InboundHandler, from: &str) -> Flow {
    match parse(text) {
        Err(m) => {
            debug!(from, "not a JSON-RPC message: {}", m.error.message);
            // Without an id we still answer (`id: null`) unless it was a broken answer of theirs.
            peer.send_text(error_response(m.id.as_ref(), m.error));
        }
        Ok(Incoming::Response { id, result }) => {
            if !peer.complete(&id, result, text.len()) {
                debug!(from, %id, "answer to no pending call (late or unknown)");
            }
        }
        Ok(Incoming::OrphanError(e)) => debug!(from, error = ?e, "peer reported an error"),
        Ok(Incoming::Notification { method, params }) => handler.notification(&method, params),
        Ok(Incoming::Request { id, method, params }) => match handler.request(&method, params) {
            Answer::Now(result) => {
                peer.send_text(response(&id, result));
            }
            Answer::Last(result) => {
                peer.send_text(response(&id, result));
                return Flow::Close;
            }
            Answer::Later(reply) => {
                let peer = peer.clone();
                tokio::spawn(async move {
                    let result = reply.await;
                    peer.send_text(response(&id, result));
                });
            }
        },
    }
    Flow::Continue
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::ErrorCode;

    struct Echo;
    impl InboundHandler for Echo {
        fn request(&self, method: &str, params: Value) -> Answer {
            match method {
                "now" => Answer::Now(Ok(params)),
                "last" => Answer::Last(Err(RpcError::new(ErrorCode::InvalidRequest, "bye"))),
                _ => Answer::Later(Box::pin(async move { Ok(params) })),
            }
        }
        fn notification(&self, _: &str, _: Value) {}
    }

    fn peer() -> (Arc<Peer>, Arc<Mutex<Vec<Value>>>) {
        let out = Arc::new(Mutex::new(Vec::new()));
        let o = out.clone();
        (
            Peer::new(move |v: String| {
                o.lock().unwrap().push(serde_json::from_str(&v).unwrap());
                true
            }),
            out,
        )
    }

    #[tokio::test]
    async fn every_request_is_answered_and_last_closes() {
        let (p, out) = peer();
        let req = |id: u32, m: &str| {
            json!({"jsonrpc": "2.0", "id": id, "method": m, "params": [id]}).to_string()
        };
        assert_eq!(receive(&req(1, "now"), &p, &Echo, "t"), Flow::Continue);
        assert_eq!(receive(&req(2, "later"), &p, &Echo, "t"), Flow::Continue);
        assert_eq!(receive("{", &p, &Echo, "t"), Flow::Continue);
        assert_eq!(receive(&req(3, "last"), &p, &Echo, "t"), Flow::Close);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while out.lock().unwrap().len() < 4 {
            assert!(tokio::time::Instant::now() < deadline, "all four answered");
            tokio::task::yield_now().await;
        }
        let out = out.lock().unwrap();
        assert_eq!(out[0]["result"], json!([1]));
        assert_eq!(out[1]["error"]["code"], -32700);
        assert_eq!(out[2]["error"]["code"], -32600);
        assert_eq!(out[3]["result"], json!([2]));
    }
}
