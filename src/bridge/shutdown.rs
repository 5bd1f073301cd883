//! What a graceful stop owns: the count of the runtime's requests not
//! answered yet, which the stop waits on, and the SDK gate once made, whose
//! apps the stop (and a dispose) reaches. The bridge holds one `Stop`; the
//! order of a shutdown is in `app`, the turns it ends in
//! `Bridge::end_turns_for_shutdown`.

use std::sync::{Arc, OnceLock};

use tokio::sync::watch;

use super::sdk::SdkGate;

pub struct Stop {
    in_flight: InFlight,
    sdk: OnceLock<Arc<SdkGate>>,
}

impl Stop {
    pub(super) fn new() -> Self {
        Self {
            in_flight: InFlight::new(),
            sdk: OnceLock::new(),
        }
    }

    /// One runtime request being answered: counted until the guard drops.
    pub(super) fn answering(&self) -> InFlightGuard {
        self.in_flight.enter()
    }

    /// The SDK gate, kept the first time it is made.
    pub(super) fn keep_gate(&self, gate: Arc<SdkGate>) -> Arc<SdkGate> {
        self.sdk.get_or_init(|| gate).clone()
    }

    /// The SDK gate, once made (`[sdk]`).
    pub(super) fn gate(&self) -> Option<&Arc<SdkGate>> {
        self.sdk.get()
    }

    /// Waits until every SDK app's connection has closed (at once without
    /// `[sdk]`).
    pub async fn sdk_closed(&self) {
        if let Some(gate) = self.sdk.get() {
            gate.all_closed().await;
        }
    }

    /// Waits until the runtime's requests are all answered (transforms whose
    /// clients are gone are answered with the original text at once).
    pub async fn runtime_requests_answered(&self) {
        self.in_flight.all_answered().await;
    }
}

/// Counts the runtime's requests the bridge has not answered yet, so a
/// shutdown can wait until every one is.
struct InFlight(Arc<watch::Sender<usize>>);

/// One unanswered request; dropping it (the answer sent) counts it out.
pub(super) struct InFlightGuard(Arc<watch::Sender<usize>>);

impl InFlight {
    fn new() -> Self {
        Self(Arc::new(watch::Sender::new(0)))
    }

    fn enter(&self) -> InFlightGuard {
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
