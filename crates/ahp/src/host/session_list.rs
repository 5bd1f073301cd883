//! The host's list of sessions: adding and disposing of them, what each
//! principal sees of them, restoring them from the store, and a chat's
//! stored turns paged back in. [`SessionList`] is what the host lends for
//! it (`Host::session_list`), over its core and its credentials.

use std::path::PathBuf;

use ahp_types::state::SessionSummary;
use serde_json::json;
use tracing::info;

use super::clients::ConnId;
use super::core::{Core, HostState, RootNotice};
use super::credentials::Credentials;
use super::durable::SessionRestoreError;
use super::sessions::NewSession;
use super::subscriptions::not_found;
use crate::auth::Principal;
use crate::protocol::actions::Action;
use crate::protocol::errors::AhpError;
use crate::protocol::uri::{channel_kind, ChannelKind};
use ahp_bridge_jsonrpc::{ErrorCode, RpcError};
use ahp_bridge_store::Store;

/// The host's sessions, lent by `Host::session_list`.
pub struct SessionList<'h> {
    core: &'h Core,
    credentials: &'h Credentials,
}

impl<'h> SessionList<'h> {
    pub(super) fn new(core: &'h Core, credentials: &'h Credentials) -> Self {
        Self { core, credentials }
    }

    /// Adds a session checked by `createSession`: its creator watches it from
    /// the start, the root hears of it, `active` (the creator's own entry)
    /// is set, and the backend is told.
    pub fn add_session(
        &self,
        conn: ConnId,
        new: NewSession,
        active: Option<Action>,
    ) -> Result<(), RpcError> {
        let uri = new.uri.clone();
        {
            let mut st = self.core.lock();
            self.may_add_session(&st, conn, &new.owner)?;
            self.insert_announced(&mut st, new)?;
            let max = self.core.settings().server().max_subscriptions;
            let room = st
                .clients
                .new_subscriptions(conn, &[])
                .is_some_and(|(held, _)| held < max);
            if room {
                st.clients.subscribe(conn, [uri.clone()]);
            }
        }
        self.core.update_active_sessions();
        if let Some(set) = active {
            let _ = self.core.dispatch(&uri, set);
        }
        if let Some(b) = self.core.backend() {
            b.session_created(&uri);
        }
        Ok(())
    }

    /// Adds a session something other than a client started (an SDK app's,
    /// run by the app itself): the root hears of it; the backend is not told
    /// (there is nothing for it to create).
    pub fn add_watched_session(&self, new: NewSession) -> Result<(), RpcError> {
        self.insert_announced(&mut self.core.lock(), new)?;
        self.core.update_active_sessions();
        Ok(())
    }

    /// Inserts `new` under the lock the caller holds, and tells the root's
    /// subscribers who may see it.
    fn insert_announced(&self, st: &mut HostState, new: NewSession) -> Result<(), RpcError> {
        let (uri, owner) = (new.uri.clone(), new.owner.clone());
        if st.sessions.insert(new).is_err() {
            return Err(already_exists(&uri));
        }
        if let Some(summary) = st.sessions.summary(&uri) {
            self.core
                .notify_root(st, &owner, RootNotice::Added(Box::new(summary)));
        }
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
            let mut st = self.core.lock();
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
            self.core.durable().forget(uri);
            // A turn that ran there is over: a revoked connection may be waiting on it.
            self.core.boundary_passed();
            self.core
                .notify_root(&st, &owner, RootNotice::Removed(uri.to_owned()));
        }
        info!(session = %uri, principal = %principal.name, "session disposed");
        self.core.update_active_sessions();
        if let Some(b) = self.core.backend() {
            b.session_disposed(uri);
        }
        Ok(())
    }

    /// The summaries of the sessions `principal` sees, with when each changed.
    pub fn visible_sessions(&self, principal: &Principal) -> Vec<(String, String, SessionSummary)> {
        let st = self.core.lock();
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
        let st = self.core.lock();
        let chat = st.sessions.resolve(chat);
        st.sessions.chats().has(chat) && st.sessions.visible(principal, chat)
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
        let default = self.core.settings().working_directory();
        let st = self.core.lock();
        let channel = st.sessions.resolve(channel);
        st.sessions
            .readable_dirs(principal, channel, default)
            .ok_or_else(|| not_found(format_args!("{channel:?}")))
    }

    /// The sessions `principal` created.
    pub fn sessions_owned_by(&self, principal: &str) -> Vec<String> {
        self.core.lock().sessions.owned_by(principal)
    }

    /// `fetchTurns`: the stored page before `cursor` goes to the chat's
    /// subscribers as `chat/turnsLoaded`, then leaves the host's state
    /// again (see [`super::durable`]).
    pub fn load_turns(&self, chat: &str, cursor: Option<&str>) -> Result<(), RpcError> {
        let mut st = self.core.lock();
        let chat = st.sessions.resolve(chat).to_owned();
        let window = self.core.settings().window();
        let Some(loaded) = self
            .core
            .durable()
            .page(&st.sessions, &chat, cursor, window)?
        else {
            return Ok(());
        };
        let had = st.sessions.chats().chat(&chat).map_or(0, |c| c.turns.len());
        st.sessions
            .apply(&chat, &loaded)
            .map_err(|r| RpcError::new(ErrorCode::InternalError, r.0))?;
        self.core.commit(&mut st, &chat, &loaded, None);
        let now = st.sessions.chats().chat(&chat).map_or(0, |c| c.turns.len());
        st.sessions
            .chats_mut()
            .unload(&chat, now.saturating_sub(had));
        Ok(())
    }

    /// Takes the store: its sessions come back as `ready` (the backend is
    /// told of each with its reference), and `serverSeq` continues above the
    /// ceiling it holds. Call once, before serving. Returns how many
    /// sessions came back.
    pub fn restore_sessions(&self, store: Store) -> Result<usize, SessionRestoreError> {
        let path = store.path().to_owned();
        let restored = {
            let mut st = self.core.lock();
            let st = &mut *st;
            let window = self.core.settings().window();
            let (restored, first_seq) =
                self.core
                    .durable()
                    .restore(store, &mut st.sessions, &mut st.replay, window)?;
            info!(path = %path.display(), sessions = restored.len(), first_seq, "state restored");
            restored
        };
        self.core.update_active_sessions();
        if let Some(b) = self.core.backend() {
            for (uri, backend_ref) in &restored {
                b.session_restored(uri, backend_ref.as_deref());
            }
        }
        Ok(restored.len())
    }
}

fn already_exists(uri: &str) -> RpcError {
    RpcError::new(
        AhpError::SessionAlreadyExists,
        format!("session {uri} already exists"),
    )
}
