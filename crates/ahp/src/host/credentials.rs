//! Who may connect and how much each may do: the principals in force, their
//! rate limits and the runtime tokens they gave, owned by [`Credentials`]
//! (each behind its own lock, never the host's). A reload replaces the
//! principals and limits whole; `Connections::replace_credentials` then closes the
//! connections whose credential no longer stands, through
//! [`close_after_turn`]: once the running turn ends (a turn it started, or
//! any in a session it is an active client of), bounded by `[runtime]
//! turn_inactivity_timeout`. Meanwhile such a connection starts no new turn
//! and creates no session.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tracing::warn;

use super::clients::Revoked;
use crate::auth::rate_limiter::RateLimiter;
use crate::auth::tokens::Tokens;
use crate::auth::Principals;
use ahp_bridge_base::config::Reloadable;

/// What a reload of the credentials did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CredentialsReloaded {
    /// How many principals a token can name now.
    pub principals: usize,
    /// How many open connections were revoked and will close.
    pub closing: usize,
}

pub(super) struct Credentials {
    /// Who may connect; a reload replaces it.
    principals: RwLock<Arc<Principals>>,
    /// How much each principal may do, and what it has used.
    limits: RateLimiter,
    /// Tokens clients gave with `authenticate`, by principal.
    tokens: Tokens,
}

impl Credentials {
    pub(super) fn from_config(cfg: Reloadable<'_>) -> Self {
        Self {
            principals: RwLock::new(Arc::new(Principals::from_config(cfg))),
            limits: RateLimiter::from_config(cfg),
            tokens: Tokens::default(),
        }
    }

    pub(super) fn principals(&self) -> Arc<Principals> {
        self.principals
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(super) fn limits(&self) -> &RateLimiter {
        &self.limits
    }

    pub(super) fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    /// Puts `principals` and the limits of `cfg` (the file they came from)
    /// in force; a principal no longer there loses the token it gave.
    pub(super) fn replace(&self, principals: Principals, cfg: Reloadable<'_>) -> Arc<Principals> {
        let principals = Arc::new(principals);
        *self.principals.write().unwrap_or_else(|e| e.into_inner()) = principals.clone();
        self.limits.replace(cfg);
        self.tokens.retain(&principals.names());
        principals
    }
}

/// Waits until the revoked connection has no running turn (`running`, asked
/// again at every boundary the host announces) or `limit` passes, then
/// closes it. Given the host's pieces, not the host, so that this file does
/// not import the host that imports it.
pub(super) async fn close_after_turn(
    mut boundaries: tokio::sync::watch::Receiver<u64>,
    limit: Duration,
    running: impl Fn() -> bool,
    r: Revoked,
) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        boundaries.borrow_and_update();
        if !running() || r.closing.is_cancelled() {
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
