//! What the bridge keeps per AHP session: where it lives on the runtime
//! ([`Placement`]: its runtime session, the binding, the model), and the turn's life as one explicit state ([`TurnState`]).
//! Fields are private: the bridge changes a session only through these
//! methods, which return the [`Effects`] each change asks for.

use std::sync::Arc;
use std::time::Duration;

use ahp_types::actions::ChatInputCompletedAction;
use ahp_types::state::ToolCallResult;
use serde_json::Value;
use tokio::sync::{oneshot, watch};

use super::effects::{Effects, RuntimeCall};
use super::placement::Placement;
use super::turn::{RunningTurn, TurnOver};
use super::turn_trace::TurnSpans;
use crate::runtime::ToolOutcome;
use crate::runtime::UserInputAnswer;
use crate::runtime::{PermissionRequest, RuntimeEvent};
use crate::telemetry::TurnOutcome;

/// The life of a session's turn, as the runtime and the AHP chat see it.
enum TurnState {
    /// Nothing runs: the next message may be sent at once. After a
    /// `session.error`, the runtime's own `session.idle` may still be on its
    /// way (`stale_idle`): it belongs to the failed turn.
    Idle { stale_idle: bool },
    /// A turn runs: the runtime's events are mapped into its chat.
    Running(Box<RunningTurn>),
    /// The AHP turn is over (cancelled) but the runtime has not yet said it
    /// is idle; its last events are dropped, and the next send waits for the
    /// idle (bounded by [`DRAIN_LIMIT`]) so they cannot end the next turn.
    Draining,
}

/// How long a new turn waits for a cancelled turn's runtime to go idle: the
/// runtime acknowledges `session.abort` at once, so this only bounds a
/// runtime that never says so.
pub(super) const DRAIN_LIMIT: Duration = Duration::from_secs(10);

pub(super) struct BridgedSession {
    /// Where it lives on the runtime and how it is bound there.
    placement: Placement,
    turn: TurnState,
    /// Whether `turn` is `Idle`, for waiters: one subscribes before it looks,
    /// so a change between its look and its wait is never lost.
    idle: watch::Sender<bool>,
    /// Serializes turn starts and re-binds of this session.
    gate: Arc<tokio::sync::Mutex<()>>,
}

