//! The chats of the host's sessions, each with its typed state, its
//! session, the client that started its running turn, and how many of its
//! turns only the store keeps (see [`super::window`]). Owned by
//! [`super::sessions::Sessions`], which adds and removes a chat with its
//! session and applies the official reducer; the turns' window and what
//! runs in a chat are read and changed here.

use std::collections::HashMap;

use ahp_types::state::{ChatState, PendingMessage, ToolCallContributor, ToolCallState};

use super::window::{self, WindowBounds};
use ahp_bridge_store::StoredTurn;

#[derive(Default)]
pub(super) struct Chats {
    /// chat URI -> its state and its session's URI.
    entries: HashMap<String, ChatEntry>,
}

struct ChatEntry {
    state: ChatState,
    session: String,
    /// The turn a client started here, and that client: (turn id, client id).
    started_by: Option<(String, String)>,
    /// How many of its turns are kept in the store only, all older than
    /// `state.turns`: the ordinal of `state.turns[0]` (see [`window`]).
    archived: u64,
}

impl Chats {
    pub(super) fn insert(&mut self, uri: String, state: ChatState, session: String) {
        let entry = ChatEntry {
            state,
            session,
            started_by: None,
            archived: 0,
        };
        self.entries.insert(uri, entry);
    }

    pub(super) fn remove(&mut self, chat: &str) {
        self.entries.remove(chat);
    }

    /// The session `chat` belongs to.
    pub(super) fn session_of(&self, chat: &str) -> Option<&str> {
        self.entries.get(chat).map(|c| c.session.as_str())
    }

    pub(super) fn state_mut(&mut self, chat: &str) -> Option<&mut ChatState> {
        self.entries.get_mut(chat).map(|c| &mut c.state)
    }

