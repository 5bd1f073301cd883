//! Our side of a JSON-RPC connection: the calls we make, each with a deadline.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::oneshot;

use super::{Id, RpcError};

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

type Sender = Box<dyn Fn(String) -> bool + Send + Sync>;

/// An answer and the size of the message that carried it.
type Delivered = Result<(Value, usize), RpcError>;

/// Our side of a JSON-RPC connection: numbers the calls we make, keeps them
/// pending until the answer, a deadline, or the connection closing.
pub struct Peer {
    next_id: AtomicI64,
    pending: Mutex<HashMap<Id, oneshot::Sender<Delivered>>>,
    closed: AtomicBool,
    send: Sender,
}

/// A request as it goes out, serialized in one pass from typed params.
#[derive(Serialize)]
struct OutgoingRequest<'a, P: Serialize> {
    jsonrpc: &'static str,
    id: &'a Id,
    method: &'a str,
    params: &'a P,
}

/// A result, and the bytes of the message it came in (what the peer sent).
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub value: Value,
    pub bytes: usize,
}

impl Peer {
    /// `send` queues one serialized message for the wire and says whether
    /// it was accepted.
    pub fn new(send: impl Fn(String) -> bool + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(Self {
            next_id: AtomicI64::new(1),
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            send: Box::new(send),
        })
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<Id, oneshot::Sender<Delivered>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Calls `method` and waits at most `timeout` for the answer.
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        self.call_sized(method, &params, timeout)
            .await
            .map(|a| a.value)
    }

    /// Calls `method` with typed `params` (serialized once, straight to
    /// the wire) and waits at most `timeout` for the answer and its size.
    pub async fn call_sized<P: Serialize>(
        &self,
        method: &str,
        params: &P,
        timeout: Duration,
    ) -> Result<Answered, CallError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(CallError::Closed);
        }
        let id = Id::Num(self.next_id.fetch_add(1, Ordering::Relaxed));
        let out = OutgoingRequest {
            jsonrpc: "2.0",
            id: &id,
            method,
            params,
        };
        let text = serde_json::to_string(&out).map_err(|_| CallError::Closed)?;
        let (tx, rx) = oneshot::channel();
        self.pending().insert(id.clone(), tx);
        // However the call ends (a timeout, a failed send, or its caller
        // dropping it before the answer), its entry goes with it: else a
        // dropped call stays pending for the connection's life.
        let _waiting = Waiting { peer: self, id };
        // A close that raced the insert above must still fail this call.
        if self.closed.load(Ordering::Acquire) || !(self.send)(text) {
            return Err(CallError::Closed);
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Ok((value, bytes)))) => Ok(Answered { value, bytes }),
            Ok(Ok(Err(e))) => Err(CallError::Rpc(e)),
            Ok(Err(_)) => Err(CallError::Closed),
            Err(_) => Err(CallError::Timeout(timeout)),
        }
    }

    /// Sends a message already serialized.
    pub fn send_text(&self, text: String) -> bool {
        !self.closed.load(Ordering::Acquire) && (self.send)(text)
    }

    /// Delivers an answer that came in a message of `bytes`; false when
    /// nobody waits for that id (late or unknown).
    pub fn complete(&self, id: &Id, result: Result<Value, RpcError>, bytes: usize) -> bool {
        match self.pending().remove(id) {
            Some(tx) => tx.send(result.map(|v| (v, bytes))).is_ok(),
            None => false,
        }
    }

    /// Fails every pending call at once and refuses new ones.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.pending().clear();
    }
}

/// A call in flight: dropped, it takes the call's `pending` entry out
/// (already gone when the answer or a close came first).
struct Waiting<'a> {
    peer: &'a Peer,
    id: Id,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.peer.pending().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A caller that gives up on a call (drops its future, as a `select!`
    /// or a cancelled task does) leaves nothing pending behind.
    #[tokio::test]
    async fn a_dropped_call_is_no_longer_pending() {
        use std::future::Future;
        use std::task::{Context, Poll, Waker};
        let peer = Peer::new(|_| true);
        let mut call = Box::pin(peer.call("x", Value::Null, Duration::from_secs(3600)));
        let mut cx = Context::from_waker(Waker::noop());
        // Polled once: sent, and waiting for its answer.
        assert!(matches!(call.as_mut().poll(&mut cx), Poll::Pending));
        assert_eq!(peer.pending().len(), 1);
        drop(call);
        assert!(peer.pending().is_empty());
        assert!(!peer.complete(&Id::Num(1), Ok(Value::Null), 0));
    }

    #[tokio::test]
    async fn late_answer_is_not_delivered() {
        let peer = Peer::new(|_| true);
        let _ = peer.call("x", Value::Null, Duration::from_millis(5)).await;
        assert!(!peer.complete(&Id::Num(1), Ok(Value::Null), 0));
    }
}
