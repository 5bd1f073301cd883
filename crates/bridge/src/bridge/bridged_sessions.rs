//! The bridged sessions, by AHP session URI, and the runtime session id
//! each is known by on the runtime: one lock for both, taken once per
//! operation, never across an await.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::effects::Effects;
use super::session::BridgedSession;

#[derive(Default)]
pub(super) struct BridgedSessions(Mutex<SessionIndex>);

#[derive(Default)]
struct SessionIndex {
    sessions: HashMap<String, BridgedSession>,
    /// Runtime session id -> AHP session URI.
    by_runtime: HashMap<String, String>,
}

impl BridgedSessions {
    fn lock(&self) -> MutexGuard<'_, SessionIndex> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a session on the least loaded of `pool` runtimes, choosing
    /// and recording under one lock so that sessions created at once
    /// spread out.
    pub(super) fn place(&self, uri: &str, runtime_id: String, persisted: bool, pool: usize) {
        let mut g = self.lock();
        let mut load = vec![0usize; pool.max(1)];
        for s in g.sessions.values() {
            if let Some(n) = load.get_mut(s.placement().slot()) {
                *n += 1;
            }
        }
        let slot = (0..load.len()).min_by_key(|i| load[*i]).unwrap_or(0);
        g.by_runtime.insert(runtime_id.clone(), uri.to_owned());
        g.sessions.insert(
            uri.to_owned(),
            BridgedSession::new(runtime_id, slot, persisted),
        );
    }

    pub(super) fn remove(&self, uri: &str) -> Option<BridgedSession> {
        let mut g = self.lock();
        let s = g.sessions.remove(uri)?;
        g.by_runtime.remove(s.placement().runtime_id());
        Some(s)
    }

    /// The AHP session URI of a runtime session.
    /// Every bridged session's URI.
    pub(super) fn uris(&self) -> Vec<String> {
        self.lock().sessions.keys().cloned().collect()
    }

    pub(super) fn uri_of(&self, runtime_id: &str) -> Option<String> {
        self.lock().by_runtime.get(runtime_id).cloned()
    }

    /// Reads or changes one session under the lock.
    pub(super) fn with<R>(&self, uri: &str, f: impl FnOnce(&mut BridgedSession) -> R) -> Option<R> {
        self.lock().sessions.get_mut(uri).map(f)
    }

    /// Changes one session; the effects it asks for, to carry out after.
    pub(super) fn change(
        &self,
        uri: &str,
        f: impl FnOnce(&mut BridgedSession, &mut Effects),
    ) -> Option<Effects> {
        self.with(uri, |s| {
            let mut fx = Effects::new(uri, s.placement().slot(), s.placement().runtime_id());
            f(s, &mut fx);
            fx
        })
    }

    /// Changes every session; the effects of each.
    pub(super) fn change_all(
        &self,
        mut f: impl FnMut(&mut BridgedSession, &mut Effects),
    ) -> Vec<Effects> {
        let mut g = self.lock();
        g.sessions
            .iter_mut()
            .map(|(uri, s)| {
                let mut fx = Effects::new(uri, s.placement().slot(), s.placement().runtime_id());
                f(s, &mut fx);
                fx
            })
            .filter(|fx| !fx.is_empty())
            .collect()
    }
}
