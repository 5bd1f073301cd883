//! What a graceful shutdown shares with the rest of the bridge: the words a
//! turn it ends is told, and the count of the runtime's requests not
//! answered yet, which it waits on. Apart from the stop's owner
//! (`shutdown.rs`, which holds the SDK gate), so that the SDK gate can use
//! them without a circle.

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
