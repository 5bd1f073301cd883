//! What the host keeps across restarts, through the store: sessions and
//! their chats written at turn and metadata boundaries, restored as `ready`
//! on start; and `serverSeq` reserved in blocks, so a new instance continues
//! above every number an earlier one issued.
//!
//! Active clients, their grace and subscriptions do not survive: they belong
//! to connections. A turn that was running when the process died is gone
//! (its chat is restored as of its last boundary); a completed one never is.

use std::sync::Arc;

use ahp_types::actions::StateAction;
use ahp_types::state::{ChatState, SessionLifecycle, SessionState};
use tracing::{error, info, warn};

use super::host::Host;
use super::state::{SessionEntry, State};
use crate::store::{Store, StoredChat, StoredSession, SEQ_BLOCK};

/// Whether an applied action ends something worth keeping: a turn, or a
/// change of the session's or chat's metadata. Streamed deltas, tool call
/// progress and the active clients are not.
fn is_boundary(action: &StateAction) -> bool {
    use StateAction as A;
    matches!(
        action,
        A::SessionReady(_)
            | A::SessionCreationFailed(_)
            | A::SessionTitleChanged(_)
            | A::SessionWorkingDirectorySet(_)
            | A::SessionWorkingDirectoryRemoved(_)
            | A::SessionWorkingDirectoryReplaced(_)
            | A::SessionIsReadChanged(_)
            | A::SessionIsArchivedChanged(_)
            | A::SessionConfigChanged(_)
            | A::SessionMetaChanged(_)
            | A::ChatTurnComplete(_)
            | A::ChatTurnCancelled(_)
            | A::ChatError(_)
            | A::ChatTruncated(_)
            | A::ChatIsReadChanged(_)
            | A::ChatIsArchivedChanged(_)
    )
}

impl Host {
    /// Takes the store: its sessions come back as `ready` (the backend is
    /// told of each with its reference), and `serverSeq` continues above the
    /// ceiling it holds. Call once, before serving. Returns how many
    /// sessions came back.
    pub fn restore(self: &Arc<Self>, store: Store) -> anyhow::Result<usize> {
        let stored = store.sessions()?;
        let ceiling = store.seq_ceiling()?;
        let mut restored = Vec::new();
        {
            let mut st = self.lock();
            // Burn the ceiling itself: it may have been issued.
            st.seq = ceiling + 1;
            st.seq_base = st.seq;
            st.seq_ceiling = st.seq + SEQ_BLOCK;
            store.raise_seq_ceiling(st.seq_ceiling)?;
            for s in stored {
                match revive(&s) {
                    Ok((entry, chats)) => {
                        for (uri, chat) in chats {
                            st.chats.insert(uri, (chat, s.uri.clone()));
                        }
                        st.sessions.insert(s.uri.clone(), entry);
                        restored.push((s.uri, s.backend_ref));
                    }
                    Err(e) => {
                        warn!(session = ?s.uri, "stored session not restored (kept in the store): {e}")
                    }
                }
            }
        }
        info!(path = %store.path().display(), sessions = restored.len(), first_seq = ceiling + 2, "state restored");
        if self.store.set(store).is_err() {
            anyhow::bail!("the host already has a store");
        }
        let n = restored.len();
        self.update_active_sessions();
        if let Some(b) = self.backend() {
            for (uri, backend_ref) in restored {
                b.session_restored(&uri, backend_ref.as_deref());
            }
        }
        Ok(n)
    }

    /// The next `serverSeq`, reserving another block in the store first when
    /// this one is used up.
    pub(super) fn next_seq(&self, st: &mut State) -> u64 {
        if st.seq >= st.seq_ceiling {
            if let Some(store) = self.store.get() {
                let ceiling = st.seq + SEQ_BLOCK;
                match store.raise_seq_ceiling(ceiling) {
                    Ok(()) => st.seq_ceiling = ceiling,
                    // Serving goes on; a restart may then reuse numbers above
                    // the stored ceiling, which the log says.
                    Err(e) => error!(seq = st.seq, "serverSeq ceiling not stored: {e:#}"),
                }
            }
        }
        st.seq += 1;
        st.seq
    }

    /// After an applied action: writes its session when the action is a
    /// boundary. Called under the state lock, so writes keep their order.
    pub(super) fn persist_after(&self, st: &mut State, channel: &str, action: &StateAction) {
        if !is_boundary(action) {
            return;
        }
        let Some(session) = st.session_of(channel).map(String::from) else {
            return;
        };
        let now = super::state::now_iso();
        if let Some(e) = st.sessions.get_mut(&session) {
            e.modified_at = now;
        }
        let Some(store) = self.store.get() else {
            return;
        };
        let Some(stored) = snapshot(st, &session) else {
            return;
        };
        if let Err(e) = store.save_session(&stored) {
            error!(session = %session, "session not stored; a restart would lose this change: {e:#}");
        }
    }

    /// Records what the backend needs to find a session again.
    pub fn set_backend_ref(&self, session: &str, backend_ref: &str) {
        let Some(store) = self.store.get() else {
            return;
        };
        // Saved whole: the session may not have reached a boundary yet.
        let st = self.lock();
        let Some(mut stored) = snapshot(&st, session) else {
            return;
        };
        stored.backend_ref = Some(backend_ref.to_owned());
        if let Err(e) = store.save_session(&stored) {
            error!(session = %session, "backend reference not stored: {e:#}");
        }
    }

    /// Forgets a disposed session.
    pub(super) fn forget_stored(&self, session: &str) {
        if let Some(store) = self.store.get() {
            if let Err(e) = store.delete_session(session) {
                error!(session = %session, "disposed session not removed from the store: {e:#}");
            }
        }
    }
}

/// A session as the store keeps it.
fn snapshot(st: &State, session: &str) -> Option<StoredSession> {
    let e = st.sessions.get(session)?;
    // A session has one chat, its default (see `sessions::create_session`).
    let chats = st
        .chats
        .get(&e.chat)
        .and_then(|(c, _)| {
            Some(StoredChat {
                uri: e.chat.clone(),
                state: serde_json::to_value(c).ok()?,
            })
        })
        .into_iter()
        .collect();
    Some(StoredSession {
        uri: session.to_owned(),
        owner: e.owner.clone(),
        created_at: e.created_at.clone(),
        modified_at: e.modified_at.clone(),
        state: serde_json::to_value(&e.state).ok()?,
        backend_ref: None,
        chats,
    })
}

/// A stored session made live again: ready, with no active clients, nothing
/// waiting on a client, no turn running.
fn revive(s: &StoredSession) -> anyhow::Result<(SessionEntry, Vec<(String, ChatState)>)> {
    let mut state: SessionState = serde_json::from_value(s.state.clone())?;
    state.lifecycle = SessionLifecycle::Ready;
    state.active_clients.clear();
    state.input_needed = None;
    let mut chats = Vec::new();
    for c in &s.chats {
        let mut chat: ChatState = serde_json::from_value(c.state.clone())?;
        chat.active_turn = None;
        chat.steering_message = None;
        chats.push((c.uri.clone(), chat));
    }
    let chat = state
        .default_chat
        .clone()
        .map(|u| u.to_string())
        .or_else(|| chats.first().map(|(u, _)| u.clone()))
        .ok_or_else(|| anyhow::anyhow!("the stored session has no chat"))?;
    let entry = SessionEntry {
        state,
        owner: s.owner.clone(),
        chat,
        opt_ins: Default::default(),
        tool_owners: Default::default(),
        created_at: s.created_at.clone(),
        modified_at: s.modified_at.clone(),
    };
    Ok((entry, chats))
}
