//! Connections and the client ids attached to them: each connection's
//! principal and the credential it authenticated with, outbound queue, peer
//! and subscriptions; which connection a client id is attached to now (its
//! presence), kept while it is connected or inside its grace period, then
//! free again; which connections a reload revoked. Changed only here.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::outbound::Outbound;
use crate::auth::{Authenticated, Principal, Principals, Standing};
use crate::protocol::errors::AhpError;
use crate::protocol::versions::Version;
use ahp_bridge_jsonrpc::{ErrorCode, Peer, RpcError};

pub(crate) type ConnId = u64;

pub(super) struct Clients {
    conns: HashMap<ConnId, Conn>,
    presence: HashMap<String, Presence>,
    next: ConnId,
}

/// One client connection.
struct Conn {
    auth: Authenticated,
    out: Outbound,
    peer: Arc<Peer>,
    client_id: Option<String>,
    subs: HashSet<String>,
    /// The protocol line it negotiated (at `initialize`, or the client's
    /// earlier one at `reconnect`).
    version: Version,
    /// Cancelled when the host closes it (a revoked credential).
    closing: CancellationToken,
    /// Set once a reload revoked its credential: it closes when its running
    /// turn ends, and starts nothing new meanwhile.
    revoked: Option<Standing>,
}

/// A connection a reload revoked: it closes once its running turn ends.
pub(super) struct Revoked {
    pub conn: ConnId,
    pub closing: CancellationToken,
    pub standing: Standing,
}

/// Where a client id is connected now, and whose it is.
struct Presence {
    principal: Arc<Principal>,
    conn: Option<ConnId>,
    /// Bumped on every connect, so a grace timer knows it is stale.
    generation: u64,
    /// What it negotiated, for a `reconnect` (which negotiates nothing).
    version: Version,
}

/// A connection subscribed to a channel, as the broadcast needs it.
pub(super) struct Subscriber<'a> {
    pub principal: &'a Principal,
    pub out: &'a Outbound,
    pub version: Version,
    pub client_id: Option<&'a str>,
}

/// A client id whose connection went away: its grace period starts.
pub(super) struct Left {
    pub client_id: String,
    pub generation: u64,
}

impl Clients {
    pub(super) fn new() -> Self {
        Self {
            conns: HashMap::new(),
            presence: HashMap::new(),
            next: 1,
        }
    }

    /// The next connection's id (for its outbound queue, before it is added).
    pub(super) fn next_id(&self) -> ConnId {
        self.next
    }

    pub(super) fn add(
        &mut self,
        auth: Authenticated,
        out: Outbound,
        peer: Arc<Peer>,
        closing: CancellationToken,
    ) -> ConnId {
        let conn = self.next;
        self.next += 1;
        let c = Conn {
            auth,
            out,
            peer,
            client_id: None,
            subs: HashSet::new(),
            version: Version::default(),
            closing,
            revoked: None,
        };
        self.conns.insert(conn, c);
        conn
    }

    pub(super) fn len(&self) -> usize {
        self.conns.len()
    }

    /// Connections attached to a client id (initialized or reconnected).
    pub(super) fn initialized(&self) -> usize {
        self.conns
            .values()
            .filter(|c| c.client_id.is_some())
            .count()
    }

    /// A connection ended: its pending calls fail now; the client id it
    /// was attached to (if still attached to it) starts its grace.
    pub(super) fn remove(&mut self, conn: ConnId) -> Option<Left> {
        let c = self.conns.remove(&conn)?;
        c.peer.close();
        let client_id = c.client_id?;
        let p = self.presence.get_mut(&client_id)?;
        if p.conn != Some(conn) {
            return None;
        }
        p.conn = None;
        Some(Left {
            client_id,
            generation: p.generation,
        })
    }

    /// The grace of `client_id` ran out: whether it is gone for good now
    /// (not back, not rebound since), freeing the id.
    pub(super) fn expire(&mut self, client_id: &str, generation: u64) -> bool {
        match self.presence.get(client_id) {
            Some(p) if p.conn.is_none() && p.generation == generation => {
                self.presence.remove(client_id);
                true
            }
            _ => false,
        }
    }

