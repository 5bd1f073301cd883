//! What the host keeps across restarts, through the store: sessions and
//! their chats written at turn and metadata boundaries, restored as `ready`
//! on start; and `serverSeq` reserved in blocks, so a new instance continues
//! above every number an earlier one issued.
//!
//! A chat's turns older than its window (see [`super::window`]) are kept
//! in the store too, or, in a host without one, in a temporary store of
//! their own: they cost disk, not memory, either way. At a boundary the
//! turns past the window go in the same write as the session; `fetchTurns`
//! and a truncation to a turn outside the window bring stored turns back
//! as `chat/turnsLoaded`, which the host sends; the host's own chat state
//! holds the window only, whatever was loaded for clients.
//!
//! Active clients, their grace and subscriptions do not survive: they belong
//! to connections. A turn that was running when the process died is gone
//! (its chat is restored as of its last boundary); a completed one never is.

use std::sync::OnceLock;

use ahp_types::actions::{ChatTurnsLoadedAction, StateAction};
use ahp_types::state::{ChatState, SessionLifecycle, SessionState, Turn};
use tracing::error;

use super::replay::ReplayBuffer;
use super::sessions::{now_iso, NewSession, Sessions};
use super::window::{self, WindowBounds};
use crate::protocol::actions::Action;
use crate::protocol::errors::AhpError;
use crate::protocol::uri::chat_uri_of;
use ahp_bridge_jsonrpc::{ErrorCode, RpcError};
use ahp_bridge_store::{Store, StoreError, StoredSession, TurnChanges, SEQ_BLOCK};

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
    #[error("its stored turns are not readable: {0}")]
    Turns(#[from] StoreError),
    #[error("the stored session has no chat")]
    NoChat,
}

/// The store, once the host has one; without it sessions live in memory.
#[derive(Default)]
pub(super) struct Durable {
    store: OnceLock<Store>,
    /// Without a store: the temporary one older turns go to, opened at the
    /// first turn to leave a window (`None`: it could not be; turns stay).
    scratch: OnceLock<Option<Store>>,
}

/// The sessions a start restored: each URI with its backend reference.
pub(super) type Restored = Vec<(String, Option<String>)>;

