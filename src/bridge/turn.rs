//! A turn's life: started by a client, sent to the runtime, fed by the
//! runtime's events, ended by `session.idle`, `session.error`, a cancel, a
//! failed send or a lost runtime; each end goes through
//! [`BridgedSession::end_turn`], so nothing the turn waited on is left behind.

use std::sync::Arc;

use tracing::{debug, warn};

use super::session::{TurnState, DRAIN_LIMIT};
use super::Bridge;
use crate::runtime::wire::{self, method, RuntimeEvent};

/// A turn to run: started by a client, or by the host from the queue.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    pub chat: String,
    pub turn_id: String,
    pub prompt: String,
    /// The model the message chose, if any: the session switches to it.
    pub model: Option<String>,
}

impl Bridge {
    pub(super) async fn start_turn(self: Arc<Self>, uri: String, turn: TurnRequest) {
        let TurnRequest {
            chat,
            turn_id,
            prompt,
            model,
        } = turn;
        let Some((gate, mut idle)) = self
            .sessions()
            .get(&uri)
            .map(|s| (s.gate.clone(), s.idle_watch()))
        else {
            return;
        };
        let _g = gate.lock().await;
        // A cancelled turn's tail (its session.idle) must not end this one.
        if tokio::time::timeout(DRAIN_LIMIT, idle.wait_for(|is_idle| *is_idle))
            .await
            .is_err()
        {
            warn!(session = %uri, "the runtime did not go idle after a cancel within {DRAIN_LIMIT:?}; sending anyway");
        }
        match self.sessions().get_mut(&uri) {
            Some(s) => {
                s.begin(&turn_id, &chat);
                // Not bound yet: bind with the message's model, no switch.
                if s.bound.is_none() && model.is_some() {
                    s.model = model.clone();
                }
            }
            None => return,
        }
        let sent = async {
            let (conn, runtime_id) = self.ensure_bound(&uri).await?;
            self.switch_model(&conn, &uri, &runtime_id, model.as_deref())
                .await?;
            conn.call(
                method::SESSION_SEND,
                wire::send_params(&runtime_id, &prompt),
            )
            .await
            .map_err(|e| anyhow::anyhow!("session.send: {e}"))?;
            // From its first message on, the runtime keeps the session on
            // disk: from now on a restart resumes it, so the host stores it.
            let first = self
                .sessions()
                .get_mut(&uri)
                .is_some_and(|s| !std::mem::replace(&mut s.persisted, true));
            if first {
                if let Some(h) = self.host() {
                    h.set_backend_ref(&uri, &runtime_id);
                }
            }
            anyhow::Ok(())
        }
        .await;
        if let Err(e) = sent {
            warn!(session = %uri, "turn not started: {e:#}");
            self.end_turn_with_error(&uri, "runtime", &format!("{e:#}"));
        }
    }

    fn end_turn_with_error(&self, uri: &str, kind: &str, message: &str) {
        let Some(e) = self
            .sessions()
            .get_mut(uri)
            .map(|s| s.end_turn(TurnState::Idle { stale_idle: false }))
        else {
            return;
        };
        let chat = e
            .turn
            .map(|t| t.fail(kind, message))
            .map(|(chat, actions)| {
                self.emit(&chat, actions);
                chat
            });
        self.emit(uri, e.removals);
        if let Some(chat) = chat {
            self.start_queued_if_idle(uri, &chat);
        }
    }

    /// A client cancelled the turn: nothing more is mapped into it; what the
    /// runtime waits on is answered (denied, failed), then the runtime aborts.
    pub(super) fn cancel_turn(&self, uri: &str) {
        const WHY: &str = "the turn was cancelled";
        let Some((slot, calls, e)) = self.sessions().get_mut(uri).and_then(|s| {
            matches!(s.turn(), TurnState::Running(_)).then(|| {
                let e = s.end_turn(TurnState::Draining);
                (s.slot, e.runtime_answers(&s.runtime_id, WHY), e)
            })
        }) else {
            return;
        };
        self.emit(uri, e.removals);
        let Some(me) = self.me.upgrade() else { return };
        tokio::spawn(async move {
            for (m, params) in calls {
                me.call_runtime_on(slot, m, params).await;
            }
        });
    }

    /// A runtime event that belongs to the turn (not a tool or permission
    /// call-back): mapped into the chat, and the turn ended by idle or error.
    pub(super) fn turn_event(&self, uri: &str, event: &RuntimeEvent) {
        let out = {
            let mut sessions = self.sessions();
            let Some(s) = sessions.get_mut(uri) else {
                return;
            };
            if s.running().is_none() {
                // Draining or idle: the runtime's idle is all that matters now.
                if *event == RuntimeEvent::Idle {
                    s.set_turn(TurnState::Idle { stale_idle: false });
                } else if matches!(s.turn(), TurnState::Idle { .. }) {
                    debug!(session = %uri, "runtime event outside a turn");
                }
                return;
            }
            let t = s.running().expect("checked above");
            if *event == RuntimeEvent::Idle && t.stale_idle && !t.taken {
                // The failed turn's idle, late: this turn has not begun yet.
                t.stale_idle = false;
                return;
            }
            // Events the bridge does not act on (`assistant.idle`, ...) may
            // still be the failed turn's; only this turn's content counts.
            if !matches!(event, RuntimeEvent::Other(_)) {
                t.taken = true;
            }
            let actions = t.mapper.map(event, t.elapsed_ms());
            let chat = t.chat.clone();
            let ended = t.mapper.ended;
            let removals = if ended {
                // An error ends the runtime's work on the message too; its
                // idle may still follow, and must not end the next turn.
                let stale_idle = matches!(event, RuntimeEvent::Error { .. });
                s.end_turn(TurnState::Idle { stale_idle }).removals
            } else {
                Vec::new()
            };
            (chat, actions, removals, ended)
        };
        let (chat, actions, removals, ended) = out;
        self.emit(&chat, actions);
        self.emit(uri, removals);
        if ended {
            self.start_queued_if_idle(uri, &chat);
        }
    }
}
