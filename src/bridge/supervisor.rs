//! The runtime pool: `[runtime] processes` runtimes (or the `connect`
//! addresses), each started on demand, watched by a health check, and
//! replaced on its own when it exits or stops answering. A session lives on
//! one runtime (sticky, the least loaded when it was created), so a lost
//! runtime ends only the turns on it; its sessions resume on their next turn.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tracing::warn;

use super::runtime_side::RuntimeEvents;
use super::session::{BridgedSession, TurnState};
use super::Bridge;
use crate::jsonrpc::CallError;
use crate::runtime::connection::{RuntimeConn, RuntimeHandler};
use crate::runtime::process;
use crate::runtime::wire::method;

/// One runtime of the pool: the live one, if started.
pub(super) struct Slot {
    runtime: tokio::sync::Mutex<Option<LiveRuntime>>,
}

impl Slot {
    pub fn new() -> Self {
        Self {
            runtime: tokio::sync::Mutex::new(None),
        }
    }
}

/// The runtime in use, and which start of it this is (unique across the pool).
pub(super) struct LiveRuntime {
    pub conn: Arc<RuntimeConn>,
    pub child: Option<tokio::process::Child>,
    generation: u64,
}

impl Bridge {
    /// Records a new session on the least loaded runtime, choosing and
    /// recording under one lock so that sessions created at once spread out.
    pub(super) fn place_session(&self, uri: &str, runtime_id: String, persisted: bool) {
        let mut sessions = self.sessions();
        let mut load = vec![0usize; self.pool.len()];
        for s in sessions.values() {
            if let Some(n) = load.get_mut(s.slot) {
                *n += 1;
            }
        }
        let slot = (0..load.len()).min_by_key(|i| load[*i]).unwrap_or(0);
        let mut s = BridgedSession::new(runtime_id, slot);
        s.persisted = persisted;
        sessions.insert(uri.to_owned(), s);
    }

    /// The runtime a runtime session lives on (0 for one the bridge forgot).
    pub(super) fn slot_of_runtime_session(&self, runtime_id: &str) -> usize {
        self.session_of_runtime(runtime_id)
            .and_then(|uri| self.sessions().get(&uri).map(|s| s.slot))
            .unwrap_or(0)
    }

    /// Runtime `slot`, started (or restarted) on demand.
    pub async fn runtime(&self, slot: usize) -> anyhow::Result<(Arc<RuntimeConn>, u64)> {
        let slot = slot.min(self.pool.len() - 1);
        let mut g = self.pool[slot].runtime.lock().await;
        if let Some(l) = g.as_ref() {
            if !l.conn.closed.is_cancelled() {
                return Ok((l.conn.clone(), l.generation));
            }
        }
        if self.stopping.load(Ordering::Acquire) {
            anyhow::bail!("the host is shutting down");
        }
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        let handler: Arc<dyn RuntimeHandler> = Arc::new(RuntimeEvents::new(self.me.clone()));
        let rt = process::start(&self.cfg.runtime, slot, handler).await?;
        let conn = rt.conn.clone();
        let me = self.me.clone();
        let closed = conn.closed.clone();
        tokio::spawn(async move {
            closed.cancelled().await;
            if let Some(b) = me.upgrade() {
                b.runtime_lost(slot, generation);
            }
        });
        tokio::spawn(watchdog(
            conn.clone(),
            self.cfg.runtime.health_interval,
            self.cfg.runtime.health_timeout,
        ));
        *g = Some(LiveRuntime {
            conn: conn.clone(),
            child: rt.child,
            generation,
        });
        Ok((conn, generation))
    }

    /// Runtime `slot`'s connection, if it is running; never starts one.
    pub(super) async fn live_runtime(&self, slot: usize) -> Option<Arc<RuntimeConn>> {
        let g = self.pool.get(slot)?.runtime.lock().await;
        g.as_ref()
            .filter(|l| !l.conn.closed.is_cancelled())
            .map(|l| l.conn.clone())
    }

