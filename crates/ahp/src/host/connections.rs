//! The host's connections: registering and dropping them, the grace a
//! client that left is given before it leaves its sessions, who a
//! connection is, and the closing of those whose credential no longer
//! stands. [`ConnectionTally`] owns what only this concern counts; [`Connections`]
//! is what the host lends for it (`Host::connections`), over its core and
//! its credentials.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ahp_types::actions::{SessionActiveClientRemovedAction, StateAction};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::clients::ConnId;
use super::core::Core;
use super::credentials::{close_after_turn, Credentials, CredentialsReloaded};
use super::outbound::{Outbound, OutboundQueue};
use crate::auth::{Authenticated, Principal, Principals, Standing};
use crate::protocol::versions::Version;
use ahp_bridge_base::config::Reloadable;
use ahp_bridge_jsonrpc::Peer;
use ahp_bridge_policy::{ClientKind, Subject};
use ahp_bridge_telemetry::{metrics, Escaped};

/// A registered connection: its id, its peer for host -> client calls, its
/// outbound queue and the receiving end the writer drains; `closing` is
/// cancelled when the host closes it (see [`Connections::close_reason`]).
pub struct Connected {
    pub conn: ConnId,
    pub peer: Arc<Peer>,
    pub out: Outbound,
    pub queue: OutboundQueue,
    pub closing: CancellationToken,
}

/// What the host counts of its connections.
#[derive(Default)]
pub(super) struct ConnectionTally {
    /// How many connections are open, for a shutdown to wait on.
    open: watch::Sender<usize>,
    grace_timers_fired: AtomicU64,
}

/// The host's connections, lent by `Host::connections`.
pub struct Connections<'h> {
    core: &'h Arc<Core>,
    credentials: &'h Credentials,
    presence: &'h Arc<ConnectionTally>,
}

impl<'h> Connections<'h> {
    pub(super) fn new(
        core: &'h Arc<Core>,
        credentials: &'h Credentials,
        presence: &'h Arc<ConnectionTally>,
    ) -> Self {
        Self {
            core,
            credentials,
            presence,
        }
    }

    /// Registers a new connection, authenticated as `auth`; `kill` drops it
    /// at once (a client that does not read).
    pub fn connect(&self, kill: CancellationToken, auth: Authenticated) -> Connected {
        let mut st = self.core.lock();
        let server = self.core.settings().server();
        let id = st.clients.next_id();
        let (out, queue) =
            Outbound::new(server.outbound_queue, server.outbound_queue_bytes, kill, id);
        let o = out.clone();
        let peer = Peer::new(move |text| o.send(text));
        let closing = CancellationToken::new();
        let conn = st
            .clients
            .add(auth, out.clone(), peer.clone(), closing.clone());
        self.presence.open.send_replace(st.clients.len());
        Connected {
            conn,
            peer,
            out,
            queue,
            closing,
        }
    }

