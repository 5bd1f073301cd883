//! Counting what the runtime waits on, for a graceful shutdown: every
//! request the runtime made of the bridge is answered before its process is
//! stopped. (The order of a shutdown is in `app`; ending the turns is the
//! bridge's `end_turns_for_shutdown`.)

use std::sync::Arc;

use tokio::sync::watch;

/// What a turn ended by a shutdown tells the client (and the runtime).
pub const SHUTTING_DOWN: &str = "the host is shutting down";

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

    pub async fn all_answered(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}
