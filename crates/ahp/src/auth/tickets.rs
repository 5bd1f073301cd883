//! Tickets: what the web console connects with instead of putting its token
//! in a URL, where proxies and access logs keep it. `POST /ticket` with the
//! token (or a client certificate) gets one; the WebSocket upgrade takes it
//! as `?ticket=` once, within [`TICKET_LIFETIME`]. A ticket stands for the
//! credential that asked for it: its principal, roles, and the expiry of a
//! JWT.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::Authenticated;

/// How long a ticket may wait for its upgrade.
pub(crate) const TICKET_LIFETIME: Duration = Duration::from_secs(30);

/// Tickets outstanding at once; past it `POST /ticket` is refused until
/// some are used or run out, so a flood of requests cannot grow memory.
pub(crate) const MAX_TICKETS: usize = 10_000;

/// Why no ticket was issued.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NoTicket {
    #[error("too many tickets outstanding ({MAX_TICKETS}); retry in a few seconds")]
    TooMany,
    #[error("no randomness for a ticket: {0}")]
    NoRandom(getrandom::Error),
}

/// The tickets handed out and not used yet, by the SHA-256 of each (the
/// ticket itself is not kept).
#[derive(Default)]
pub(crate) struct Tickets(Mutex<HashMap<[u8; 32], (Authenticated, Instant)>>);

fn digest(ticket: &str) -> [u8; 32] {
    Sha256::digest(ticket.as_bytes()).into()
}

impl Tickets {
    /// A new ticket for `auth`, and how long it lasts: [`TICKET_LIFETIME`],
    /// or less when the credential behind it expires sooner.
    pub(crate) fn issue(&self, auth: Authenticated) -> Result<(String, Duration), NoTicket> {
        let now = Instant::now();
        let mut lasts = TICKET_LIFETIME;
        if let Some(exp) = auth.expires_at {
            let left = exp.duration_since(SystemTime::now()).unwrap_or_default();
            lasts = lasts.min(left);
        }
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, (_, until)| *until > now);
        if map.len() >= MAX_TICKETS {
            return Err(NoTicket::TooMany);
        }
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).map_err(NoTicket::NoRandom)?;
        let ticket = data_encoding::BASE64URL_NOPAD.encode(&raw);
        map.insert(digest(&ticket), (auth, now + lasts));
        Ok((ticket, lasts))
    }

    /// The credential a ticket stands for, once: a used, unknown or
    /// expired ticket is `None`.
    pub(crate) fn redeem(&self, ticket: &str) -> Option<Authenticated> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (auth, until) = map.remove(&digest(ticket))?;
        (until > Instant::now()).then_some(auth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Principals;
    use ahp_bridge_base::config::Config;

    fn local() -> Authenticated {
        Principals::from_config(Config::default().reloadable())
            .authenticate(None)
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_ticket_is_good_once_and_only_for_its_lifetime() {
        let t = Tickets::default();
        let (once, lasts) = t.issue(local()).unwrap();
        assert_eq!(lasts, TICKET_LIFETIME);
        assert_eq!(t.redeem(&once).unwrap().principal.name, "local");
        assert!(t.redeem(&once).is_none(), "used");
        assert!(t.redeem("made-up").is_none());
        let (late, _) = t.issue(local()).unwrap();
        tokio::time::advance(TICKET_LIFETIME + Duration::from_millis(1)).await;
        assert!(t.redeem(&late).is_none(), "expired");
    }

    #[tokio::test(start_paused = true)]
    async fn the_store_is_bounded_and_expired_tickets_make_room() {
        let t = Tickets::default();
        for _ in 0..MAX_TICKETS {
            t.issue(local()).unwrap();
        }
        assert!(t.issue(local()).is_err());
        tokio::time::advance(TICKET_LIFETIME).await;
        assert!(t.issue(local()).is_ok());
    }

    #[test]
    fn a_ticket_never_outlives_its_credential() {
        let t = Tickets::default();
        let mut a = local();
        a.expires_at = Some(SystemTime::now() + Duration::from_secs(5));
        let (_, lasts) = t.issue(a).unwrap();
        assert!(lasts <= Duration::from_secs(5), "{lasts:?}");
    }
}
