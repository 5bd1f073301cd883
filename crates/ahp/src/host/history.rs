//! What the host keeps of its sessions over time: the store taken at start
//! (sessions back as `ready`), each session written at its boundaries, and
//! each chat's window of turns ([`super::window`]): at a boundary the turns
//! past it go to the store in the same write, `fetchTurns` brings a page of
//! them back to the chat's subscribers as `chat/turnsLoaded`, and a
//! truncation to a turn outside the window loads that turn first, as the
//! spec asks of an operation that references one.
//!
//! The host's own chat state holds the window only, whatever was loaded for
//! clients: its memory does not grow with a chat's length.

use ahp_types::actions::{ChatTurnsLoadedAction, StateAction};
use ahp_types::state::Turn;
use tracing::{error, info};

use super::durable::SessionRestoreError;
use super::sessions::now_iso;
use super::window::{self, Bounds};
use super::{Host, HostState};
use crate::protocol::actions::{Action, Rejection};
use crate::protocol::errors::AhpError;
use ahp_bridge_base::jsonrpc::{ErrorCode, RpcError};
use ahp_bridge_base::store::{Store, TurnChanges};

impl Host {
    fn window(&self) -> Bounds {
        let server = self.settings.server();
        Bounds {
            turns: server.turn_window,
            bytes: server.turn_window_bytes,
        }
    }

    /// Applies an action with the official reducer, a truncation's turn
    /// loaded into the window first when only the store has it.
    pub(super) fn apply(
        &self,
        st: &mut HostState,
        channel: &str,
        action: &Action,
    ) -> Result<(), Rejection> {
        if let StateAction::ChatTruncated(t) = &action.action {
            if let Some(id) = &t.turn_id {
                self.load_truncated(st, channel, id);
            }
        }
        st.sessions.apply(channel, action)
    }

    /// A boundary in `channel`'s session: its window kept to its bounds and
    /// the session stored with the turns that left it (and without those
    /// a truncation dropped).
    pub(super) fn at_boundary(&self, st: &mut HostState, channel: &str, action: &StateAction) {
        let Some(session) = st.sessions.session_of(channel).map(String::from) else {
            return;
        };
        st.sessions.touch(&session, now_iso());
        let chat = st.sessions.chat_of(&session).map(String::from);
        let mut changes = TurnChanges::default();
        if let (StateAction::ChatTruncated(t), Some(chat)) = (action, &chat) {
            if t.turn_id.is_none() {
                st.sessions.set_archived(chat, 0);
            }
            // The window starts at the first turn a truncation may drop.
            changes.drop_from = st.sessions.archived(chat);
        }
        if let (Some(chat), Some(_)) = (&chat, self.durable.archive()) {
            changes.append = st.sessions.evict(chat, self.window());
        }
        if !self.durable.save(&st.sessions, &session, None, &changes) {
            if let Some(chat) = &chat {
                st.sessions.put_back(chat, &changes.append);
            }
        }
    }

