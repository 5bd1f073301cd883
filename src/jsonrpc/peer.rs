//! Our side of a JSON-RPC connection: the calls we make, each with a deadline.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;

use super::{request, Id, RpcError};

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

    #[tokio::test]
    async fn late_answer_is_not_delivered() {
        let peer = Peer::new(|_| true);
        let _ = peer.call("x", Value::Null, Duration::from_millis(5)).await;
        assert!(!peer.complete(&Id::Num(1), Ok(Value::Null)));
    }
}
