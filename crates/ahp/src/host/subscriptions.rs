//! The handshake's attaching of a client and the subscriptions, as the state behind the
//! host's lock answers them: who may watch which channel, the snapshots a
//! subscriber starts from, and how a client that comes back catches up (a
//! replay of what it missed, or snapshots; per channel in the 1.1 form).
//! The host takes the lock and calls these ([`super::Host::attach_client`]
//! and the others); each changes the parts only through their methods.

use std::collections::HashSet;

use serde_json::{json, Value};

use super::clients::ConnId;
use super::core::{HostState, View};
use super::host_channels::{may_watch, StatusInputs};
use crate::auth::Principal;
use crate::channels::required_role;
use crate::protocol::errors::AhpError;
use crate::protocol::uri::ROOT_URI;
use crate::protocol::versions::Version;
use ahp_bridge_jsonrpc::{ErrorCode, RpcError};
use ahp_bridge_telemetry::metrics;

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

pub(super) fn not_found(what: impl std::fmt::Display) -> RpcError {
    RpcError::new(
        AhpError::SessionNotFound,
        format!("no such channel: {what}"),
    )
}

impl HostState {
    /// Attaches `client_id` to `conn`, speaking `version`, and subscribes it
    /// to `initial`, all or nothing: a failed initialize leaves the id
    /// detached and nothing subscribed. Returns the `serverSeq` and the
    /// snapshots.
    pub(super) fn attach(
        &mut self,
        view: &View,
        conn: ConnId,
        client_id: &str,
        version: Version,
        initial: Vec<String>,
    ) -> Result<(u64, Vec<Value>), RpcError> {
        self.clients.check_attach(conn, client_id)?;
        let initial = self.resolved(initial);
        let snapshots = self.subscribable(view, conn, &initial)?;
        self.clients.attach(conn, client_id, Some(version));
        metrics().set_clients_connected(self.clients.initialized());
        self.clients.subscribe(conn, initial);
        Ok((self.replay.current(), snapshots))
    }

    /// Attaches `client_id` to `conn` again (speaking what it negotiated before)
    /// and answers with a replay of what it missed on the channels it still
    /// may see, or with snapshots: for all of them at once from
    /// `last_seen`, or channel by channel from each one's own cursor (the
    /// 1.1 form, when any is given).
    pub(super) fn reattach(
        &mut self,
        view: &View,
        conn: ConnId,
        client_id: &str,
        last_seen: u64,
        subs: Vec<(String, Option<u64>)>,
    ) -> Result<Reconnected, RpcError> {
        let per_channel = subs.iter().any(|(_, cursor)| cursor.is_some());
        self.clients.check_attach(conn, client_id)?;
        self.clients.attach(conn, client_id, None);
        metrics().set_clients_connected(self.clients.initialized());
        let principal = self.clients.principal(conn).cloned();
        let (mut live, mut missing) = (Vec::new(), Vec::new());
        for (uri, cursor) in subs {
            let uri = self.sessions.resolve(&uri).to_owned();
            let visible = principal
                .as_ref()
                .is_some_and(|p| self.watchable(p, &uri).is_ok() && self.exists(&uri));
            if visible && live.len() < view.max_subscriptions {
                live.push((uri, cursor.unwrap_or(last_seen)));
            } else {
                missing.push(uri);
            }
        }
        let answer = if per_channel {
            let channels = live
                .iter()
                .map(|(uri, cursor)| self.resume(view, uri, *cursor))
                .collect();
            Reconnected::Channels { channels, missing }
        } else {
            let channels: HashSet<&str> = live.iter().map(|(u, _)| u.as_str()).collect();
            match self.replay.since(last_seen, &channels) {
                Some(actions) => Reconnected::Replay { actions, missing },
                None => Reconnected::Snapshot {
                    snapshots: live
                        .iter()
                        .filter_map(|(u, _)| self.snapshot(view, u))
                        .collect(),
                    missing,
                },
            }
        };
        self.clients
            .subscribe(conn, live.into_iter().map(|(u, _)| u));
        Ok(answer)
    }