    /// Takes runtime `slot` out of the pool (a shutdown stops it).
    pub(super) async fn take_runtime(&self, slot: usize) -> Option<LiveRuntime> {
        self.pool.get(slot)?.runtime.lock().await.take()
    }

    pub(super) fn pool_size(&self) -> usize {
        self.pool.len()
    }

    /// The first runtime's process id (None before it starts, or over TCP):
    /// for an operator's diagnostics, and for tests that kill it.
    pub async fn runtime_pid(&self) -> Option<u32> {
        self.runtime_pids().await.into_iter().flatten().next()
    }

    /// Each runtime's process id, by slot.
    pub async fn runtime_pids(&self) -> Vec<Option<u32>> {
        let mut out = Vec::new();
        for s in &self.pool {
            let g = s.runtime.lock().await;
            out.push(
                g.as_ref()
                    .and_then(|l| l.child.as_ref().and_then(|c| c.id())),
            );
        }
        out
    }

    /// Which runtime a session lives on.
    pub fn slot_of_session(&self, uri: &str) -> Option<usize> {
        self.sessions().get(uri).map(|s| s.slot)
    }

    /// The runtime went away: running turns end with an error now, every
    /// session resumes on its next turn, and a new runtime is started.
    fn runtime_lost(&self, slot: usize, generation: u64) {
        if self.stopping.load(Ordering::Acquire) {
            // Stopped on purpose: its turns were ended, nothing restarts.
            return;
        }
        warn!(slot, generation, "a runtime exited or stopped answering; its running turns end, the other runtimes' go on");
        let mut ended = Vec::new();
        for (uri, s) in self.sessions().iter_mut() {
            if s.binding_in(generation).is_none() {
                continue;
            }
            s.bound = None;
            // What the dead runtime waited on needs no answer.
            let e = s.end_turn(TurnState::Idle { stale_idle: false });
            ended.push((uri.clone(), e.removals));
            if let Some(t) = e.turn {
                let (chat, actions) = t.fail(
                    "runtime",
                    "the agent runtime exited during the turn; send the message again",
                );
                ended.push((chat, actions));
            }
        }
        for (channel, actions) in ended {
            self.emit(&channel, actions);
        }
        let me = self.me.clone();
        tokio::spawn(async move {
            // A hung runtime is still running: end it before starting the next.
            if let Some(b) = me.upgrade() {
                let mut g = b.pool[slot].runtime.lock().await;
                if g.as_ref().is_some_and(|l| l.generation == generation) {
                    if let Some(mut child) = g.take().and_then(|l| l.child) {
                        let _ = child.start_kill();
                    }
                }
            }
            let mut backoff = Duration::from_millis(200);
            loop {
                tokio::time::sleep(backoff).await;
                let Some(b) = me.upgrade() else { return };
                match b.runtime(slot).await {
                    Ok(_) => return,
                    Err(e) => {
                        warn!("runtime restart failed: {e:#}; retrying in {backoff:?}");
                        backoff = (backoff * 2).min(Duration::from_secs(30));
                    }
                }
            }
        });
    }
}

/// Pings the runtime every `interval`; one unanswered within `timeout` means
/// it hangs (alive but deaf), and the connection is closed so that the runtime
/// is replaced like one that exited. An error answer is still an answer.
async fn watchdog(conn: Arc<RuntimeConn>, interval: Duration, timeout: Duration) {
    if interval.is_zero() {
        return;
    }
    loop {
        tokio::select! {
            _ = conn.closed.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        match conn.peer.call(method::PING, json!({}), timeout).await {
            Ok(_) | Err(CallError::Rpc(_)) => {}
            Err(CallError::Closed) => return,
            Err(CallError::Timeout(t)) => {
                warn!("the runtime did not answer a ping within {t:?}; restarting it");
                conn.close();
                return;
            }
        }
    }
}
