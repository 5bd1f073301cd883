//! What a graceful stop owns: the count of the runtime's requests not
//! answered yet, which the stop waits on, and the SDK gate once made, whose
//! apps the stop (and a dispose) reaches. The bridge holds one `Stop`; the
//! order of a shutdown is in `app`, the turns it ends in
//! `Bridge::end_turns_for_shutdown`.

use std::sync::{Arc, OnceLock};

use super::sdk::SdkGate;
use super::shutting_down::{InFlight, InFlightGuard};

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
