//! Pending messages, consumed as the chat channel's spec says: a queued
//! message becomes the next turn when the chat is idle
//! (`chat/pendingMessageRemoved`, then `chat/turnStarted` with its
//! `queuedMessageId`, under one lock so two consumers cannot both take it);
//! a steering message is taken out when the agent injects it.
//! Reordering and removal are the reducers' (`queuedMessagesReordered`,
//! `pendingMessageRemoved`): consumption always reads the state as it is.

use ahp_types::actions::StateAction;
use ahp_types::state::PendingMessage;
use serde_json::{json, Value};

use super::host::{Host, Origin};
use super::state::{now_iso, State};

/// A turn the host started from the queue, for the agent to run.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedTurn {
    pub turn_id: String,
    pub text: String,
    pub model: Option<String>,
}

impl Host {
    /// Starts the first queued message of `chat` as a turn, if the chat has
    /// no active turn; `None` otherwise (or when nothing is queued).
    pub fn start_next_queued(&self, chat: &str) -> Option<QueuedTurn> {
        let mut st = self.lock();
        let (c, _) = st.chats.get(chat)?;
        if c.active_turn.is_some() {
            return None;
        }
        let q: PendingMessage = c.queued_messages.as_ref()?.first()?.clone();
        let turn_id = uuid::Uuid::new_v4().to_string();
        let removed = json!({"type": "chat/pendingMessageRemoved", "kind": "queued", "id": q.id});
        let started = json!({"type": "chat/turnStarted", "turnId": turn_id, "startedAt": now_iso(),
            "message": q.message, "queuedMessageId": q.id});
        self.apply_all(&mut st, chat, [removed, started])?;
        Some(QueuedTurn {
            turn_id,
            text: q.message.text.clone(),
            model: q.message.model.as_ref().map(|m| m.id.clone()),
        })
    }

    /// Takes the steering message of `chat` out of the state; its text.
    pub fn take_steering(&self, chat: &str) -> Option<String> {
        let mut st = self.lock();
        let (c, _) = st.chats.get(chat)?;
        let m: PendingMessage = c.steering_message.clone()?;
        let removed = json!({"type": "chat/pendingMessageRemoved", "kind": "steering", "id": m.id});
        self.apply_all(&mut st, chat, [removed])?;
        Some(m.message.text)
    }

    /// Applies and broadcasts host actions on one channel, in order,
    /// stopping at the first the reducer refuses (the caller checked what
    /// makes them apply); the caller holds the lock throughout.
    fn apply_all<const N: usize>(
        &self,
        st: &mut State,
        channel: &str,
        actions: [Value; N],
    ) -> Option<()> {
        for a in actions {
            let typed: StateAction = serde_json::from_value(a.clone()).ok()?;
            if let Err(e) = st.apply(channel, &typed, &a) {
                tracing::warn!(channel, action = %a["type"], "pending message not consumed: {e}");
                return None;
            }
            self.commit(st, channel, &a, &typed, Origin::Host);
        }
        Some(())
    }
}
