//! The host's operations: what the commands (`super::super::cmd`) and the
//! backend ask of it. Each takes the lock once, asks the owning parts, and
//! changes state only through them and the action path of [`super`].

use ahp_bridge_telemetry::Escaped;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ahp_types::actions::{
    ChatPendingMessageRemovedAction, ChatTurnStartedAction, RootActiveSessionsChangedAction,
    SessionActiveClientRemovedAction, StateAction,
};
use ahp_types::state::{Customization, PendingMessageKind, SessionSummary, ToolCallState};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::clients::ConnId;
use super::credentials::{close_after_turn, CredentialsReloaded};
use super::durable::SessionRestoreError;
use super::outbound::{Outbound, OutboundQueue};
use super::session_start::SessionStart;
use super::sessions::{now_iso, NewSession};
use super::subscriptions::not_found;
use super::{Host, HostState, RootNotice};
use crate::auth::{Authenticated, Principal, Principals, Standing};
use crate::backend::{ActiveClientView, ClientPlugin, QueuedTurn};
use crate::protocol::actions::Action;
use crate::protocol::errors::AhpError;
use crate::protocol::uri::{channel_kind, working_directory, ChannelKind, ROOT_URI};
use ahp_bridge_base::config::{Reloadable, Role};
use ahp_bridge_jsonrpc::{ErrorCode, Peer, RpcError};
use ahp_bridge_policy::rego::{ClientKind, Subject};
use ahp_bridge_store::{Store, TurnChanges};
use ahp_bridge_telemetry::metrics;

/// A registered connection: its id, its peer for host -> client calls, its
/// outbound queue and the receiving end the writer drains; `closing` is
/// cancelled when the host closes it (see [`Host::close_reason`]).
pub struct Connected {
    pub conn: ConnId,
    pub peer: Arc<Peer>,
    pub out: Outbound,
    pub queue: OutboundQueue,
    pub closing: CancellationToken,
}

impl Host {
    // ── connections ──────────────────────────────────────────────────────

    /// Registers a new connection, authenticated as `auth`; `kill` drops it
    /// at once (a client that does not read).
    pub fn connect(&self, kill: CancellationToken, auth: Authenticated) -> Connected {
        let mut st = self.lock();
        let server = self.settings.server();
        let id = st.clients.next_id();
        let (out, queue) =
            Outbound::new(server.outbound_queue, server.outbound_queue_bytes, kill, id);
        let o = out.clone();
        let peer = Peer::new(move |text| o.send(text));
        let closing = CancellationToken::new();
        let conn = st
            .clients
            .add(auth, out.clone(), peer.clone(), closing.clone());
        self.connections.send_replace(st.clients.len());
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
        let mut rx = self.connections.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// A connection ended: its pending host -> client requests fail now, and
    /// its active-client entries are removed after the grace period unless
    /// the client comes back.
    pub fn disconnect(self: &Arc<Self>, conn: ConnId) {
        let left = {
            let mut st = self.lock();
            let left = st.clients.remove(conn);
            self.connections.send_replace(st.clients.len());
            metrics().set_clients_connected(st.clients.initialized());
            left
        };
        let Some(left) = left else { return };
        let grace = self.settings.server().client_grace;
        info!(client = %Escaped(&left.client_id), "client disconnected; grace period {grace:?}");
        // Weak: a host let go of (shut down) is not kept for the grace.
        let host = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            let Some(host) = host.upgrade() else { return };
            host.grace_expired(&left.client_id, left.generation);
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
            let _ = self.dispatch(&s, removal(client));
        }
    }

    /// `unsubscribe`: an active client that stops watching its session is no
    /// longer active there.
    pub fn unsubscribe(&self, conn: ConnId, uri: &str) {
        let client = {
            let mut st = self.lock();
            st.clients.unsubscribe(conn, uri);
            match st.clients.client_id(conn).map(String::from) {
                Some(c) if st.sessions.is_active(uri, &c) => c,
                _ => return,
            }
        };
        let _ = self.dispatch(uri, removal(&client));
    }

