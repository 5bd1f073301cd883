//! Who gets a connection: at most `max_connections` held at once, and
//! `max_connections_per_ip` from one address. A connection that has not
//! initialized yet (still in the upgrade, or upgraded without `initialize`)
//! is *pending*; at a limit, the oldest pending connection is closed to let
//! a new one in, so idle sockets can never lock out a client that goes on to
//! initialize. Only when nothing pending is left to close is a new
//! connection refused.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

/// The limits in force (see `ServerConfig::connection_limits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionLimits {
    pub total: usize,
    pub per_ip: usize,
}

/// Connections held now, and the pending ones, oldest first.
#[derive(Clone)]
pub(crate) struct Admission {
    inner: Arc<Mutex<Held>>,
    limits: ConnectionLimits,
}

#[derive(Default)]
struct Held {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
    pending: VecDeque<Pending>,
    next: u64,
}

struct Pending {
    id: u64,
    ip: IpAddr,
    released: Arc<AtomicBool>,
    evict: CancellationToken,
    gone: CancellationToken,
}

/// A place held by one connection, given back when it ends (or when the
/// connection is closed to make room, whichever comes first).
pub(crate) struct Permit {
    admission: Admission,
    id: u64,
    ip: IpAddr,
    released: Arc<AtomicBool>,
    /// Cancelled when the connection is closed to make room.
    pub evicted: CancellationToken,
    /// Cancelled when this permit is dropped (the connection's socket is
    /// closed by then).
    gone: CancellationToken,
    /// The connection closed to make room for this one: cancelled once its
    /// socket is gone. Until then it still holds a file descriptor, so the
    /// accept loop waits for it before accepting more.
    pub made_room: Option<CancellationToken>,
}

/// Why a connection was refused: the limit, as the config names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused(pub &'static str);

impl Admission {
    pub(crate) fn new(limits: ConnectionLimits) -> Self {
        Self {
            inner: Arc::default(),
            limits,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for a new connection from `ip`, pending until it initializes:
    /// the oldest pending connection (of that address, at its limit) is
    /// closed first if there is no room.
    pub(crate) fn admit(&self, ip: IpAddr) -> Result<Permit, Refused> {
        let mut h = self.lock();
        let mut made_room = None;
        if h.per_ip.get(&ip).copied().unwrap_or(0) >= self.limits.per_ip {
            made_room = h.evict_oldest(Some(ip));
            if made_room.is_none() {
                return Err(Refused("[server] max_connections_per_ip"));
            }
        }
        if h.total >= self.limits.total {
            made_room = h.evict_oldest(None);
            if made_room.is_none() {
                return Err(Refused("[server] max_connections"));
            }
        }
        h.total += 1;
        *h.per_ip.entry(ip).or_insert(0) += 1;
        h.next += 1;
        let (id, released) = (h.next, Arc::new(AtomicBool::new(false)));
        let (evicted, gone) = (CancellationToken::new(), CancellationToken::new());
        h.pending.push_back(Pending {
            id,
            ip,
            released: released.clone(),
            evict: evicted.clone(),
            gone: gone.clone(),
        });
        Ok(Permit {
            admission: self.clone(),
            id,
            ip,
            released,
            evicted,
            gone,
            made_room,
        })
    }

    /// How many connections are held now, and how many are pending.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (usize, usize) {
        let h = self.lock();
        (h.total, h.pending.len())
    }
}

impl Held {
    /// Closes the oldest pending connection (of `ip`, if given), giving its
    /// place back at once; what says when its socket is gone, or `None`
    /// when there is none to close.
    fn evict_oldest(&mut self, ip: Option<IpAddr>) -> Option<CancellationToken> {
        let at = self
            .pending
            .iter()
            .position(|p| ip.is_none_or(|ip| p.ip == ip))?;
        let p = self.pending.remove(at)?;
        p.evict.cancel();
        if !p.released.swap(true, Ordering::AcqRel) {
            self.release(p.ip);
        }
        Some(p.gone)
    }

    fn release(&mut self, ip: IpAddr) {
        self.total -= 1;
        if let Some(n) = self.per_ip.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_ip.remove(&ip);
            }
        }
    }
}

impl Permit {
    /// The connection initialized: it is no longer closed to make room.
    pub(crate) fn initialized(&self) {
        let mut h = self.admission.lock();
        h.pending.retain(|p| p.id != self.id);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.gone.cancel();
        let mut h = self.admission.lock();
        h.pending.retain(|p| p.id != self.id);
        if !self.released.swap(true, Ordering::AcqRel) {
            h.release(self.ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_pending_connection_makes_room_and_initialized_ones_stay() {
        let a = Admission::new(ConnectionLimits {
            total: 3,
            per_ip: 2,
        });
        let (x, y): (IpAddr, IpAddr) = ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
        let x1 = a.admit(x).unwrap();
        let x2 = a.admit(x).unwrap();
        x2.initialized();
        // At x's limit: its oldest pending one (x1) makes room.
        let x3 = a.admit(x).unwrap();
        assert!(x1.evicted.is_cancelled() && !x2.evicted.is_cancelled());
        let room = x3.made_room.clone().expect("x1 made room");
        assert!(!room.is_cancelled(), "x1's socket is still open");
        assert_eq!(a.counts(), (2, 1));
        drop(x1);
        assert!(room.is_cancelled(), "x1's socket is gone");
        assert_eq!(
            a.counts(),
            (2, 1),
            "an evicted permit is not given back twice"
        );
        let y1 = a.admit(y).unwrap();
        assert_eq!(a.counts(), (3, 2));
        // At the total: the oldest pending anywhere (x3) goes.
        let y2 = a.admit(y).unwrap();
        assert!(x3.evicted.is_cancelled() && !y1.evicted.is_cancelled());
        y1.initialized();
        y2.initialized();
        // Everything held has initialized: nothing to close, so a newcomer is refused.
        let z: IpAddr = "127.0.0.3".parse().unwrap();
        assert_eq!(a.admit(z).err(), Some(Refused("[server] max_connections")));
        drop(x2);
        assert!(
            a.admit(z).is_ok(),
            "a place comes back when its connection ends"
        );
    }
}
