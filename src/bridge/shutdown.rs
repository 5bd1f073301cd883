//! The bridge's part of a graceful shutdown: every running turn ends with a
//! clear `chat/error`, everything the runtime waits on is answered, and the
//! runtime process is stopped (asked first, killed if it does not go).
//! The host's part (stop accepting, close clients with 1001) is in `app`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{info, warn};

use super::session::TurnState;
use super::Bridge;

/// What a turn ended by a shutdown tells the client (and the runtime).
pub const SHUTTING_DOWN: &str = "the host is shutting down";

/// How long the runtime is given to exit after SIGTERM before it is killed.
const RUNTIME_EXIT_GRACE: Duration = Duration::from_secs(3);

/// Counts the runtime's requests the bridge has not answered yet, so a
/// shutdown can wait until every one is.
#[derive(Clone)]
pub(super) struct InFlight(Arc<watch::Sender<usize>>);

/// One unanswered request; dropping it (the answer sent) counts it out.
pub(super) struct InFlightGuard(Arc<watch::Sender<usize>>);

impl InFlight {
    pub fn new() -> Self {
        Self(Arc::new(watch::Sender::new(0)))
    }

    pub fn enter(&self) -> InFlightGuard {
        self.0.send_modify(|n| *n += 1);
        InFlightGuard(self.0.clone())
    }

    async fn all_answered(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

impl Bridge {
    /// Ends every running turn with [`SHUTTING_DOWN`] and answers what the
    /// runtime waits on for it (permissions denied, client tools failed,
    /// questions unanswered, the message aborted). From now on no runtime is
    /// started. The clients are still connected: they see the end.
    pub async fn end_turns_for_shutdown(&self) {
        self.stopping.store(true, Ordering::Release);
        let mut ended = Vec::new();
        for (uri, s) in self.sessions().iter_mut() {
            if matches!(s.turn(), TurnState::Running(_)) {
                let e = s.end_turn(TurnState::Draining);
                ended.push((uri.clone(), s.runtime_id.clone(), s.slot, e));
            }
        }
        info!(
            turns = ended.len(),
            "shutting down: ending the running turns"
        );
        for (uri, runtime_id, slot, e) in ended {
            let conn = self.live_runtime(slot).await;
            let calls = e.runtime_answers(&runtime_id, SHUTTING_DOWN);
            if let Some(t) = e.turn {
                let (chat, actions) = t.fail("shutdown", SHUTTING_DOWN);
                self.emit(&chat, actions);
            }
            self.emit(&uri, e.removals);
            let Some(conn) = &conn else { continue };
            for (m, params) in calls {
                if let Err(e) = conn.call(m, params).await {
                    warn!(method = m, "runtime call at shutdown failed: {e}");
                }
            }
        }
    }

    /// Waits until the runtime's requests are all answered (transforms whose
    /// clients are gone are answered with the original text at once).
    pub async fn runtime_requests_answered(&self) {
        self.in_flight.all_answered().await;
    }

    /// Stops every runtime of the pool, at once.
    pub async fn stop_runtime(&self) {
        self.stopping.store(true, Ordering::Release);
        let stops = (0..self.pool_size()).map(|slot| self.stop_one(slot));
        futures_util::future::join_all(stops).await;
    }

    /// Stops one runtime: SIGTERM, then SIGKILL after a grace.
    async fn stop_one(&self, slot: usize) {
        let Some(live) = self.take_runtime(slot).await else {
            return;
        };
        live.conn.close();
        let Some(mut child) = live.child else {
            return;
        };
        if let Some(pid) = child.id() {
            // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        }
        match tokio::time::timeout(RUNTIME_EXIT_GRACE, child.wait()).await {
            Ok(status) => info!(?status, "runtime stopped"),
            Err(_) => {
                warn!(
                    "the runtime did not exit within {RUNTIME_EXIT_GRACE:?} of SIGTERM; killing it"
                );
                let _ = child.kill().await;
            }
        }
    }
}
