//! What a graceful stop owns: the count of the runtime's requests not
//! answered yet, which the stop waits on, and the SDK gate once made, whose
//! apps the stop (and a dispose) reaches. The bridge holds one `Stop`; the
//! order of a shutdown is in `app`, the turns it ends in
//! `Bridge::end_turns_for_shutdown`.

use std::sync::{Arc, OnceLock};

use tokio::sync::watch;

use super::sdk::SdkGate;

pub struct Stop {
    /// The runtime's requests not answered yet.
    in_flight: Arc<watch::Sender<usize>>,
    sdk: OnceLock<Arc<SdkGate>>,
}

impl Stop {
    pub(super) fn new() -> Self {
        Self {
            in_flight: Arc::new(watch::Sender::new(0)),
            sdk: OnceLock::new(),
        }
    }

    /// One runtime request being answered: counted until the guard drops.
    pub(super) fn answering(&self) -> InFlightGuard {
        self.in_flight.send_modify(|n| *n += 1);
        InFlightGuard(self.in_flight.clone())
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
        if let Some(gate) = self.gate() {
            gate.all_closed().await;
        }
    }

    /// Waits until the runtime's requests are all answered (transforms whose
    /// clients are gone are answered with the original text at once).
    pub async fn runtime_requests_answered(&self) {
        let mut rx = self.in_flight.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}

/// One unanswered request; dropping it (the answer sent) counts it out.
pub(super) struct InFlightGuard(Arc<watch::Sender<usize>>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}
