//! What the bridge keeps per AHP session: its runtime session, the binding,
//! and the turn's life as one explicit state.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::{oneshot, watch};

use super::actions::TurnMapper;
use super::binding::Binding;
use crate::runtime::wire::{self, method, ToolOutcome, UserInputAnswer};

/// The life of a session's turn, as the runtime and the AHP chat see it.
pub(super) enum TurnState {
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

pub(super) struct RunningTurn {
    pub mapper: TurnMapper,
    pub started: Instant,
    pub chat: String,
    /// The runtime has sent an event of this turn. Until then a
    /// `session.idle` may be the stale one of a failed turn.
    pub taken: bool,
    /// The turn before ended by `session.error` before its idle came.
    pub stale_idle: bool,
}

impl RunningTurn {
    pub fn new(turn_id: &str, chat: &str, stale_idle: bool) -> Self {
        Self {
            mapper: TurnMapper::new(turn_id),
            started: Instant::now(),
            chat: chat.to_owned(),
            taken: false,
            stale_idle,
        }
    }

    pub fn elapsed_ms(&self) -> i64 {
        self.started.elapsed().as_millis() as i64
    }

    /// Ends the turn with `chat/error`; returns its chat and the actions.
    pub fn fail(mut self, kind: &str, message: &str) -> (String, Vec<Value>) {
        let actions = self.mapper.error(kind, message, self.elapsed_ms());
        (self.chat, actions)
    }
}

/// A question of the runtime waiting for a client's answer; dropping it
/// answers "no response", so the runtime never waits forever.
pub(super) struct PendingInput {
    pub answer: oneshot::Sender<UserInputAnswer>,
    pub choices: Vec<String>,
}

pub(super) struct BridgedSession {
    pub runtime_id: String,
    /// The runtime of the pool it lives on, for its whole life.
    pub slot: usize,
    /// The binding of the live runtime session, and the runtime process
    /// generation it lives in; `None`: create or resume first.
    pub bound: Option<(Binding, u64)>,
    /// The runtime keeps the session on disk (it has had a message):
    /// re-binding resumes it. Before that there is nothing to resume.
    pub persisted: bool,
    /// The model the runtime session was last given (at bind or by a
    /// switch); `None` before it is bound.
    pub model: Option<String>,
    turn: TurnState,
    /// Whether `turn` is `Idle`, for waiters: one subscribes before it looks,
    /// so a change between its look and its wait is never lost.
    idle: watch::Sender<bool>,
    /// Permission prompts of the running turn: tool call id -> runtime request
    /// id. Each is mirrored in the session's `inputNeeded` while pending.
    pub permissions: HashMap<String, String>,
    /// Client tool calls of the running turn: tool call id -> (runtime request
    /// id, owning client). Mirrored like the permissions.
    pub client_tools: HashMap<String, (String, String)>,
    /// The runtime's questions awaiting a client's answer, by AHP request id.
    pub inputs: HashMap<String, PendingInput>,
    /// Serializes turn starts and re-binds of this session.
    pub gate: Arc<tokio::sync::Mutex<()>>,
}

/// What a turn left behind when it ended.
pub(super) struct Ended {
    pub turn: Option<RunningTurn>,
    /// Runtime request ids of the permissions and client tools still pending.
    pub permissions: Vec<String>,
    pub tools: Vec<String>,
    /// Their `inputNeeded` entries, to take out of the session.
    pub removals: Vec<Value>,
}

impl Ended {
    /// The runtime calls that answer what the ended turn left waiting, in
    /// order: its permissions denied, its client tools failed with `why`,
    /// then its message aborted.
    pub fn runtime_answers(&self, runtime_id: &str, why: &str) -> Vec<(&'static str, Value)> {
        let denied = self.permissions.iter().map(|request_id| {
            let params = wire::permission_answer(runtime_id, request_id, false);
            (method::ANSWER_PERMISSION, params)
        });
        let failed = self.tools.iter().map(|request_id| {
            let params = wire::tool_answer(runtime_id, request_id, &ToolOutcome::failed(why));
            (method::ANSWER_TOOL_CALL, params)
        });
        let abort = (method::SESSION_ABORT, wire::session_ref(runtime_id));
        denied.chain(failed).chain([abort]).collect()
    }
}

impl BridgedSession {
    pub fn new(runtime_id: String, slot: usize) -> Self {
        Self {
            runtime_id,
            slot,
            bound: None,
            persisted: false,
            model: None,
            turn: TurnState::Idle { stale_idle: false },
            idle: watch::Sender::new(true),
            permissions: HashMap::new(),
            client_tools: HashMap::new(),
            inputs: HashMap::new(),
            gate: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// The binding, if it lives in runtime process `generation`.
    pub fn binding_in(&self, generation: u64) -> Option<&Binding> {
        self.bound
            .as_ref()
            .filter(|(_, g)| *g == generation)
            .map(|(b, _)| b)
    }

    pub fn turn(&self) -> &TurnState {
        &self.turn
    }

    pub fn running(&mut self) -> Option<&mut RunningTurn> {
        match &mut self.turn {
            TurnState::Running(t) => Some(t),
            _ => None,
        }
    }

    /// Every state change goes through here, so `idle` never disagrees.
    pub fn set_turn(&mut self, next: TurnState) -> TurnState {
        let is_idle = matches!(next, TurnState::Idle { .. });
        let prev = std::mem::replace(&mut self.turn, next);
        self.idle
            .send_if_modified(|v| std::mem::replace(v, is_idle) != is_idle);
        prev
    }

    /// Starts a turn (the caller waited for `Idle`).
    pub fn begin(&mut self, turn_id: &str, chat: &str) {
        let stale_idle = matches!(self.turn, TurnState::Idle { stale_idle: true });
        let turn = RunningTurn::new(turn_id, chat, stale_idle);
        self.set_turn(TurnState::Running(Box::new(turn)));
    }

    /// A receiver of idleness, to wait on without losing a wake-up.
    pub fn idle_watch(&self) -> watch::Receiver<bool> {
        self.idle.subscribe()
    }

    /// Ends the AHP turn, moving to `next`, and takes everything it waited on
    /// from clients: the pending permissions and client tool calls (each
    /// mirrored in `inputNeeded` while pending) and the questions (dropping
    /// one answers the runtime "no response").
    pub fn end_turn(&mut self, next: TurnState) -> Ended {
        self.inputs.clear();
        let removals = self
            .permissions
            .keys()
            .chain(self.client_tools.keys())
            .map(|id| unmirror(id))
            .collect();
        let turn = match self.set_turn(next) {
            TurnState::Running(t) => Some(*t),
            _ => None,
        };
        Ended {
            turn,
            permissions: self.permissions.drain().map(|(_, r)| r).collect(),
            tools: self.client_tools.drain().map(|(_, (r, _))| r).collect(),
            removals,
        }
    }
}

/// The `inputNeeded` id of a tool call's mirror.
pub(super) fn mirror_id(tool_call_id: &str) -> String {
    format!("tool-{tool_call_id}")
}

/// Takes a tool call's entry out of the session's `inputNeeded`.
pub(super) fn unmirror(tool_call_id: &str) -> Value {
    json!({"type": "session/inputNeededRemoved", "id": mirror_id(tool_call_id)})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_waiter_sees_idle_that_comes_between_its_look_and_its_wait() {
        let mut s = BridgedSession::new("r".into(), 0);
        s.begin("t", "ahp-chat:/x");
        let mut rx = s.idle_watch();
        assert!(!*rx.borrow_and_update());
        // Idle arrives before the waiter waits: the wait still ends at once.
        s.end_turn(TurnState::Idle { stale_idle: false });
        tokio::time::timeout(Duration::from_secs(1), rx.wait_for(|idle| *idle))
            .await
            .expect("no lost wake-up")
            .unwrap();
    }

    #[test]
    fn a_turn_after_an_error_expects_the_stale_idle() {
        let mut s = BridgedSession::new("r".into(), 0);
        s.begin("t1", "c");
        s.end_turn(TurnState::Idle { stale_idle: true });
        s.begin("t2", "c");
        assert!(s.running().unwrap().stale_idle);
        s.end_turn(TurnState::Idle { stale_idle: false });
        s.begin("t3", "c");
        assert!(!s.running().unwrap().stale_idle);
    }
}