    /// The connection a client id is attached to now, if it is connected.
    pub fn client_peer(&self, client_id: &str) -> Option<Arc<Peer>> {
        self.lock().clients.peer_of_client(client_id).cloned()
    }

    pub fn is_connected(&self, client_id: &str) -> bool {
        self.client_peer(client_id).is_some()
    }

    pub fn client_id_of(&self, conn: ConnId) -> Option<String> {
        self.lock().clients.client_id(conn).map(String::from)
    }

    // ── credentials ([`super::credentials`]) ────────────────────────────

    /// Puts `principals`, and the rate limits of `cfg` (the file they came
    /// from), in force, and closes each connection whose credential no
    /// longer stands once its running turn ends.
    pub fn replace_credentials(
        self: &Arc<Self>,
        principals: Principals,
        cfg: Reloadable<'_>,
    ) -> CredentialsReloaded {
        let principals = self.credentials.replace(principals, cfg);
        let revoked = self.lock().clients.revoke(&principals);
        let closing = revoked.len();
        for r in revoked {
            info!(
                conn = r.conn,
                reason = r.standing.reason(),
                "connection revoked; it closes once its running turn ends"
            );
            let host = Arc::downgrade(self);
            let conn = r.conn;
            let running = move || host.upgrade().is_some_and(|h| h.turn_running_for(conn));
            let limit = self.settings.turn_inactivity_timeout();
            tokio::spawn(close_after_turn(
                self.boundaries.subscribe(),
                limit,
                running,
                r,
            ));
        }
        CredentialsReloaded {
            principals: principals.len(),
            closing,
        }
    }

