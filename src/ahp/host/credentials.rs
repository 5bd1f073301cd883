//! A reload of who may connect: new principals and limits put in force at
//! once (a new token works for the next upgrade, a removed or rotated one
//! does not), and every connection whose credential no longer stands is
//! closed (1008, with the reason) once its running turn ends: a turn it
//! started, or any in a session it is an active client of. The wait is
//! bounded by `[runtime] turn_inactivity_timeout`; meanwhile such a
//! connection starts no new turn and creates no session.

use std::sync::{Arc, Weak};

use tracing::{info, warn};

use super::clients::{ConnId, Revoked};
use super::Host;
use crate::ahp::auth::{Principals, Standing};
use crate::config::Config;

/// What a reload of the credentials did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CredentialsReloaded {
    /// How many principals a token can name now.
    pub principals: usize,
    /// How many open connections were revoked and will close.
    pub closing: usize,
}

impl Host {
    /// Puts `principals`, and the rate limits of `cfg` (the file they came
    /// from), in force, and closes each connection whose credential no
    /// longer stands once its running turn ends.
    pub fn replace_credentials(
        self: &Arc<Self>,
        principals: Principals,
        cfg: &Config,
    ) -> CredentialsReloaded {
        let principals = Arc::new(principals);
        *self.principals.write().unwrap_or_else(|e| e.into_inner()) = principals.clone();
        self.limits.replace(cfg);
        self.tokens.retain(&principals.names());
        let revoked = self.lock().clients.revoke(&principals);
        let closing = revoked.len();
        for r in revoked {
            info!(
                conn = r.conn,
                reason = r.standing.reason(),
                "connection revoked; it closes once its running turn ends"
            );
            tokio::spawn(close_after_turn(Arc::downgrade(self), r));
        }
        CredentialsReloaded {
            principals: principals.len(),
            closing,
        }
    }

    /// Why the host closes `conn`, once it does.
    pub fn close_reason(&self, conn: ConnId) -> Option<&'static str> {
        self.lock().clients.revoked(conn).map(Standing::reason)
    }

    /// Whether `conn`'s client answers for a running turn.
    fn turn_running_for(&self, conn: ConnId) -> bool {
        let st = self.lock();
        st.clients
            .client_id(conn)
            .is_some_and(|c| st.sessions.turn_running_for(c))
    }
}

/// Waits until the connection has no running turn (or the bound passes),
/// then closes it. Holds the host only while it looks.
async fn close_after_turn(host: Weak<Host>, r: Revoked) {
    let (mut boundaries, limit) = match host.upgrade() {
        Some(h) => (
            h.boundaries.subscribe(),
            h.cfg.runtime.turn_inactivity_timeout,
        ),
        None => return,
    };
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        boundaries.borrow_and_update();
        let running = host.upgrade().is_some_and(|h| h.turn_running_for(r.conn));
        if !running || r.closing.is_cancelled() {
            break;
        }
        tokio::select! {
            changed = boundaries.changed() => if changed.is_err() { break },
            _ = tokio::time::sleep_until(deadline) => {
                warn!(conn = r.conn, "revoked connection still has a turn running after [runtime] turn_inactivity_timeout ({limit:?}); closing it anyway");
                break;
            }
        }
    }
    r.closing.cancel();
}
