//! Connections and the client ids bound to them: connect, bind on
//! `initialize`/`reconnect`, disconnect, and the grace period after which a
//! vanished client stops being an active client anywhere.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::auth::Principal;
use super::errors::AhpError;
use super::host::Host;
use super::outbound::{Outbound, OutboundQueue};
use super::state::{Conn, Presence, State};
use crate::jsonrpc::{ErrorCode, Peer, RpcError};

pub type ConnId = u64;

/// A registered connection: its id, its peer for host -> client calls, its
/// outbound queue and the receiving end the writer drains.
pub struct Connected {
    pub conn: ConnId,
    pub peer: Arc<Peer>,
    pub out: Outbound,
    pub queue: OutboundQueue,
}

impl Host {
    /// Registers a new connection of `principal`; `kill` drops it at once
    /// (a client that does not read).
    pub fn connect(&self, kill: CancellationToken, principal: Arc<Principal>) -> Connected {
        let mut st = self.lock();
        let conn = st.next_conn;
        st.next_conn += 1;
        let server = &self.cfg.server;
        let (out, queue) = Outbound::new(
            server.outbound_queue,
            server.outbound_queue_bytes,
            kill,
            conn,
        );
        let o = out.clone();
        let peer = Peer::new(move |msg| o.send(msg.to_string()));
        st.conns.insert(
            conn,
            Conn {
                principal,
                out: out.clone(),
                peer: peer.clone(),
                client_id: None,
                subs: HashSet::new(),
            },
        );
        self.connections.send_replace(st.conns.len());
        Connected {
            conn,
            peer,
            out,
            queue,
        }
    }

    /// Returns once no connection is open (after a shutdown closed them).
    pub async fn all_disconnected(&self) {
        let mut rx = self.connections.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// A connection ended: its pending host -> client requests fail now, and
    /// its active-client entries are removed after the grace period unless
    /// the client comes back.
    pub fn disconnect(self: &Arc<Self>, conn: ConnId) {
        let (client, generation) = {
            let mut st = self.lock();
            let Some(c) = st.conns.remove(&conn) else {
                return;
            };
            self.connections.send_replace(st.conns.len());
            c.peer.close();
            let Some(client) = c.client_id else { return };
            let Some(p) = st.clients.get_mut(&client) else {
                return;
            };
            if p.conn != Some(conn) {
                return;
            }
            p.conn = None;
            (client, p.generation)
        };
        info!(client_id = ?client, "client disconnected; grace period {:?}", self.cfg.server.client_grace);
        let host = self.clone();
        let grace = self.cfg.server.client_grace;
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            host.grace_expired(&client, generation);
            host.grace_timers_fired.fetch_add(1, Ordering::Release);
        });
    }

    /// How many grace timers have run out (whether or not they removed anyone).
    pub fn grace_timers_fired(&self) -> u64 {
        self.grace_timers_fired.load(Ordering::Acquire)
    }

    /// The grace ran out: the client leaves every session, and its id is
    /// free again (for any principal).
    fn grace_expired(&self, client: &str, generation: u64) {
        let sessions: Vec<String> = {
            let mut st = self.lock();
            match st.clients.get(client) {
                Some(p) if p.conn.is_none() && p.generation == generation => {}
                _ => return,
            }
            st.clients.remove(client);
            st.sessions
                .iter()
                .filter(|(_, s)| s.state.active_clients.iter().any(|c| c.client_id == client))
                .map(|(u, _)| u.clone())
                .collect()
        };
        for s in sessions {
            info!(client_id = ?client, session = %s, "grace period over; removing active client");
            let _ = self.server_action(
                &s,
                json!({"type": "session/activeClientRemoved", "clientId": client}),
            );
        }
    }

    /// `unsubscribe`: an active client that stops watching its session is no
    /// longer active there.
    pub fn unsubscribe(&self, conn: ConnId, uri: &str) {
        let client = {
            let mut st = self.lock();
            let Some(c) = st.conns.get_mut(&conn) else {
                return;
            };
            c.subs.remove(uri);
            let client = c.client_id.clone();
            match (client, st.sessions.get(uri)) {
                (Some(cl), Some(s)) if s.state.active_clients.iter().any(|a| a.client_id == cl) => {
                    cl
                }
                _ => return,
            }
        };
        let _ = self.server_action(
            uri,
            json!({"type": "session/activeClientRemoved", "clientId": client}),
        );
    }

    /// The connection a client id is bound to now, if it is connected.
    pub fn client_peer(&self, client_id: &str) -> Option<Arc<Peer>> {
        let st = self.lock();
        let conn = st.clients.get(client_id)?.conn?;
        st.conns.get(&conn).map(|c| c.peer.clone())
    }

    pub fn is_connected(&self, client_id: &str) -> bool {
        self.client_peer(client_id).is_some()
    }

    pub fn client_id_of(&self, conn: ConnId) -> Option<String> {
        self.lock()
            .conns
            .get(&conn)
            .and_then(|c| c.client_id.clone())
    }

    /// The client id and principal of an initialized connection.
    pub(super) fn identity_of(&self, conn: ConnId) -> Option<(String, Arc<Principal>)> {
        let st = self.lock();
        let c = st.conns.get(&conn)?;
        Some((c.client_id.clone()?, c.principal.clone()))
    }

    /// Whether `conn` may bind `client_id`: a client id belongs to the
    /// principal that first bound it while it is bound or inside its grace.
    pub(super) fn check_bind(
        &self,
        st: &State,
        conn: ConnId,
        client_id: &str,
    ) -> Result<(), RpcError> {
        if client_id.is_empty() || client_id.len() > 256 {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                "field `clientId` must be 1 to 256 characters",
            ));
        }
        let Some(c) = st.conns.get(&conn) else {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                "connection closed",
            ));
        };
        if let Some(bound) = &c.client_id {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                format!("connection already initialized as {bound:?}"),
            ));
        }
        if let Some(p) = st.clients.get(client_id) {
            if p.principal.name != c.principal.name {
                return Err(RpcError::new(
                    AhpError::Conflict,
                    format!("clientId {client_id:?} belongs to another principal"),
                ));
            }
            if p.conn
                .is_some_and(|other| other != conn && st.conns.contains_key(&other))
            {
                return Err(RpcError::new(
                    ErrorCode::InvalidRequest,
                    format!("clientId {client_id:?} is in use by another connection"),
                ));
            }
        }
        Ok(())
    }

    /// Binds `client_id` to `conn`; [`Self::check_bind`] said yes under the same lock.
    pub(super) fn bind_client(&self, st: &mut State, conn: ConnId, client_id: &str) {
        let Some(principal) = st.conns.get(&conn).map(|c| c.principal.clone()) else {
            return;
        };
        let p = st.clients.entry(client_id.to_owned()).or_insert(Presence {
            principal,
            conn: None,
            generation: 0,
        });
        p.conn = Some(conn);
        p.generation += 1;
        if let Some(c) = st.conns.get_mut(&conn) {
            c.client_id = Some(client_id.to_owned());
        }
    }
}