    /// Why the host closes `conn`, once it does.
    pub fn close_reason(&self, conn: ConnId) -> Option<&'static str> {
        self.lock().clients.revoked(conn).map(Standing::reason)
    }

    /// Who `client_id` is to the policy (its principal while it is connected
    /// or in its grace); nobody when no client is known.
    pub fn subject_of(&self, client_id: Option<&str>) -> Subject {
        let Some(id) = client_id else {
            return Subject::nobody();
        };
        let st = self.lock();
        match st.clients.principal_of_client(id) {
            Some(p) => p.subject(Some(id), ClientKind::Ahp),
            None => Subject::client(id, ClientKind::Ahp),
        }
    }

    /// Whether `conn`'s client answers for a running turn.
    pub(super) fn turn_running_for(&self, conn: ConnId) -> bool {
        let st = self.lock();
        st.clients
            .client_id(conn)
            .is_some_and(|c| st.sessions.turn_running_for(c))
    }

    // ── sessions ─────────────────────────────────────────────────────────

    /// Adds a session checked by `createSession`: its creator watches it from
    /// the start, the root hears of it, `active` (the creator's own entry)
    /// is set, and the backend is told.
    pub fn add_session(
        &self,
        conn: ConnId,
        new: NewSession,
        active: Option<Action>,
    ) -> Result<(), RpcError> {
        let (uri, owner) = (new.uri.clone(), new.owner.clone());
        {
            let mut st = self.lock();
            self.may_add_session(&st, conn, &owner)?;
            if st.sessions.insert(new).is_err() {
                return Err(RpcError::new(
                    AhpError::SessionAlreadyExists,
                    format!("session {uri} already exists"),
                ));
            }
            let room = st
                .clients
                .new_subscriptions(conn, &[])
                .is_some_and(|(held, _)| held < self.settings.server().max_subscriptions);
            if room {
                st.clients.subscribe(conn, [uri.clone()]);
            }
            if let Some(summary) = st.sessions.summary(&uri) {
                self.notify_root(&st, &owner, RootNotice::Added(Box::new(summary)));
            }
        }
        self.update_active_sessions();
        if let Some(set) = active {
            let _ = self.dispatch(&uri, set);
        }
        if let Some(b) = self.backend() {
            b.session_created(&uri);
        }
        Ok(())
    }

    /// Adds a session something other than a client started (an SDK app's,
    /// run by the app itself): the root hears of it; the backend is not told
    /// (there is nothing for it to create).
    pub fn add_watched_session(&self, new: NewSession) -> Result<(), RpcError> {
        let (uri, owner) = (new.uri.clone(), new.owner.clone());
        {
            let mut st = self.lock();
            if st.sessions.insert(new).is_err() {
                return Err(RpcError::new(
                    AhpError::SessionAlreadyExists,
                    format!("session {uri} already exists"),
                ));
            }
            if let Some(summary) = st.sessions.summary(&uri) {
                self.notify_root(&st, &owner, RootNotice::Added(Box::new(summary)));
            }
        }
        self.update_active_sessions();
        Ok(())
    }

    /// Whether `conn`, of principal `owner`, may add a session now: not
    /// with a revoked credential, nor at its `max_sessions`.
    fn may_add_session(&self, st: &HostState, conn: ConnId, owner: &str) -> Result<(), RpcError> {
        if let Some(standing) = st.clients.revoked(conn) {
            return Err(RpcError::new(
                AhpError::PermissionDenied,
                format!("{}: this connection starts nothing new", standing.reason()),
            ));
        }
        let owned = st.sessions.count_owned_by(owner);
        self.credentials
            .limits()
            .check_sessions(owner, owned)
            .map_err(|l| {
                RpcError::new(AhpError::PermissionDenied, l.to_string())
                    .with_data(json!({"limit": l.limit.key()}))
            })
    }

    /// `disposeSession`: its owner, or an admin, removes it.
    pub fn remove_session(&self, principal: &Principal, uri: &str) -> Result<(), RpcError> {
        {
            let mut st = self.lock();
            let owner = match st.sessions.owner(uri) {
                Some(o) if principal.sees(o) => o.to_owned(),
                _ => return Err(not_found(format_args!("{uri:?}"))),
            };
            if owner != principal.name && !principal.is_admin() {
                return Err(RpcError::new(
                    AhpError::PermissionDenied,
                    format!("principal {:?} may dispose only its own sessions; another's needs the `admin` role", principal.name),
                ));
            }
            let Some((_, chat)) = st.sessions.remove(uri) else {
                return Err(not_found(format_args!("{uri:?}")));
            };
            st.clients.forget_channel(uri);
            st.clients.forget_channel(&chat);
            self.durable.forget(uri);
            // A turn that ran there is over: a revoked connection may be waiting on it.
            self.boundaries.send_modify(|n| *n += 1);
            self.notify_root(&st, &owner, RootNotice::Removed(uri.to_owned()));
        }
        info!(session = %uri, principal = %principal.name, "session disposed");
        self.update_active_sessions();
        if let Some(b) = self.backend() {
            b.session_disposed(uri);
        }
        Ok(())
    }

    fn update_active_sessions(&self) {
        let n = self.lock().sessions.len();
        metrics().set_sessions(n);
        let n = n as i64;
        let changed = RootActiveSessionsChangedAction { active_sessions: n };
        let _ = self.dispatch(ROOT_URI, StateAction::RootActiveSessionsChanged(changed));
    }

    /// The summaries of the sessions `principal` sees, with when each changed.
    pub fn visible_sessions(&self, principal: &Principal) -> Vec<(String, String, SessionSummary)> {
        let st = self.lock();
        st.sessions
            .visible_to(principal)
            .filter_map(|(uri, modified)| {
                let summary = st.sessions.summary(uri)?;
                Some((uri.to_owned(), modified.to_owned(), summary))
            })
            .collect()
    }

    /// Whether `chat` exists and `principal` sees it.
    pub fn chat_visible(&self, principal: &Principal, chat: &str) -> bool {
        let st = self.lock();
        let chat = st.sessions.resolve(chat);
        st.sessions.has_chat(chat) && st.sessions.visible(principal, chat)
    }

    /// The directories `principal` may read through `channel` (see
    /// `Sessions::readable_dirs`).
    pub fn readable_dirs(
        &self,
        principal: &Principal,
        channel: &str,
    ) -> Result<Vec<PathBuf>, RpcError> {
        if matches!(
            channel_kind(channel),
            ChannelKind::Other | ChannelKind::HostChannel
        ) {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                "field `channel` must be ahp-root://, a session or a chat",
            ));
        }
        let default = self.settings.working_directory();
        let st = self.lock();
        let channel = st.sessions.resolve(channel);
        st.sessions
            .readable_dirs(principal, channel, default)
            .ok_or_else(|| not_found(format_args!("{channel:?}")))
    }

    // ── for the backend ──────────────────────────────────────────────────

    /// The session's working directories, as local paths (the first is
    /// the runtime's; a policy reads them all).
    pub fn working_directories(&self, session: &str) -> Vec<PathBuf> {
        let st = self.lock();
        let Some(dirs) = st
            .sessions
            .state(session)
            .and_then(|s| s.working_directories.clone())
        else {
            return vec![];
        };
        dirs.iter()
            .filter_map(|d| working_directory(d).ok())
            .collect()
    }

    /// The session's customizations as its state holds them now (the
    /// clients' toggles applied by the reducer), empty when it has none.
    pub fn session_customizations(&self, session: &str) -> Vec<Customization> {
        let st = self.lock();
        st.sessions
            .state(session)
            .and_then(|s| s.customizations.clone())
            .unwrap_or_default()
    }

    /// The session's active clients in order, with their tools and opt-ins.
    pub fn active_clients(&self, session: &str) -> Vec<ActiveClientView> {
        let st = self.lock();
        let Some(state) = st.sessions.state(session) else {
            return vec![];
        };
        state
            .active_clients
            .iter()
            .map(|c| {
                let p = st.clients.principal_of_client(&c.client_id);
                ActiveClientView {
                    transform_sections: p
                        .map_or(Some(Default::default()), |p| p.transform_sections()),
                    plugins: ClientPlugin::all_of(c),
                    may_customize: p.is_some_and(|p| p.has(Role::Customize)),
                    subject: p.map_or_else(
                        || Subject::client(&c.client_id, ClientKind::Ahp),
                        |p| p.subject(Some(&c.client_id), ClientKind::Ahp),
                    ),
                    client_id: c.client_id.clone(),
                    tools: c.tools.clone(),
                    opt_in: st
                        .sessions
                        .opt_in(session, &c.client_id)
                        .map(|o| o.sections.clone())
                        .unwrap_or_default(),
                }
            })
            .collect()
    }

    /// The running turn's id and tool call `tool_call_id` in `chat`, as the state has it now.
    pub fn tool_call(&self, chat: &str, tool_call_id: &str) -> Option<(String, ToolCallState)> {
        let st = self.lock();
        let (turn, call) = st.sessions.tool_call(chat, tool_call_id)?;
        Some((turn.to_owned(), call.clone()))
    }

    /// Starts the first queued message of `chat` as a turn, if the chat has
    /// no active turn: `chat/pendingMessageRemoved`, then `chat/turnStarted`
    /// with its `queuedMessageId`, under one lock, so two consumers cannot
    /// both take it. `None` when nothing is queued or a turn runs.
    pub fn start_next_queued(&self, chat: &str) -> Option<QueuedTurn> {
        let mut st = self.lock();
        let q = st.sessions.next_queued(chat)?.clone();
        let turn_id = uuid::Uuid::new_v4().to_string();
        let removed = StateAction::ChatPendingMessageRemoved(ChatPendingMessageRemovedAction {
            kind: PendingMessageKind::Queued,
            id: q.id.clone(),
        });
        let started = StateAction::ChatTurnStarted(ChatTurnStartedAction {
            turn_id: turn_id.clone(),
            started_at: now_iso(),
            message: q.message.clone(),
            queued_message_id: Some(q.id),
            meta: None,
        });
        self.apply_all(&mut st, chat, [removed, started])?;
        Some(QueuedTurn {
            turn_id,
            text: q.message.text,
            model: q.message.model.map(|m| m.id),
            agent: q.message.agent.map(|a| a.uri),
        })
    }

    /// Takes the steering message of `chat` out of the state; its text.
    pub fn take_steering(&self, chat: &str) -> Option<String> {
        let mut st = self.lock();
        let m = st.sessions.chat(chat)?.steering_message.clone()?;
        let removed = StateAction::ChatPendingMessageRemoved(ChatPendingMessageRemovedAction {
            kind: PendingMessageKind::Steering,
            id: m.id,
        });
        self.apply_all(&mut st, chat, [removed])?;
        Some(m.message.text)
    }

    /// Applies and commits host actions on one channel, in order, under the
    /// lock the caller holds, stopping at the first the reducer refuses.
    fn apply_all<const N: usize>(
        &self,
        st: &mut HostState,
        channel: &str,
        actions: [StateAction; N],
    ) -> Option<()> {
        for a in actions {
            let a = Action::from(a);
            if let Err(e) = st.sessions.apply(channel, &a) {
                warn!(channel, "pending message not consumed: {e}");
                return None;
            }
            self.commit(st, channel, &a, None);
        }
        Some(())
    }

    /// The model a session's turns use unless a message chooses another.
    pub fn session_model(&self, uri: &str) -> Option<String> {
        self.lock().sessions.model_of(uri)
    }

    /// Who created `session` and the section text it was created with (in
    /// front of the runtime's AHP host).
    pub fn session_start(&self, uri: &str) -> Option<SessionStart> {
        self.lock().sessions.start_of(uri)
    }

    /// The GitHub token the owner of `session` gave, if any.
    pub fn github_token_for(&self, session: &str) -> Option<String> {
        let owner = self.lock().sessions.owner(session)?.to_owned();
        self.credentials.tokens().get(&owner)
    }

    /// `principal` gave a runtime token: the backend hands it on.
    pub fn authenticated(&self, principal: &str) {
        if let Some(b) = self.backend() {
            b.authenticated(principal);
        }
    }

    /// The sessions `principal` created.
    pub fn sessions_owned_by(&self, principal: &str) -> Vec<String> {
        self.lock().sessions.owned_by(principal)
    }

    /// `fetchTurns`: the stored page before `cursor` goes to the chat's
    /// subscribers as `chat/turnsLoaded`, then leaves the host's state
    /// again (see [`super::durable`]).
    pub fn load_turns(&self, chat: &str, cursor: Option<&str>) -> Result<(), RpcError> {
        let mut st = self.lock();
        let chat = st.sessions.resolve(chat).to_owned();
        let window = self.settings.window();
        let Some(loaded) = self.durable.page(&st.sessions, &chat, cursor, window)? else {
            return Ok(());
        };
        let had = st.sessions.chat(&chat).map_or(0, |c| c.turns.len());
        st.sessions
            .apply(&chat, &loaded)
            .map_err(|r| RpcError::new(ErrorCode::InternalError, r.0))?;
        self.commit(&mut st, &chat, &loaded, None);
        let now = st.sessions.chat(&chat).map_or(0, |c| c.turns.len());
        st.sessions.unload(&chat, now.saturating_sub(had));
        Ok(())
    }

    /// Records what the backend needs to find a session again.
    pub fn set_backend_ref(&self, session: &str, backend_ref: &str) {
        let st = self.lock();
        let none = TurnChanges::default();
        self.durable
            .save(&st.sessions, session, Some(backend_ref), &none);
    }

    /// Takes the store: its sessions come back as `ready` (the backend is
    /// told of each with its reference), and `serverSeq` continues above the
    /// ceiling it holds. Call once, before serving. Returns how many
    /// sessions came back.
    pub fn restore_sessions(&self, store: Store) -> Result<usize, SessionRestoreError> {
        let path = store.path().to_owned();
        let restored = {
            let mut st = self.lock();
            let st = &mut *st;
            let window = self.settings.window();
            let (restored, first_seq) =
                self.durable
                    .restore(store, &mut st.sessions, &mut st.replay, window)?;
            info!(path = %path.display(), sessions = restored.len(), first_seq, "state restored");
            restored
        };
        self.update_active_sessions();
        if let Some(b) = self.backend() {
            for (uri, backend_ref) in &restored {
                b.session_restored(uri, backend_ref.as_deref());
            }
        }
        Ok(restored.len())
    }
}

fn removal(client_id: &str) -> StateAction {
    StateAction::SessionActiveClientRemoved(SessionActiveClientRemovedAction {
        client_id: client_id.to_owned(),
    })
}
