//! The bridge's part of a graceful shutdown: its running turns ended (an SDK
//! app's too), what the runtime waits on answered and counted until every
//! request the runtime made of the bridge is answered, then the runtimes
//! stopped. (The order of a shutdown is in `app`.) What the rest of the
//! bridge shares with it is in `shutting_down.rs`: nothing imports this
//! file, so its naming the bridge makes no circle.

use tracing::{info, warn};

use super::effects::Effects;
use super::shutting_down::SHUTTING_DOWN;
use super::Bridge;

impl Bridge {
    /// Ends every running turn with [`SHUTTING_DOWN`] and answers what the
    /// runtime waits on for it (permissions denied, client tools failed,
    /// questions unanswered, the message aborted). From now on no runtime is
    /// started. The clients are still connected: they see the end.
    pub async fn end_turns_for_shutdown(&self) {
        self.pool.stop_starting();
        // SDK apps' turns end too, each app told, while observers still
        // watch; [`Self::sdk_closed`] waits for their connections.
        if let Some(gate) = self.sdk.get() {
            gate.stop();
        }
        let ended = self
            .sessions
            .change_all(|s, fx| s.shut_down(SHUTTING_DOWN, fx));
        info!(
            turns = ended.len(),
            "shutting down: ending the running turns"
        );
        for fx in ended {
            let conn = self.pool.live(fx.slot).await;
            let (calls, runtime_id) = (fx.calls.clone(), fx.runtime_id.clone());
            self.carry_out(Effects {
                calls: vec![],
                ended: None,
                ..fx
            });
            let Some(conn) = &conn else { continue };
            for c in calls {
                if let Err(e) = c.make(conn, &runtime_id).await {
                    warn!(method = c.method(), "runtime call at shutdown failed: {e}");
                }
            }
        }
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

    /// Stops every runtime of the pool, at once.
    pub async fn stop_runtime(&self) {
        self.pool.stop_all().await;
    }
}