    /// `fetchTurns`: the page of stored turns before `cursor` (before the
    /// window without one) goes to the chat's subscribers in a
    /// `chat/turnsLoaded`, then leaves the host's state again. Nothing
    /// older: nothing is sent.
    pub fn load_turns(&self, chat: &str, cursor: Option<&str>) -> Result<(), RpcError> {
        let bounds = self.window();
        let mut st = self.lock();
        let chat = st.sessions.resolve(chat).to_owned();
        let (Some(session), Some(archived)) = (
            st.sessions.session_of(&chat).map(String::from),
            st.sessions.archived(&chat),
        ) else {
            return Err(RpcError::new(
                AhpError::SessionNotFound,
                format!("no chat {chat:?}"),
            ));
        };
        let before = match cursor {
            None => archived,
            Some(c) => window::parse_cursor(c).ok_or_else(|| {
                RpcError::new(
                    ErrorCode::InvalidParams,
                    "unrecognised `cursor`: pass back a `turnsNextCursor` of this chat's state",
                )
            })?,
        }
        // A cursor from before a truncation may name turns gone since.
        .min(archived);
        if before == 0 {
            return Ok(());
        }
        let from = before.saturating_sub(bounds.turns as u64);
        let texts = self
            .durable
            .turns(&session, from, before)
            .map_err(|e| internal(&session, &e))?;
        let texts = window::fit_page(texts, bounds.bytes);
        let turns = texts
            .iter()
            .map(|t| serde_json::from_str::<Turn>(t))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| internal(&session, &e))?;
        let first = before - turns.len() as u64;
        let loaded = Action::from(StateAction::ChatTurnsLoaded(ChatTurnsLoadedAction {
            turns,
            turns_next_cursor: window::cursor(first),
        }));
        let had = st.sessions.chat(&chat).map_or(0, |c| c.turns.len());
        st.sessions
            .apply(&chat, &loaded)
            .map_err(|r| RpcError::new(ErrorCode::InternalError, r.0))?;
        self.commit(&mut st, &chat, &loaded, None);
        let now = st.sessions.chat(&chat).map_or(0, |c| c.turns.len());
        st.sessions.unload(&chat, now.saturating_sub(had));
        Ok(())
    }

    /// Before `chat` is truncated to turn `id`: if only the store has it, it
    /// comes back into the state (a `chat/turnsLoaded` of that one turn,
    /// which the truncation then leaves last) and the window starts at it.
    fn load_truncated(&self, st: &mut HostState, chat: &str, id: &str) {
        let Some(c) = st.sessions.chat(chat) else {
            return;
        };
        if c.turns.iter().any(|t| t.id == id) || st.sessions.archived(chat) == Some(0) {
            return;
        }
        let Some(session) = st.sessions.session_of(chat).map(String::from) else {
            return;
        };
        let Some(k) = self.durable.turn_ordinal(&session, id) else {
            return;
        };
        let turn = match self.durable.turns(&session, k, k + 1) {
            Ok(t) => t.first().and_then(|t| serde_json::from_str::<Turn>(t).ok()),
            Err(e) => {
                error!(session = %session, "stored turn not read for a truncation: {e:#}");
                None
            }
        };
        let Some(turn) = turn else { return };
        let loaded = Action::from(StateAction::ChatTurnsLoaded(ChatTurnsLoadedAction {
            turns: vec![turn],
            turns_next_cursor: window::cursor(k),
        }));
        if st.sessions.apply(chat, &loaded).is_ok() {
            self.commit(st, chat, &loaded, None);
            st.sessions.set_archived(chat, k);
        }
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
    /// sessions came back. A chat stored whole by an earlier version is cut
    /// to its window, its older turns moved to the store, now.
    pub fn restore_sessions(&self, store: Store) -> Result<usize, SessionRestoreError> {
        let path = store.path().to_owned();
        let mut restored = Vec::new();
        {
            let mut st = self.lock();
            let (revived, first_seq) = self.durable.attach(store, &mut st.replay)?;
            for r in revived {
                let uri = r.session.uri.clone();
                let chat = r.session.chat.resource.clone();
                if st.sessions.insert(r.session).is_ok() {
                    st.sessions.set_archived(&chat, r.archived);
                    let changes = TurnChanges {
                        drop_from: None,
                        append: st.sessions.evict(&chat, self.window()),
                    };
                    if !changes.is_empty() && !self.durable.save(&st.sessions, &uri, None, &changes)
                    {
                        st.sessions.put_back(&chat, &changes.append);
                    }
                    restored.push((uri, r.backend_ref));
                }
            }
            info!(path = %path.display(), sessions = restored.len(), first_seq, "state restored");
        }
        self.update_active_sessions();
        if let Some(b) = self.backend() {
            for (uri, backend_ref) in &restored {
                b.session_restored(uri, backend_ref.as_deref());
            }
        }
        Ok(restored.len())
    }
}

fn internal(session: &str, e: &dyn std::fmt::Display) -> RpcError {
    error!(session = %session, "stored turns not read: {e:#}");
    RpcError::new(
        ErrorCode::InternalError,
        "the chat's older turns could not be read",
    )
}