impl BridgedSession {
    pub(super) fn new(runtime_id: String, slot: usize, persisted: bool) -> Self {
        Self {
            placement: Placement::new(runtime_id, slot, persisted),
            turn: TurnState::Idle { stale_idle: false },
            idle: watch::Sender::new(true),
            gate: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    pub(super) fn gate(&self) -> Arc<tokio::sync::Mutex<()>> {
        self.gate.clone()
    }

    /// A receiver of idleness, to wait on without losing a wake-up.
    pub(super) fn idle_watch(&self) -> watch::Receiver<bool> {
        self.idle.subscribe()
    }

    /// Where it lives on the runtime, to read.
    pub(super) fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Where it lives on the runtime, to change as binding does.
    pub(super) fn placement_mut(&mut self) -> &mut Placement {
        &mut self.placement
    }

    pub(super) fn is_idle(&self) -> bool {
        matches!(self.turn, TurnState::Idle { .. })
    }

    /// The span of the running turn (a handle to it).
    pub(super) fn turn_span(&self) -> Option<tracing::Span> {
        match &self.turn {
            TurnState::Running(t) => Some(t.span().clone()),
            _ => None,
        }
    }

    /// The chat of the running turn.
    pub(super) fn running_chat(&self) -> Option<&str> {
        match &self.turn {
            TurnState::Running(t) => Some(t.chat()),
            _ => None,
        }
    }

    fn running(&mut self) -> Option<&mut RunningTurn> {
        match &mut self.turn {
            TurnState::Running(t) => Some(t),
            _ => None,
        }
    }

    /// Every state change goes through here, so `idle` never disagrees.
    fn set_turn(&mut self, next: TurnState) -> TurnState {
        let is_idle = matches!(next, TurnState::Idle { .. });
        let prev = std::mem::replace(&mut self.turn, next);
        self.idle
            .send_if_modified(|v| std::mem::replace(v, is_idle) != is_idle);
        prev
    }

    /// Starts a turn (the caller waited for `Idle`). Not bound yet: the
    /// message's model is the one to bind with, no switch. Returns what
    /// ends when the turn does.
    pub(super) fn begin(
        &mut self,
        turn_id: &str,
        chat: &str,
        model: Option<&str>,
        spans: TurnSpans,
        starter: Option<String>,
    ) -> TurnOver {
        let stale_idle = matches!(self.turn, TurnState::Idle { stale_idle: true });
        if let Some(m) = model {
            self.placement.model_unless_bound(m);
        }
        let (turn, over) = RunningTurn::new(turn_id, chat, stale_idle, spans, starter);
        self.set_turn(TurnState::Running(Box::new(turn)));
        over
    }

    /// Ends the running turn (if one runs), moving to `next`; see
    /// [`RunningTurn::end`] for what it answers. Returns its chat.
    fn end(
        &mut self,
        next: TurnState,
        outcome: TurnOutcome,
        why: &str,
        failure: Option<&str>,
        answer: bool,
        fx: &mut Effects,
    ) -> Option<String> {
        match self.set_turn(next) {
            TurnState::Running(t) => Some(t.end(outcome, why, failure, answer, fx)),
            _ => None,
        }
    }

    /// A runtime event that belongs to the turn: mapped into its chat; the
    /// turn ends on idle or error.
    pub(super) fn on_event(&mut self, event: &RuntimeEvent, fx: &mut Effects) {
        let Some(t) = self.running() else {
            // Draining or idle: the runtime's idle is all that matters now.
            if *event == RuntimeEvent::Idle {
                self.set_turn(TurnState::Idle { stale_idle: false });
            }
            return;
        };
        if t.stale(event) {
            // The failed turn's idle, late: this turn has not begun yet.
            return;
        }
        if t.on_event(event, fx) {
            // An error ends the runtime's work on the message too; its
            // idle may still follow, and must not end the next turn.
            let stale_idle = matches!(event, RuntimeEvent::Error { .. });
            // Over by the runtime's word: the next queued message may go.
            let outcome = match stale_idle {
                true => TurnOutcome::Error,
                false => TurnOutcome::Completed,
            };
            fx.ended = self.end(TurnState::Idle { stale_idle }, outcome, "", None, false, fx);
        }
    }

    /// The turn could not go on (a failed send): `chat/error`, idle again.
    pub(super) fn fail(&mut self, kind: &str, message: &str, fx: &mut Effects) {
        fx.ended = self.end(
            TurnState::Idle { stale_idle: false },
            TurnOutcome::Error,
            message,
            Some(kind),
            false,
            fx,
        );
    }

    /// A client cancelled: what the runtime waits on is answered (denied,
    /// failed), the message aborted; its last events drain.
    pub(super) fn cancel(&mut self, why: &str, fx: &mut Effects) {
        if self.running().is_some() {
            self.end(
                TurnState::Draining,
                TurnOutcome::Cancelled,
                why,
                None,
                true,
                fx,
            );
        }
    }

    /// How the running turn `turn_id` stands for the inactivity deadline:
    /// `None` when it is over; `Some(None)` while it waits on a client;
    /// otherwise when it last heard from the runtime.
    pub(super) fn last_heard(&mut self, turn_id: &str) -> Option<Option<tokio::time::Instant>> {
        let t = self.running().filter(|t| t.turn_id() == turn_id)?;
        Some(t.last_heard())
    }

    /// The runtime fell silent during the turn: it ends with `chat/error`
    /// naming the timeout, what it waited on is answered, the runtime aborts.
    pub(super) fn silent(&mut self, why: &str, fx: &mut Effects) {
        if self.running().is_some() {
            self.end(
                TurnState::Draining,
                TurnOutcome::Error,
                why,
                Some("timeout"),
                true,
                fx,
            );
        }
    }

    /// The host shuts down: the turn ends with `chat/error` and everything
    /// the runtime waits on is answered.
    pub(super) fn shut_down(&mut self, why: &str, fx: &mut Effects) {
        if self.running().is_some() {
            self.end(
                TurnState::Draining,
                TurnOutcome::Error,
                why,
                Some("shutdown"),
                true,
                fx,
            );
        }
    }

    /// Its runtime died (in `generation`): unbound, and a running turn ends
    /// with `chat/error`; nothing is answered to the dead runtime.
    pub(super) fn runtime_lost(&mut self, generation: u64, why: &str, fx: &mut Effects) {
        if !self.placement.lost(generation) {
            return;
        }
        self.end(
            TurnState::Idle { stale_idle: false },
            TurnOutcome::Error,
            why,
            Some("runtime"),
            false,
            fx,
        );
    }

    /// The client that started the running turn, if any.
    pub(super) fn turn_starter(&self) -> Option<String> {
        match &self.turn {
            TurnState::Running(t) => t.starter().map(str::to_owned),
            _ => None,
        }
    }

    /// `permission.requested`: a pending confirmation in the running turn;
    /// no turn to ask in: denied rather than left waiting. `refused`: the
    /// operator's policy denied it, with that reason: no client is asked.
    pub(super) fn permission_requested(
        &mut self,
        p: &PermissionRequest,
        refused: Option<&str>,
        fx: &mut Effects,
    ) {
        // A client's own tool: the owning client decides by running it.
        let tool_name = p.tool_name.clone().unwrap_or_else(|| p.kind.clone());
        let own_tool = p.kind == "custom-tool" && self.placement.tool_owner(&tool_name).is_some();
        match (self.running(), refused) {
            (Some(t), Some(reason)) => t.refuse_permission(p, reason, fx),
            (_, Some(_)) => fx.call(RuntimeCall::Permission {
                request_id: p.request_id.clone(),
                approved: false,
            }),
            (Some(t), None) if !own_tool => t.ask_permission(p, fx),
            _ => fx.call(RuntimeCall::Permission {
                request_id: p.request_id.clone(),
                approved: own_tool,
            }),
        }
    }

    /// `external_tool.requested` for a tool of `owner` (if still an active
    /// client): opened in the running turn and left to its owner, or failed
    /// towards the runtime at once. Whether it now waits on its owner.
    pub(super) fn client_tool_requested(
        &mut self,
        request_id: &str,
        tool_call_id: &str,
        name: &str,
        arguments: &Value,
        owner: Option<&str>,
        fx: &mut Effects,
    ) -> bool {
        if let Some(t) = self.running() {
            t.open_client_tool(request_id, tool_call_id, name, arguments, owner, fx);
            if owner.is_some() {
                return true;
            }
        }
        let why = match owner {
            Some(_) => format!("Tool {name} is unavailable: no turn is running."),
            None => format!("Tool {name} is unavailable: the client that provides it is gone."),
        };
        let outcome = ToolOutcome {
            error: Some(serde_json::json!("client gone")),
            ..ToolOutcome::failed(&why)
        };
        fx.call(RuntimeCall::Tool {
            request_id: request_id.to_owned(),
            outcome,
        });
        false
    }

    /// A runtime tool of the running turn that no prompt came for is shown running.
    pub(super) fn tool_shown_running(&mut self, tool_call_id: &str, fx: &mut Effects) {
        if let Some(t) = self.running() {
            t.show_running(tool_call_id, fx);
        }
    }

    /// Whether a tool call of the running turn still waits on a client.
    pub(super) fn waits_on_client(&mut self, tool_call_id: &str) -> bool {
        self.running()
            .is_some_and(|t| t.waits_on_client(tool_call_id))
    }

    pub(super) fn client_tool_completed(
        &mut self,
        tool_call_id: &str,
        result: &ToolCallResult,
        fx: &mut Effects,
    ) {
        if let Some(t) = self.running() {
            t.client_tool_completed(tool_call_id, result, fx);
        }
    }

    pub(super) fn tool_call_confirmed(
        &mut self,
        tool_call_id: &str,
        approved: bool,
        fx: &mut Effects,
    ) {
        if let Some(t) = self.running() {
            t.confirmed(tool_call_id, approved, fx);
        }
    }

    /// Fails the running turn's client tool calls that `pick` selects.
    pub(super) fn fail_client_tools(
        &mut self,
        pick: impl Fn(&str, &str, &str) -> bool,
        why: &str,
        error: &str,
        fx: &mut Effects,
    ) -> usize {
        self.running()
            .map_or(0, |t| t.fail_client_tools(pick, why, error, fx))
    }

    /// Asks the running turn's user; `None` (no response) without a turn.
    pub(super) fn ask_input(
        &mut self,
        id: &str,
        question: Option<&str>,
        choices: Vec<String>,
        allow_freeform: Option<bool>,
        fx: &mut Effects,
    ) -> Option<oneshot::Receiver<UserInputAnswer>> {
        let (tx, rx) = oneshot::channel();
        let t = self.running()?;
        t.ask_input(id, question, choices, allow_freeform, tx, fx);
        Some(rx)
    }

    pub(super) fn input_completed(&mut self, completed: &ChatInputCompletedAction) {
        if let Some(t) = self.running() {
            t.input_completed(completed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans() -> TurnSpans {
        TurnSpans::start("ahp-session:/s", "t", "m", None)
    }

    #[tokio::test]
    async fn a_waiter_sees_idle_that_comes_between_its_look_and_its_wait() {
        let mut s = BridgedSession::new("r".into(), 0, false);
        s.begin("t", "ahp-chat:/x", None, spans(), None);
        let mut rx = s.idle_watch();
        assert!(!*rx.borrow_and_update());
        // Idle arrives before the waiter waits: the wait still ends at once.
        s.on_event(&RuntimeEvent::Idle, &mut Effects::new("s", 0, "r"));
        tokio::time::timeout(Duration::from_secs(1), rx.wait_for(|idle| *idle))
            .await
            .expect("no lost wake-up")
            .unwrap();
    }

    #[test]
    fn a_turn_after_an_error_expects_the_stale_idle() {
        let mut s = BridgedSession::new("r".into(), 0, false);
        let fx = &mut Effects::new("s", 0, "r");
        s.begin("t1", "c", None, spans(), None);
        let error = RuntimeEvent::Error {
            error_type: "model".into(),
            message: "500".into(),
        };
        s.on_event(&error, fx);
        s.begin("t2", "c", None, spans(), None);
        // The failed turn's late idle does not end t2.
        s.on_event(&RuntimeEvent::Idle, fx);
        assert_eq!(s.running_chat(), Some("c"));
        s.on_event(&RuntimeEvent::Idle, fx);
        assert!(s.is_idle());
        s.begin("t3", "c", None, spans(), None);
        s.on_event(&RuntimeEvent::Idle, fx);
        assert!(s.is_idle(), "no stale idle expected after a clean end");
    }
}
