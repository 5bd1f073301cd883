//! AHP's pending messages on the agent side: a queued message starts as the
//! next turn as soon as the chat is idle (after a turn completes or fails, or
//! at once when queued while idle); a steering message is sent into the
//! running turn with `session.send` mode `immediate`, which the runtime
//! injects into its ongoing agent loop; left while idle, it waits for the
//! next turn, as the spec says.

use tracing::info;

use super::session::TurnState;
use super::turn::TurnRequest;
use super::Bridge;
use crate::runtime::wire::{self, method};

impl Bridge {
    /// A client queued a message, or left one to steer the running turn.
    pub(super) fn pending_message_set(&self, uri: &str, chat: &str, steering: bool) {
        if steering {
            self.steer(uri, chat);
        } else {
            self.start_queued_if_idle(uri, chat);
        }
    }

    /// Starts the next queued message of `chat` when its session is idle.
    pub(super) fn start_queued_if_idle(&self, uri: &str, chat: &str) {
        let idle = self
            .sessions()
            .get(uri)
            .is_some_and(|s| matches!(s.turn(), TurnState::Idle { .. }));
        if !idle {
            return;
        }
        let (Some(host), Some(me)) = (self.host(), self.me.upgrade()) else {
            return;
        };
        let Some(next) = host.start_next_queued(chat) else {
            return;
        };
        info!(session = %uri, turn_id = ?next.turn_id, "queued message starts as a turn");
        let turn = TurnRequest {
            chat: chat.to_owned(),
            turn_id: next.turn_id,
            prompt: next.text,
            model: next.model,
        };
        tokio::spawn(me.start_turn(uri.to_owned(), turn));
    }

    /// Sends the steering message of `chat` into its running turn; while no
    /// turn runs, it stays in the state for the next one.
    pub(super) fn steer(&self, uri: &str, chat: &str) {
        let running = self.sessions().get_mut(uri).and_then(|s| {
            let slot = s.slot;
            let runtime_id = s.runtime_id.clone();
            s.running()
                .filter(|t| t.chat == chat)
                .map(|_| (slot, runtime_id))
        });
        let Some((slot, runtime_id)) = running else {
            return;
        };
        let Some(text) = self.host().and_then(|h| h.take_steering(chat)) else {
            return;
        };
        info!(session = %uri, "steering message sent into the running turn");
        let params = wire::steer_params(&runtime_id, &text);
        self.spawn_call_on(slot, method::SESSION_SEND, params);
    }
}