    /// Whether `conn` may attach `client_id`: a client id belongs to the
    /// principal that first attached it while it is attached or inside its grace.
    pub(super) fn check_attach(&self, conn: ConnId, client_id: &str) -> Result<(), RpcError> {
        if client_id.is_empty() || client_id.len() > 256 {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                "field `clientId` must be 1 to 256 characters",
            ));
        }
        let Some(c) = self.conns.get(&conn) else {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                "connection closed",
            ));
        };
        if let Some(attached) = &c.client_id {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                format!("connection already initialized as {attached:?}"),
            ));
        }
        let Some(p) = self.presence.get(client_id) else {
            return Ok(());
        };
        if p.principal.name != c.auth.principal.name {
            return Err(RpcError::new(
                AhpError::Conflict,
                format!("clientId {client_id:?} belongs to another principal"),
            ));
        }
        if p.conn
            .is_some_and(|other| other != conn && self.conns.contains_key(&other))
        {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                format!("clientId {client_id:?} is in use by another connection"),
            ));
        }
        Ok(())
    }

    /// Attaches `client_id` to `conn` speaking `version` (`None`: the one the
    /// client negotiated before, for a `reconnect`); [`Self::check_attach`]
    /// said yes.
    pub(super) fn attach(&mut self, conn: ConnId, client_id: &str, version: Option<Version>) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.client_id = Some(client_id.to_owned());
        let p = self
            .presence
            .entry(client_id.to_owned())
            .or_insert(Presence {
                principal: c.auth.principal.clone(),
                conn: None,
                generation: 0,
                version: Version::default(),
            });
        // The same name (check_attach), but perhaps reloaded since: the newest stands.
        p.principal = c.auth.principal.clone();
        p.conn = Some(conn);
        p.generation += 1;
        if let Some(v) = version {
            p.version = v;
        }
        c.version = p.version;
    }

    /// The protocol line `conn` speaks.
    pub(super) fn version(&self, conn: ConnId) -> Version {
        self.conns.get(&conn).map(|c| c.version).unwrap_or_default()
    }

    /// The client id and principal of an initialized connection.
    pub(super) fn identity(&self, conn: ConnId) -> Option<(&str, &Arc<Principal>)> {
        let c = self.conns.get(&conn)?;
        Some((c.client_id.as_deref()?, &c.auth.principal))
    }

    pub(super) fn principal(&self, conn: ConnId) -> Option<&Arc<Principal>> {
        self.conns.get(&conn).map(|c| &c.auth.principal)
    }

    /// Marks each connection `principals` would no longer let in as the
    /// same principal (once: one marked before is not returned again).
    pub(super) fn revoke(&mut self, principals: &Principals) -> Vec<Revoked> {
        let mut out = Vec::new();
        for (conn, c) in &mut self.conns {
            let standing = principals.standing(&c.auth);
            if standing == Standing::Valid || c.revoked.is_some() {
                continue;
            }
            c.revoked = Some(standing);
            out.push(Revoked {
                conn: *conn,
                closing: c.closing.clone(),
                standing,
            });
        }
        out
    }

    /// Why `conn` is closing, if a reload revoked its credential.
    pub(super) fn revoked(&self, conn: ConnId) -> Option<Standing> {
        self.conns.get(&conn)?.revoked
    }

    pub(super) fn client_id(&self, conn: ConnId) -> Option<&str> {
        self.conns.get(&conn)?.client_id.as_deref()
    }

    /// The principal a client id belongs to while it is present.
    pub(super) fn principal_of_client(&self, client_id: &str) -> Option<&Arc<Principal>> {
        self.presence.get(client_id).map(|p| &p.principal)
    }

    /// The peer of the connection a client id is attached to now.
    pub(super) fn peer_of_client(&self, client_id: &str) -> Option<&Arc<Peer>> {
        let conn = self.presence.get(client_id)?.conn?;
        self.conns.get(&conn).map(|c| &c.peer)
    }

    pub(super) fn out(&self, conn: ConnId) -> Option<&Outbound> {
        self.conns.get(&conn).map(|c| &c.out)
    }

    /// How many more subscriptions `conn` would hold with `uris` added.
    pub(super) fn new_subscriptions(
        &self,
        conn: ConnId,
        uris: &[String],
    ) -> Option<(usize, usize)> {
        let c = self.conns.get(&conn)?;
        let new = uris.iter().filter(|u| !c.subs.contains(*u)).count();
        Some((c.subs.len(), new))
    }

    pub(super) fn subscribe(&mut self, conn: ConnId, uris: impl IntoIterator<Item = String>) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.subs.extend(uris);
        }
    }

    pub(super) fn unsubscribe(&mut self, conn: ConnId, uri: &str) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.subs.remove(uri);
        }
    }

    /// Nobody watches `uri` any more (it was disposed).
    pub(super) fn forget_channel(&mut self, uri: &str) {
        for c in self.conns.values_mut() {
            c.subs.remove(uri);
        }
    }

    /// The connections subscribed to `channel`.
    pub(super) fn subscribers<'a>(
        &'a self,
        channel: &'a str,
    ) -> impl Iterator<Item = Subscriber<'a>> + 'a {
        self.conns
            .values()
            .filter(move |c| c.subs.contains(channel))
            .map(|c| Subscriber {
                principal: &c.auth.principal,
                out: &c.out,
                version: c.version,
                client_id: c.client_id.as_deref(),
            })
    }
}
