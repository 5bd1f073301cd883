//! The open SDK connections, so that what happens on the AHP side reaches
//! the app that owns a session: an admin's dispose of one of its sessions,
//! and the bridge's stop (each connection's running turns ended and told,
//! its queues flushed, then closed; the stop waits for that within its
//! limit, as it waits for AHP clients).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::app_conn::AppConn;

#[derive(Default)]
pub(super) struct Conns {
    open: Mutex<HashMap<u64, Arc<AppConn>>>,
    /// How many are open: a stop waits for 0 without losing a wake-up.
    count: watch::Sender<usize>,
    /// Set at the stop (under `open`'s lock, as `add` reads it): no new
    /// connection is served.
    stopping: AtomicBool,
}

impl Conns {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<AppConn>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A connection is served; false (not kept) once the stop began.
    pub(super) fn add(&self, id: u64, conn: Arc<AppConn>) -> bool {
        let mut open = self.lock();
        if self.stopping.load(Ordering::Relaxed) {
            return false;
        }
        open.insert(id, conn);
        self.count.send_replace(open.len());
        true
    }

    pub(super) fn remove(&self, id: u64) {
        let mut open = self.lock();
        open.remove(&id);
        self.count.send_replace(open.len());
    }

    /// The connection that created or resumed `session`, if one is open.
    pub(super) fn owner_of(&self, session: &str) -> Option<Arc<AppConn>> {
        self.lock().values().find(|c| c.owns(session)).cloned()
    }

    /// The stop began: new connections are not served. The open ones, for
    /// the gate to end (see `SdkGate::stop`).
    pub(super) fn stop(&self) -> Vec<Arc<AppConn>> {
        let open = self.lock();
        self.stopping.store(true, Ordering::Relaxed);
        open.values().cloned().collect()
    }

    /// Waits until no connection is open.
    pub(super) async fn all_closed(&self) {
        let mut count = self.count.subscribe();
        let _ = count.wait_for(|n| *n == 0).await;
    }
}