    /// The sessions whose chat has a turn running, and whether `client_id`
    /// started that turn.
    pub(super) fn running<'a>(
        &'a self,
        client_id: &'a str,
    ) -> impl Iterator<Item = (&'a str, bool)> + 'a {
        self.entries.values().filter_map(move |c| {
            let turn = c.state.active_turn.as_ref()?;
            let started = c
                .started_by
                .as_ref()
                .is_some_and(|(t, by)| *t == turn.id && *by == client_id);
            Some((c.session.as_str(), started))
        })
    }

    /// `client_id` started turn `turn_id` in `chat`.
    pub(super) fn started(&mut self, chat: &str, turn_id: &str, client_id: &str) {
        if let Some(c) = self.entries.get_mut(chat) {
            c.started_by = Some((turn_id.to_owned(), client_id.to_owned()));
        }
    }

    pub(super) fn chat(&self, chat: &str) -> Option<&ChatState> {
        self.entries.get(chat).map(|c| &c.state)
    }

    /// How many of `chat`'s turns are in the store only (see [`ChatEntry`]).
    pub(super) fn archived(&self, chat: &str) -> Option<u64> {
        self.entries.get(chat).map(|c| c.archived)
    }

    /// The window of `chat` starts at its `first`th turn: the cursor says so.
    pub(super) fn set_archived(&mut self, chat: &str, first: u64) {
        if let Some(c) = self.entries.get_mut(chat) {
            c.archived = first;
            c.state.turns_next_cursor = window::cursor(first);
        }
    }

    /// Takes `chat`'s turns past `bounds` out of its state; returns them
    /// numbered for the store, oldest first.
    pub(super) fn evict(&mut self, chat: &str, bounds: WindowBounds) -> Vec<StoredTurn> {
        let Some(c) = self.entries.get_mut(chat) else {
            return Vec::new();
        };
        let gone = window::split_oldest(&mut c.state.turns, bounds);
        let first = c.archived;
        let out: Vec<StoredTurn> = gone
            .into_iter()
            .zip(first..)
            .map(|((t, text), ordinal)| StoredTurn {
                ordinal,
                id: t.id,
                text,
            })
            .collect();
        if !out.is_empty() {
            self.set_archived(chat, first + out.len() as u64);
        }
        out
    }

    /// Turns that [`Chats::evict`] took whose store write failed come
    /// back into the state, so nothing is lost.
    pub(super) fn put_back(&mut self, chat: &str, turns: &[StoredTurn]) {
        let Some(c) = self.entries.get_mut(chat) else {
            return;
        };
        let mut back: Vec<_> = turns
            .iter()
            .filter_map(|t| serde_json::from_str(&t.text).ok())
            .collect();
        back.append(&mut c.state.turns);
        c.state.turns = back;
        let first = c.archived.saturating_sub(turns.len() as u64);
        self.set_archived(chat, first);
    }

    /// The `loaded` turns a `chat/turnsLoaded` put ahead of `chat`'s window
    /// leave the state again (the store has them; the clients that asked
    /// have them now), and the cursor is the window's again.
    pub(super) fn unload(&mut self, chat: &str, loaded: usize) {
        if let Some(c) = self.entries.get_mut(chat) {
            c.state.turns.drain(..loaded.min(c.state.turns.len()));
            c.state.turns_next_cursor = window::cursor(c.archived);
        }
    }

    /// The client that contributed tool call `tool_call_id` in `chat`'s
    /// running turn, if a client did.
    pub(super) fn tool_call_owner(&self, chat: &str, tool_call_id: &str) -> Option<&str> {
        match contributor(self.tool_call(chat, tool_call_id)?.1)? {
            ToolCallContributor::Client(c) => Some(c.client_id.as_str()),
            _ => None,
        }
    }

    /// The running turn's id and its tool call `tool_call_id`, in `chat`.
    pub(super) fn tool_call(
        &self,
        chat: &str,
        tool_call_id: &str,
    ) -> Option<(&str, &ToolCallState)> {
        let turn = self.chat(chat)?.active_turn.as_ref()?;
        let call = turn.response_parts.iter().find_map(|p| match p {
            ahp_types::state::ResponsePart::ToolCall(t) => {
                (call_id(&t.tool_call) == Some(tool_call_id)).then_some(&t.tool_call)
            }
            _ => None,
        })?;
        Some((turn.id.as_str(), call))
    }

    /// The first queued message of `chat`, if it has no turn running.
    pub(super) fn next_queued(&self, chat: &str) -> Option<&PendingMessage> {
        let c = self.chat(chat)?;
        if c.active_turn.is_some() {
            return None;
        }
        c.queued_messages.as_ref()?.first()
    }

    pub(super) fn has(&self, chat: &str) -> bool {
        self.entries.contains_key(chat)
    }
}

fn call_id(t: &ToolCallState) -> Option<&str> {
    use ToolCallState as T;
    Some(match t {
        T::Streaming(s) => &s.tool_call_id,
        T::PendingConfirmation(s) => &s.tool_call_id,
        T::Running(s) => &s.tool_call_id,
        T::AuthRequired(s) => &s.tool_call_id,
        T::PendingResultConfirmation(s) => &s.tool_call_id,
        T::Completed(s) => &s.tool_call_id,
        T::Cancelled(s) => &s.tool_call_id,
        T::Unknown(_) => return None,
    })
}

fn contributor(t: &ToolCallState) -> Option<&ToolCallContributor> {
    use ToolCallState as T;
    match t {
        T::Streaming(s) => s.contributor.as_ref(),
        T::PendingConfirmation(s) => s.contributor.as_ref(),
        T::Running(s) => s.contributor.as_ref(),
        T::AuthRequired(s) => s.contributor.as_ref(),
        T::PendingResultConfirmation(s) => s.contributor.as_ref(),
        T::Completed(s) => s.contributor.as_ref(),
        T::Cancelled(s) => s.contributor.as_ref(),
        T::Unknown(_) => None,
    }
}
