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
pub struct Limits {
    pub total: usize,
    pub per_ip: usize,
}

/// Connections held now, and the pending ones, oldest first.
#[derive(Clone)]
pub struct Admission {
    inner: Arc<Mutex<Held>>,
    limits: Limits,
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
}

/// A place held by one connection, given back when it ends (or when the
/// connection is closed to make room, whichever comes first).
pub struct Permit {
    admission: Admission,
    id: u64,
    ip: IpAddr,
    released: Arc<AtomicBool>,
    /// Cancelled when the connection is closed to make room.
    pub evicted: CancellationToken,
}

/// Why a connection was refused: the limit, as the config names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused(pub &'static str);

impl Admission {
    pub fn new(limits: Limits) -> Self {
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
    pub fn admit(&self, ip: IpAddr) -> Result<Permit, Refused> {
        let mut h = self.lock();
        if h.per_ip.get(&ip).copied().unwrap_or(0) >= self.limits.per_ip
            && !h.evict_oldest(Some(ip))
        {
            return Err(Refused("[server] max_connections_per_ip"));
        }
        if h.total >= self.limits.total && !h.evict_oldest(None) {
            return Err(Refused("[server] max_connections"));
        }
        h.total += 1;
        *h.per_ip.entry(ip).or_insert(0) += 1;
        h.next += 1;
        let (id, released, evicted) = (h.next, Arc::new(AtomicBool::new(false)), CancellationToken::new());
        h.pending.push_back(Pending {
            id,
            ip,
            released: released.clone(),
            evict: evicted.clone(),
        });
        Ok(Permit {
            admission: self.clone(),
            id,
            ip,
            released,
            evicted,
        })
    }

    /// How many connections are held now, and how many are pending.
    pub fn counts(&self) -> (usize, usize) {
        let h = self.lock();
        (h.total, h.pending.len())
    }
}

impl Held {
    /// Closes the oldest pending connection (of `ip`, if given), giving its
    /// place back at once; false when there is none.
    fn evict_oldest(&mut self, ip: Option<IpAddr>) -> bool {
        let Some(at) = self
            .pending
            .iter()
            .position(|p| ip.is_none_or(|ip| p.ip == ip))
        else {
            return false;
        };
        let Some(p) = self.pending.remove(at) else {
            return false;
        };
        p.evict.cancel();
        if !p.released.swap(true, Ordering::AcqRel) {
            self.release(p.ip);
        }
        true
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
    pub fn initialized(&self) {
        let mut h = self.admission.lock();
        h.pending.retain(|p| p.id != self.id);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
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
        let a = Admission::new(Limits {
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
        assert_eq!(a.counts(), (2, 1));
        drop(x1);
        assert_eq!(a.counts(), (2, 1), "an evicted permit is not given back twice");
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
        assert!(a.admit(z).is_ok(), "a place comes back when its connection ends");
    }
}