    /// `subscribe`: the channel's snapshot, once `conn` watches it.
    pub(super) fn subscribe(
        &mut self,
        view: &View,
        conn: ConnId,
        uri: &str,
    ) -> Result<Value, RpcError> {
        let snap = self.subscribable(view, conn, &[uri.to_owned()])?.remove(0);
        self.clients.subscribe(conn, [uri.to_owned()]);
        Ok(snap)
    }

    /// One channel resumed from its own cursor: a replay when every action
    /// since is still kept, else a snapshot.
    fn resume(&self, view: &View, uri: &str, cursor: u64) -> Value {
        match self.replay.since(cursor, &HashSet::from([uri])) {
            Some(actions) => json!({"channel": uri, "type": "replay", "actions": actions}),
            None => {
                json!({"channel": uri, "type": "snapshot", "snapshot": self.snapshot(view, uri)})
            }
        }
    }

    fn exists(&self, uri: &str) -> bool {
        uri == ROOT_URI || required_role(uri).is_some() || self.sessions.session_of(uri).is_some()
    }

    /// The snapshots of `uris` if `conn` may subscribe to every one of them
    /// (each exists and is visible to its principal, and the subscription
    /// limit holds); changes nothing.
    fn subscribable(
        &self,
        view: &View,
        conn: ConnId,
        uris: &[String],
    ) -> Result<Vec<Value>, RpcError> {
        let closed = || RpcError::new(ErrorCode::InvalidRequest, "connection closed");
        let (held, new) = self
            .clients
            .new_subscriptions(conn, uris)
            .ok_or_else(closed)?;
        let max = view.max_subscriptions;
        if held + new > max {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                format!("at most {max} subscriptions per connection"),
            ));
        }
        let principal = self.clients.principal(conn).ok_or_else(closed)?;
        uris.iter()
            .map(|uri| {
                self.watchable(principal, uri)?;
                self.snapshot(view, uri)
                    .ok_or_else(|| not_found(format_args!("{uri:?}")))
            })
            .collect()
    }

    /// A snapshot `{resource, state, fromSeq}` with extension fields restored.
    pub(super) fn snapshot(&self, view: &View, uri: &str) -> Option<Value> {
        let state = match self.host_channel_state(view, uri) {
            Some(state) => state,
            None => self
                .sessions
                .snapshot_state(uri, &view.policy.hidden_sections())?,
        };
        Some(json!({"resource": uri, "state": state, "fromSeq": self.replay.current()}))
    }

    /// What the host status channel counts, now.
    pub(super) fn status_inputs(&self, pool_size: usize) -> StatusInputs {
        StatusInputs {
            pool_size,
            clients: self.clients.initialized(),
            sessions: self.sessions.len(),
        }
    }

    /// The host channel's state, if `uri` is one of them.
    fn host_channel_state(&self, view: &View, uri: &str) -> Option<Value> {
        let now = self.status_inputs(view.pool_size);
        self.host_channels.state(uri, &view.policy, &now)
    }

    /// Whether `p` may watch `uri`: a host channel needs its role (a
    /// refusal names it); anything else must be visible to it (not visible
    /// is not there).
    fn watchable(&self, p: &Principal, uri: &str) -> Result<(), RpcError> {
        if let Some(allowed) = may_watch(p, uri) {
            return allowed;
        }
        if self.sessions.visible(p, uri) {
            Ok(())
        } else {
            Err(not_found(format_args!("{uri:?}")))
        }
    }

    /// Channels as they are named now (a chat's earlier URI is its URI today).
    fn resolved(&self, uris: Vec<String>) -> Vec<String> {
        uris.into_iter()
            .map(|u| self.sessions.resolve(&u).to_owned())
            .collect()
    }
}
