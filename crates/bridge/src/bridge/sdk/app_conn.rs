//! One SDK app's connection as its tasks, the gate and the router's view
//! of the app hold it: its queues to either side, the sessions it owns,
//! the bridge's requests to it not answered yet, and the signals that end
//! it. Apart from the tasks that serve it (`conn.rs`, which use the gate
//! and the router's view), so that the gate (`mod.rs`), the open
//! connections (`conns.rs`) and the router's view (`clients.rs`) hold it
//! without a circle.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// The ids the bridge gives its own requests, apart from the app's and the
/// runtime's (numbers and UUIDs).
pub(super) const OWN_ID: &str = "ahp-bridge:";

/// What the connection's tasks share.
pub(super) struct AppConn {
    pub client: String,
    pub to_app: mpsc::Sender<String>,
    pub to_runtime: mpsc::Sender<String>,
    /// Sessions this connection created or resumed -> the sections it
    /// transforms itself.
    pub sessions: Mutex<HashMap<String, Vec<String>>>,
    /// The bridge's requests to the app not answered yet.
    pub asks: Mutex<HashMap<String, oneshot::Sender<AppReply>>>,
    pub next_ask: AtomicU64,
    /// Cut off: the writers stop at once (a peer that does not read, a
    /// broken side).
    pub closed: CancellationToken,
    /// Asked to end (the bridge's stop): the app's side stops being read,
    /// what is queued to either side is written, then both close.
    pub finish: CancellationToken,
    /// The last frames are queued: the writers write what is left, then
    /// close (set by the connection's task as it ends, after `finish`).
    pub flush: CancellationToken,
    /// The sessions whose running turn the stop ended: their app is told.
    pub ended_by_stop: Mutex<Vec<String>>,
    pub send_timeout: Duration,
}

/// The app's answer to one of the bridge's requests: the result, or that
/// it answered with an error.
pub(super) enum AppReply {
    Result(Box<RawValue>),
    Error,
}

impl AppConn {
    /// Queues a frame for the app; false when the connection is over or
    /// the app stopped reading.
    pub(super) async fn app(&self, text: String) -> bool {
        send(&self.to_app, text, self.send_timeout, &self.closed).await
    }

    /// Queues a frame for the runtime, as [`Self::app`] does for the app.
    pub(super) async fn runtime(&self, text: String) -> bool {
        send(&self.to_runtime, text, self.send_timeout, &self.closed).await
    }

    pub(super) fn owns(&self, session: &str) -> bool {
        lock(&self.sessions).contains_key(session)
    }

    pub(super) fn session_ids(&self) -> Vec<String> {
        lock(&self.sessions).keys().cloned().collect()
    }

    /// The bridge stops: `running` are the sessions whose turn it ended;
    /// the connection's task tells the app, then closes.
    pub(super) fn stopped(&self, running: Vec<String>) {
        *lock(&self.ended_by_stop) = running;
        self.finish.cancel();
    }

    /// Tells the app its session's running turn ended without an answer
    /// (`session.error`: the SDKs end a waiting send with it).
    pub(super) async fn turn_failed(&self, session: &str, error_type: &str, message: &str) {
        let event = json!({"jsonrpc": "2.0", "method": "session.event", "params": {"sessionId": session, "event": {
            "id": uuid::Uuid::new_v4().to_string(), "timestamp": jiff::Timestamp::now().to_string(),
            "parentId": null, "ephemeral": true, "type": "session.error",
            "data": {"errorType": error_type, "message": message}}}});
        let _ = self.app(event.to_string()).await;
    }

    /// An admin disposed `session` on the AHP side: this connection no
    /// longer owns it; the app hears of it (`session.lifecycle`
    /// `session.deleted`, as the runtime tells of a delete, after a
    /// `session.error` if a turn was running), and the runtime drops it
    /// (aborted, destroyed: its files stay, resumable, as a bridged
    /// session's do).
    pub(super) async fn disposed(&self, session: &str, running: bool) {
        lock(&self.sessions).remove(session);
        if running {
            self.turn_failed(session, "disposed", DISPOSED).await;
        }
        let deleted = json!({"jsonrpc": "2.0", "method": "session.lifecycle",
            "params": {"type": "session.deleted", "sessionId": session}});
        let _ = self.app(deleted.to_string()).await;
        for method in ["session.abort", "session.destroy"] {
            let call = json!({"jsonrpc": "2.0", "id": format!("{OWN_ID}{method}:{session}"), "method": method, "params": {"sessionId": session}});
            let _ = self.runtime(call.to_string()).await;
        }
    }
}

/// What an app whose session an admin disposed is told.
pub(super) const DISPOSED: &str = "an administrator disposed this session on the bridge";

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn send(
    tx: &mpsc::Sender<String>,
    text: String,
    within: Duration,
    closed: &CancellationToken,
) -> bool {
    match tokio::time::timeout(within, tx.send(text)).await {
        Ok(Ok(())) => true,
        Ok(Err(_)) => false,
        Err(_) => {
            warn!("an SDK connection's peer did not read for {within:?}; closing it");
            closed.cancel();
            false
        }
    }
}
