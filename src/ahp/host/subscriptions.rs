//! The handshake's binding and the subscriptions: who may watch which
//! channel, and how a client that comes back catches up (a replay of what
//! it missed, or snapshots; per channel in the 1.1 form).

use std::collections::HashSet;

use serde_json::{json, Value};

use super::api::not_found;
use super::clients::ConnId;
use super::extensions::may_watch;
use super::{Host, State};
use crate::ahp::auth::Principal;
use crate::ahp::channels::required_role;
use crate::ahp::protocol::uri::ROOT_URI;
use crate::ahp::protocol::versions::Version;
use crate::jsonrpc::{ErrorCode, RpcError};
use crate::telemetry::metrics;

/// How a `reconnect` is answered.
pub enum Reconnected {
    /// Every action since the client's last one, on the channels it kept.
    Replay {
        actions: Vec<Value>,
        missing: Vec<String>,
    },
    /// Too far behind (or an earlier instance's number): fresh snapshots.
    Snapshot {
        snapshots: Vec<Value>,
        missing: Vec<String>,
    },
    /// Channel by channel (AHP 1.1): each one replayed or snapshot.
    Channels {
        channels: Vec<Value>,
        missing: Vec<String>,
    },
}

impl Host {
    /// Binds `client_id` to `conn`, speaking `version`, and subscribes it
    /// to `initial`, all or nothing: a failed initialize leaves the id
    /// unbound and nothing subscribed. Returns the `serverSeq` and the
    /// snapshots.
    pub fn bind_client(
        &self,
        conn: ConnId,
        client_id: &str,
        version: Version,
        initial: Vec<String>,
    ) -> Result<(u64, Vec<Value>), RpcError> {
        let mut st = self.lock();
        st.clients.check_bind(conn, client_id)?;
        let initial = resolved(&st, initial);
        let snapshots = self.subscribable(&st, conn, &initial)?;
        st.clients.bind(conn, client_id, Some(version));
        metrics().set_clients_connected(st.clients.initialized());
        st.clients.subscribe(conn, initial);
        Ok((st.log.current(), snapshots))
    }

    /// Rebinds `client_id` to `conn` (speaking what it negotiated before)
    /// and answers with a replay of what it missed on the channels it still
    /// may see, or with snapshots: for all of them at once from
    /// `last_seen`, or channel by channel from each one's own cursor (the
    /// 1.1 form, when any is given).
    pub fn rebind_client(
        &self,
        conn: ConnId,
        client_id: &str,
        last_seen: u64,
        subs: Vec<(String, Option<u64>)>,
    ) -> Result<Reconnected, RpcError> {
        let per_channel = subs.iter().any(|(_, cursor)| cursor.is_some());
        let mut st = self.lock();
        st.clients.check_bind(conn, client_id)?;
        st.clients.bind(conn, client_id, None);
        metrics().set_clients_connected(st.clients.initialized());
        let principal = st.clients.principal(conn).cloned();
        let (mut live, mut missing) = (Vec::new(), Vec::new());
        for (uri, cursor) in subs {
            let uri = st.sessions.resolve(&uri).to_owned();
            let visible = principal
                .as_ref()
                .is_some_and(|p| watchable(&st, p, &uri).is_ok() && self.exists(&st, &uri));
            if visible && live.len() < self.cfg.server.max_subscriptions {
                live.push((uri, cursor.unwrap_or(last_seen)));
            } else {
                missing.push(uri);
            }
        }
        let answer = if per_channel {
            let channels = live
                .iter()
                .map(|(uri, cursor)| self.resume(&st, uri, *cursor))
                .collect();
            Reconnected::Channels { channels, missing }
        } else {
            let channels: HashSet<&str> = live.iter().map(|(u, _)| u.as_str()).collect();
            match st.log.since(last_seen, &channels) {
                Some(actions) => Reconnected::Replay { actions, missing },
                None => Reconnected::Snapshot {
                    snapshots: live
                        .iter()
                        .filter_map(|(u, _)| self.snapshot_locked(&st, u))
                        .collect(),
                    missing,
                },
            }
        };
        st.clients.subscribe(conn, live.into_iter().map(|(u, _)| u));
        Ok(answer)
    }

    /// One channel resumed from its own cursor: a replay when every action
    /// since is still kept, else a snapshot.
    fn resume(&self, st: &State, uri: &str, cursor: u64) -> Value {
        match st.log.since(cursor, &HashSet::from([uri])) {
            Some(actions) => json!({"channel": uri, "type": "replay", "actions": actions}),
            None => {
                json!({"channel": uri, "type": "snapshot", "snapshot": self.snapshot_locked(st, uri)})
            }
        }
    }

    fn exists(&self, st: &State, uri: &str) -> bool {
        uri == ROOT_URI || required_role(uri).is_some() || st.sessions.session_of(uri).is_some()
    }

    pub fn subscribe(&self, conn: ConnId, uri: &str) -> Result<Value, RpcError> {
        let mut st = self.lock();
        let snap = self.subscribable(&st, conn, &[uri.to_owned()])?.remove(0);
        st.clients.subscribe(conn, [uri.to_owned()]);
        Ok(snap)
    }

    /// The snapshots of `uris` if `conn` may subscribe to every one of them
    /// (each exists and is visible to its principal, and the subscription
    /// limit holds); changes nothing.
    fn subscribable(
        &self,
        st: &State,
        conn: ConnId,
        uris: &[String],
    ) -> Result<Vec<Value>, RpcError> {
        let closed = || RpcError::new(ErrorCode::InvalidRequest, "connection closed");
        let (held, new) = st
            .clients
            .new_subscriptions(conn, uris)
            .ok_or_else(closed)?;
        let max = self.cfg.server.max_subscriptions;
        if held + new > max {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                format!("at most {max} subscriptions per connection"),
            ));
        }
        let principal = st.clients.principal(conn).ok_or_else(closed)?;
        uris.iter()
            .map(|uri| {
                watchable(st, principal, uri)?;
                self.snapshot_locked(st, uri)
                    .ok_or_else(|| not_found(format_args!("{uri:?}")))
            })
            .collect()
    }

    /// A snapshot `{resource, state, fromSeq}` with extension fields restored.
    pub fn snapshot(&self, uri: &str) -> Option<Value> {
        let st = self.lock();
        self.snapshot_locked(&st, uri)
    }

    fn snapshot_locked(&self, st: &State, uri: &str) -> Option<Value> {
        let state = match self.extension_state(st, uri) {
            Some(state) => state,
            None => st.sessions.snapshot_state(uri, &self.hidden_sections())?,
        };
        Some(json!({"resource": uri, "state": state, "fromSeq": st.log.current()}))
    }
}

/// Whether `p` may watch `uri`: an extension channel needs its role (a
/// refusal names it); anything else must be visible to it (not visible is
/// not there).
fn watchable(st: &State, p: &Principal, uri: &str) -> Result<(), RpcError> {
    if let Some(allowed) = may_watch(p, uri) {
        return allowed;
    }
    if st.sessions.visible(p, uri) {
        Ok(())
    } else {
        Err(not_found(format_args!("{uri:?}")))
    }
}

/// Channels as they are named now (a chat's earlier URI is its URI today).
fn resolved(st: &State, uris: Vec<String>) -> Vec<String> {
    uris.into_iter()
        .map(|u| st.sessions.resolve(&u).to_owned())
        .collect()
}
