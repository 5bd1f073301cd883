//! What the host keeps across restarts, through the store: sessions and
//! their chats written at turn and metadata boundaries, restored as `ready`
//! on start; and `serverSeq` reserved in blocks, so a new instance continues
//! above every number an earlier one issued.
//!
//! Active clients, their grace and subscriptions do not survive: they belong
//! to connections. A turn that was running when the process died is gone
//! (its chat is restored as of its last boundary); a completed one never is.

use std::sync::OnceLock;

use ahp_types::actions::StateAction;
use ahp_types::state::{ChatState, SessionLifecycle, SessionState};
use tracing::error;

use super::replay::ReplayBuffer;
use super::sessions::{NewSession, Sessions};
use crate::protocol::uri::chat_uri_of;
use ahp_bridge_base::store::{Store, StoreError, StoredSession, SEQ_BLOCK};

/// Why the store's sessions could not be taken at start.
#[derive(Debug, thiserror::Error)]
pub enum SessionRestoreError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the host already has a store")]
    AlreadyAttached,
}

/// Why one stored session is not made live again (it stays in the store).
#[derive(Debug, thiserror::Error)]
enum ReviveError {
    #[error("its stored state does not parse: {0}")]
    State(#[from] serde_json::Error),
    #[error("the stored session has no chat")]
    NoChat,
}

/// The store, once the host has one; without it sessions live in memory.
#[derive(Default)]
pub(super) struct Durable(OnceLock<Store>);

/// A stored session made live again, and what the backend gave it.
pub(super) struct Revived {
    pub session: NewSession,
    pub backend_ref: Option<String>,
}

/// Whether an applied action ends something worth keeping: a turn, or a
/// change of the session's or chat's metadata. Streamed deltas, tool call
/// progress and the active clients are not.
pub(super) fn is_boundary(action: &StateAction) -> bool {
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

impl Durable {
    /// Takes `store`: the sessions it holds come back, and `replay` continues
    /// above its ceiling (reserving the next block). Returns the sessions
    /// and the first `serverSeq` of this instance.
    pub(super) fn attach(
        &self,
        store: Store,
        replay: &mut ReplayBuffer,
    ) -> Result<(Vec<Revived>, u64), SessionRestoreError> {
        let stored = store.sessions()?;
        let first = replay.continue_above(store.seq_ceiling()?);
        let ceiling = replay.current() + SEQ_BLOCK;
        store.raise_seq_ceiling(ceiling)?;
        replay.reserved(ceiling);
        let mut revived = Vec::new();
        for s in stored {
            match revive(&s) {
                Ok(r) => revived.push(r),
                Err(e) => {
                    tracing::warn!(session = ?s.uri, "stored session not restored (kept in the store): {e}")
                }
            }
        }
        if self.0.set(store).is_err() {
            return Err(SessionRestoreError::AlreadyAttached);
        }
        Ok((revived, first))
    }

    /// The next `serverSeq`, reserving another block in the store first
    /// when this one is used up.
    pub(super) fn next_seq(&self, replay: &mut ReplayBuffer) -> u64 {
        match replay.next() {
            Ok(seq) => seq,
            Err(last) => match self.0.get() {
                Some(store) => match store.raise_seq_ceiling(last + SEQ_BLOCK) {
                    Ok(()) => {
                        replay.reserved(last + SEQ_BLOCK);
                        replay.next_unreserved()
                    }
                    // Serving goes on; a restart may then reuse numbers above
                    // the stored ceiling, which the log says.
                    Err(e) => {
                        error!(seq = last, "serverSeq ceiling not stored: {e:#}");
                        replay.next_unreserved()
                    }
                },
                None => replay.next_unreserved(),
            },
        }
    }

    /// Writes `session` as it is now. Called under the state lock, so
    /// writes keep their order.
    pub(super) fn save(&self, sessions: &Sessions, session: &str, backend_ref: Option<&str>) {
        let (Some(store), Some(mut stored)) = (self.0.get(), sessions.stored(session)) else {
            return;
        };
        stored.backend_ref = backend_ref.map(String::from);
        if let Err(e) = store.save_session(&stored) {
            error!(session = %session, "session not stored; a restart would lose this change: {e:#}");
        }
    }

    /// Forgets a disposed session.
    pub(super) fn forget(&self, session: &str) {
        if let Some(store) = self.0.get() {
            if let Err(e) = store.delete_session(session) {
                error!(session = %session, "disposed session not removed from the store: {e:#}");
            }
        }
    }
}

/// A stored session made live again: ready, with no active clients, nothing
/// waiting on a client, no turn running.
fn revive(s: &StoredSession) -> Result<Revived, ReviveError> {
    let mut state: SessionState = serde_json::from_value(s.state.clone())?;
    state.lifecycle = SessionLifecycle::Ready;
    state.active_clients.clear();
    state.input_needed = None;
    let default = state.default_chat.clone();
    let stored_chat = s
        .chats
        .iter()
        .find(|c| Some(&c.uri) == default.as_ref())
        .or_else(|| s.chats.first())
        .ok_or(ReviveError::NoChat)?;
    let mut chat: ChatState = serde_json::from_value(stored_chat.state.clone())?;
    chat.active_turn = None;
    chat.steering_message = None;
    let legacy_chat = rename_chat(&s.uri, &mut state, &mut chat);
    Ok(Revived {
        session: NewSession {
            uri: s.uri.clone(),
            owner: s.owner.clone(),
            state,
            chat,
            created_at: s.created_at.clone(),
            modified_at: s.modified_at.clone(),
            legacy_chat,
        },
        backend_ref: s.backend_ref.clone(),
    })
}

/// A session stored by an earlier version has its chat under the URI that
/// version gave it: the chat takes the URI clients derive today, and the
/// old one is returned, to be answered to as well.
fn rename_chat(session: &str, state: &mut SessionState, chat: &mut ChatState) -> Option<String> {
    let now = chat_uri_of(session);
    if chat.resource == now {
        return None;
    }
    let old = std::mem::replace(&mut chat.resource, now.clone());
    if state.default_chat.as_deref() == Some(old.as_str()) {
        state.default_chat = Some(now.clone());
    }
    for c in state.chats.iter_mut().filter(|c| c.resource == old) {
        c.resource = now.clone();
    }
    Some(old)
}