/// A stored session made live again, and what the backend gave it.
struct Revived {
    pub session: NewSession,
    pub backend_ref: Option<String>,
    /// How many of its chat's turns the store keeps beyond its window.
    pub archived: u64,
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
    fn attach(
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
            match revive(&s).and_then(|mut r| {
                r.archived = store.turn_count(&s.uri)?;
                Ok(r)
            }) {
                Ok(r) => revived.push(r),
                Err(e) => {
                    tracing::warn!(session = ?s.uri, "stored session not restored (kept in the store): {e}")
                }
            }
        }
        if self.store.set(store).is_err() {
            return Err(SessionRestoreError::AlreadyAttached);
        }
        Ok((revived, first))
    }

    /// The next `serverSeq`, reserving another block in the store first
    /// when this one is used up.
    pub(super) fn next_seq(&self, replay: &mut ReplayBuffer) -> u64 {
        match replay.next() {
            Ok(seq) => seq,
            Err(last) => match self.store.get() {
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

    /// Writes `session` as it is now, with `turns` (those that left its
    /// window, in the same transaction). Called under the state lock, so
    /// writes keep their order. `false`: `turns` are not stored.
    pub(super) fn save(
        &self,
        sessions: &Sessions,
        session: &str,
        backend_ref: Option<&str>,
        turns: &TurnChanges,
    ) -> bool {
        let Some(store) = self.store.get() else {
            return turns.is_empty() || self.save_scratch(session, turns);
        };
        let Some(mut stored) = sessions.stored(session) else {
            return turns.is_empty();
        };
        stored.backend_ref = backend_ref.map(String::from);
        match store.save_session(&stored, turns) {
            Ok(()) => true,
            Err(e) => {
                error!(session = %session, "session not stored; a restart would lose this change: {e:#}");
                false
            }
        }
    }

    fn save_scratch(&self, session: &str, turns: &TurnChanges) -> bool {
        let Some(scratch) = self.archive() else {
            return false;
        };
        match scratch.change_turns(session, turns) {
            Ok(()) => true,
            Err(e) => {
                error!(session = %session, "older turns not kept in the temporary store; they stay in memory: {e:#}");
                false
            }
        }
    }

    /// Where turns that leave a window go: the store, or without one the
    /// temporary store. `None`: neither, so windows do not shrink.
    fn archive(&self) -> Option<&Store> {
        if let Some(store) = self.store.get() {
            return Some(store);
        }
        self.scratch
            .get_or_init(|| {
                Store::temporary()
                    .inspect_err(|e| error!("no temporary store for older turns; chats keep every turn in memory: {e:#}"))
                    .ok()
            })
            .as_ref()
    }

    /// The stored turns of `session` with ordinals in `from..to`.
    fn turns(&self, session: &str, from: u64, to: u64) -> Result<Vec<String>, StoreError> {
        match self.archive() {
            Some(s) => s.turns(session, from, to),
            None => Ok(Vec::new()),
        }
    }

    /// The ordinal of the newest stored turn of `session` with id `id`.
    fn turn_ordinal(&self, session: &str, id: &str) -> Option<u64> {
        let found = self.archive()?.turn_ordinal(session, id);
        found
            .inspect_err(|e| error!(session = %session, "stored turns not read: {e:#}"))
            .ok()
            .flatten()
    }

    /// A boundary in `channel`'s session: the session marked changed, its
    /// chat's window kept to `bounds`, and the session stored with the
    /// turns that left it (and without those a truncation dropped). A
    /// failed write puts the turns back: nothing is lost.
    pub(super) fn at_boundary(
        &self,
        sessions: &mut Sessions,
        channel: &str,
        action: &StateAction,
        bounds: WindowBounds,
    ) {
        let Some(session) = sessions.session_of(channel).map(String::from) else {
            return;
        };
        sessions.touch(&session, now_iso());
        let Some(chat) = sessions.chat_of(&session).map(String::from) else {
            return;
        };
        let mut changes = TurnChanges::default();
        if let StateAction::ChatTruncated(t) = action {
            if t.turn_id.is_none() {
                sessions.chats_mut().set_archived(&chat, 0);
            }
            // The window starts at the first turn a truncation may drop.
            changes.drop_from = sessions.chats().archived(&chat);
        }
        if self.archive().is_some() {
            changes.append = sessions.chats_mut().evict(&chat, bounds);
        }
        if !self.save(sessions, &session, None, &changes) {
            sessions.chats_mut().put_back(&chat, &changes.append);
        }
    }

    /// `fetchTurns`: the page of stored turns before `cursor` (before the
    /// window without one) as a `chat/turnsLoaded` for the host to apply
    /// and send; `None`: nothing older.
    pub(super) fn page(
        &self,
        sessions: &Sessions,
        chat: &str,
        cursor: Option<&str>,
        bounds: WindowBounds,
    ) -> Result<Option<Action>, RpcError> {
        let (Some(session), Some(archived)) =
            (sessions.session_of(chat), sessions.chats().archived(chat))
        else {
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
            return Ok(None);
        }
        let from = before.saturating_sub(bounds.turns as u64);
        let unreadable = |e: &dyn std::fmt::Display| {
            error!(session = %session, "stored turns not read: {e:#}");
            RpcError::new(
                ErrorCode::InternalError,
                "the chat's older turns could not be read",
            )
        };
        let texts = self
            .turns(session, from, before)
            .map_err(|e| unreadable(&e))?;
        let turns =
            parse_turns(&window::fit_page(texts, bounds.bytes)).map_err(|e| unreadable(&e))?;
        let first = before - turns.len() as u64;
        Ok(Some(loaded(turns, first)))
    }

    /// Before `chat` is truncated by `action` to a turn only the store has:
    /// that turn applied to the state (a `chat/turnsLoaded` of it, which the
    /// truncation then leaves last; the host sends it) and the window
    /// starting at it.
    pub(super) fn load_truncated(
        &self,
        sessions: &mut Sessions,
        chat: &str,
        action: &Action,
    ) -> Option<Action> {
        let StateAction::ChatTruncated(t) = &action.action else {
            return None;
        };
        let id = t.turn_id.as_deref()?;
        let held = sessions
            .chats()
            .chat(chat)?
            .turns
            .iter()
            .any(|t| t.id == id);
        if held || sessions.chats().archived(chat)? == 0 {
            return None;
        }
        let session = sessions.session_of(chat)?.to_owned();
        let k = self.turn_ordinal(&session, id)?;
        let texts = self
            .turns(&session, k, k + 1)
            .inspect_err(
                |e| error!(session = %session, "stored turn not read for a truncation: {e:#}"),
            )
            .ok()?;
        let turn = parse_turns(&texts).ok()?;
        let loaded = loaded(turn, k);
        sessions.apply(chat, &loaded).ok()?;
        sessions.chats_mut().set_archived(chat, k);
        Some(loaded)
    }

    /// Takes `store` at start: its sessions go into `sessions` (a chat
    /// stored whole by an earlier version cut to its window now) and
    /// `replay` continues above its ceiling. Returns each session with its
    /// backend reference, and the first `serverSeq` of this instance.
    pub(super) fn restore(
        &self,
        store: Store,
        sessions: &mut Sessions,
        replay: &mut ReplayBuffer,
        bounds: WindowBounds,
    ) -> Result<(Restored, u64), SessionRestoreError> {
        let (revived, first_seq) = self.attach(store, replay)?;
        let mut restored = Vec::new();
        for r in revived {
            let uri = r.session.uri.clone();
            let chat = r.session.chat.resource.clone();
            if sessions.insert(r.session).is_err() {
                continue;
            }
            sessions.chats_mut().set_archived(&chat, r.archived);
            let changes = TurnChanges {
                drop_from: None,
                append: sessions.chats_mut().evict(&chat, bounds),
            };
            if !changes.is_empty() && !self.save(sessions, &uri, None, &changes) {
                sessions.chats_mut().put_back(&chat, &changes.append);
            }
            restored.push((uri, r.backend_ref));
        }
        Ok((restored, first_seq))
    }

    /// Forgets a disposed session.
    pub(super) fn forget(&self, session: &str) {
        let Some(store) = self
            .store
            .get()
            .or(self.scratch.get().and_then(Option::as_ref))
        else {
            return;
        };
        if let Err(e) = store.delete_session(session) {
            error!(session = %session, "disposed session not removed from the store: {e:#}");
        }
    }
}

/// A stored session made live again: ready, with no active clients, nothing
/// waiting on a client, no turn running.
fn revive(s: &StoredSession) -> Result<Revived, ReviveError> {
    let mut state: SessionState = serde_json::from_str(&s.state)?;
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
    let mut chat: ChatState = serde_json::from_str(&stored_chat.state)?;
    chat.active_turn = None;
    chat.steering_message = None;
    let legacy_chat = rename_chat(&s.uri, &mut state, &mut chat);
    Ok(Revived {
        session: NewSession {
            uri: s.uri.clone(),
            owner: s.owner.clone(),
            // Who created it matters at creation only; a restart re-creates nothing.
            creator: None,
            state,
            chat,
            created_at: s.created_at.clone(),
            modified_at: s.modified_at.clone(),
            legacy_chat,
        },
        backend_ref: s.backend_ref.clone(),
        archived: 0,
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

/// A `chat/turnsLoaded` of `turns`, the first of them the `first`th.
fn loaded(turns: Vec<Turn>, first: u64) -> Action {
    Action::from(StateAction::ChatTurnsLoaded(ChatTurnsLoadedAction {
        turns,
        turns_next_cursor: window::cursor(first),
    }))
}

fn parse_turns(texts: &[String]) -> Result<Vec<Turn>, serde_json::Error> {
    texts.iter().map(|t| serde_json::from_str(t)).collect()
}