    /// Returns once no connection is open (after a shutdown closed them).
    pub async fn all_disconnected(&self) {
        let mut rx = self.presence.open.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// A connection ended: its pending host -> client requests fail now, and
    /// its active-client entries are removed after the grace period unless
    /// the client comes back.
    pub fn disconnect(&self, conn: ConnId) {
        let left = {
            let mut st = self.core.lock();
            let left = st.clients.remove(conn);
            self.presence.open.send_replace(st.clients.len());
            metrics().set_clients_connected(st.clients.initialized());
            left
        };
        let Some(left) = left else { return };
        let grace = self.core.settings().server().client_grace;
        info!(client = %Escaped(&left.client_id), "client disconnected; grace period {grace:?}");
        // Weak: a host let go of (shut down) is not kept for the grace.
        let core = Arc::downgrade(self.core);
        let presence = self.presence.clone();
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            let Some(core) = core.upgrade() else { return };
            grace_expired(&core, &left.client_id, left.generation);
            presence.grace_timers_fired.fetch_add(1, Ordering::Release);
        });
    }

    /// How many grace timers have run out (whether or not they removed anyone).
    pub fn grace_timers_fired(&self) -> u64 {
        self.presence.grace_timers_fired.load(Ordering::Acquire)
    }

    /// `unsubscribe`: an active client that stops watching its session is no
    /// longer active there.
    pub fn unsubscribe(&self, conn: ConnId, uri: &str) {
        let client = {
            let mut st = self.core.lock();
            st.clients.unsubscribe(conn, uri);
            match st.clients.client_id(conn).map(String::from) {
                Some(c) if st.sessions.is_active(uri, &c) => c,
                _ => return,
            }
        };
        let _ = self.core.dispatch(uri, removal(&client).into());
    }

    /// The connection a client id is attached to now, if it is connected.
    pub fn client_peer(&self, client_id: &str) -> Option<Arc<Peer>> {
        self.core.lock().clients.peer_of_client(client_id).cloned()
    }

    pub fn is_connected(&self, client_id: &str) -> bool {
        self.client_peer(client_id).is_some()
    }

    pub fn client_id_of(&self, conn: ConnId) -> Option<String> {
        self.core.lock().clients.client_id(conn).map(String::from)
    }

    /// The client id and principal of an initialized connection.
    pub fn identity(&self, conn: ConnId) -> Option<(String, Arc<Principal>)> {
        let st = self.core.lock();
        let (id, p) = st.clients.identity(conn)?;
        Some((id.to_owned(), p.clone()))
    }

    /// The protocol line `conn` speaks.
    pub fn version_of(&self, conn: ConnId) -> Version {
        self.core.lock().clients.version(conn)
    }

    /// Who `client_id` is to the policy (its principal while it is connected
    /// or in its grace); nobody when no client is known.
    pub fn subject_of(&self, client_id: Option<&str>) -> Subject {
        let Some(id) = client_id else {
            return Subject::nobody();
        };
        let st = self.core.lock();
        match st.clients.principal_of_client(id) {
            Some(p) => p.subject(Some(id), ClientKind::Ahp),
            None => Subject::client(id, ClientKind::Ahp),
        }
    }

    /// Puts `principals`, and the rate limits of `cfg` (the file they came
    /// from), in force, and closes each connection whose credential no
    /// longer stands once its running turn ends.
    pub fn replace_credentials(
        &self,
        principals: Principals,
        cfg: Reloadable<'_>,
    ) -> CredentialsReloaded {
        let principals = self.credentials.replace(principals, cfg);
        let revoked = self.core.lock().clients.revoke(&principals);
        let closing = revoked.len();
        for r in revoked {
            info!(
                conn = r.conn,
                reason = r.standing.reason(),
                "connection revoked; it closes once its running turn ends"
            );
            let core = Arc::downgrade(self.core);
            let conn = r.conn;
            let running = move || core.upgrade().is_some_and(|c| turn_running_for(&c, conn));
            let limit = self.core.settings().turn_inactivity_timeout();
            tokio::spawn(close_after_turn(self.core.boundaries(), limit, running, r));
        }
        CredentialsReloaded {
            principals: principals.len(),
            closing,
        }
    }

    /// Why the host closes `conn`, once it does.
    pub fn close_reason(&self, conn: ConnId) -> Option<&'static str> {
        self.core.lock().clients.revoked(conn).map(Standing::reason)
    }
}

/// The grace ran out: the client leaves every session, and its id is
/// free again (for any principal).
fn grace_expired(core: &Core, client: &str, generation: u64) {
    let sessions: Vec<String> = {
        let mut st = core.lock();
        if !st.clients.expire(client, generation) {
            return;
        }
        st.sessions
            .uris()
            .filter(|u| st.sessions.is_active(u, client))
            .map(String::from)
            .collect()
    };
    for s in sessions {
        info!(client = %Escaped(client), session = %s, "grace period over; removing active client");
        let _ = core.dispatch(&s, removal(client).into());
    }
}

/// Whether `conn`'s client answers for a running turn.
fn turn_running_for(core: &Core, conn: ConnId) -> bool {
    let st = core.lock();
    st.clients
        .client_id(conn)
        .is_some_and(|c| st.sessions.turn_running_for(c))
}

fn removal(client_id: &str) -> StateAction {
    StateAction::SessionActiveClientRemoved(SessionActiveClientRemovedAction {
        client_id: client_id.to_owned(),
    })
}
