//! The bridge as the host's backend: what each client phase of a session
//! sets going (a turn, a cancel, a confirmation, a client joining or
//! leaving with its plugins), a session's creation, restore and disposal.

use super::sdk;
use super::turn::TurnRequest;
use super::Bridge;
use crate::ahp::{Backend, ClientPhase};
use crate::runtime::{SessionDestroy, SessionRef};

impl Backend for Bridge {
    fn session_created(&self, session: &str) {
        if let Some(me) = self.me.upgrade() {
            tokio::spawn(super::runtime_side::create(me, session.to_owned()));
        }
    }

    fn session_restored(&self, session: &str, backend_ref: Option<&str>) {
        // A reference is stored once the runtime has the session on disk
        // (after its first message): then it is resumed, history and all.
        let runtime_id = backend_ref
            .map(String::from)
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        self.sessions
            .place(session, runtime_id, backend_ref.is_some(), self.pool.size());
        if let Some(me) = self.me.upgrade() {
            let uri = session.to_owned();
            tokio::spawn(async move { me.customizing.publish(&uri).await });
        }
    }

    fn authenticated(&self, principal: &str) {
        super::runtime_side::hand_credentials(self, principal);
    }

    fn session_disposed(&self, session: &str) {
        self.customizing.session_gone(session);
        if let (Some(gate), Some(_)) = (self.stop.gate(), sdk::mirror::session_of(session)) {
            // An SDK app's session: the app is told (its queue may wait).
            let (gate, uri) = (gate.clone(), session.to_owned());
            tokio::spawn(async move { gate.disposed(&uri).await });
            return;
        }
        let Some(s) = self.sessions.remove(session) else {
            return;
        };
        if s.placement().is_bound() {
            let (slot, params) = (
                s.placement().slot(),
                SessionRef::new(s.placement().runtime_id()),
            );
            let me = self.me.clone();
            tokio::spawn(async move {
                if let Some(b) = me.upgrade() {
                    b.call_runtime::<SessionDestroy>(slot, params).await;
                }
            });
        }
    }

    fn phase(&self, session: &str, phase: ClientPhase) {
        match phase {
            ClientPhase::TurnStarted {
                chat,
                turn_id,
                text,
                model,
                agent,
                by,
            } => {
                if let Some(me) = self.me.upgrade() {
                    let turn = TurnRequest {
                        chat,
                        turn_id,
                        prompt: text,
                        model,
                        agent,
                        by: Some(by),
                    };
                    tokio::spawn(me.start_turn(session.to_owned(), turn));
                }
            }
            ClientPhase::PendingMessageSet { chat, steering } => {
                if steering {
                    self.steer(session, &chat)
                } else {
                    self.start_queued_if_idle(session, &chat)
                }
            }
            ClientPhase::TurnCancelled { .. } => {
                self.change(session, |s, fx| s.cancel("the turn was cancelled", fx))
            }
            ClientPhase::ToolCallConfirmed {
                tool_call_id,
                approved,
            } => self.change(session, |s, fx| {
                s.tool_call_confirmed(&tool_call_id, approved, fx)
            }),
            ClientPhase::ToolCallCompleted {
                tool_call_id,
                result,
            } => self.change(session, |s, fx| {
                s.client_tool_completed(&tool_call_id, &result, fx)
            }),
            ClientPhase::InputCompleted(completed) => {
                self.sessions
                    .with(session, |s| s.input_completed(&completed));
            }
            ClientPhase::ActiveClientRemoved { client_id } => {
                self.customizing.client_left(session, &client_id);
                // Its in-flight tool calls fail now, in AHP and towards the runtime.
                const WHY: &str = "the client that provides this tool left";
                let gone = |_: &str, _: &str, owner: &str| owner == client_id;
                self.change(session, |s, fx| {
                    s.fail_client_tools(gone, WHY, "client gone", fx);
                })
            }
            ClientPhase::ActiveClientSet { client_id } => {
                self.customizing.client_set(session, &client_id)
            }
            // The model, this runtime's one setting, is read at each turn.
            ClientPhase::ConfigChanged(_) => {}
        }
    }
}
