//! What a change of a session's bridged state asks for, as values: the
//! actions to apply (each on its channel), the tool calls to mirror into the
//! session's `inputNeeded`, the calls to the session's runtime, and whether
//! a turn ended (so the next queued message may start). The session's
//! state machine returns them under its lock; the bridge carries them out
//! after the lock is released, in this order.

use crate::jsonrpc::CallError;
use crate::runtime::RuntimeConn;
use crate::runtime::{
    abort_params, steer_params, AnswerPermission, AnswerToolCall, Method, SessionAbort, SessionSend,
};
use crate::runtime::{PermissionAnswer, ToolAnswer, ToolOutcome};
use ahp_types::actions::{SessionInputNeededSetAction, StateAction};
use ahp_types::state::{
    SessionInputRequest, SessionToolClientExecutionRequest, SessionToolConfirmationRequest,
    ToolCallConfirmationState, ToolCallState,
};

#[derive(Debug)]
pub(super) struct Effects {
    /// The session's URI: where its own actions go.
    pub session: String,
    /// The runtime its calls go to (pool slot), and its session id there.
    pub slot: usize,
    pub runtime_id: String,
    pub actions: Vec<(String, StateAction)>,
    /// Tool calls that now wait on a client, to mirror once applied.
    pub mirrors: Vec<MirrorChanges>,
    pub calls: Vec<RuntimeCall>,
    /// The chat whose turn ended.
    pub ended: Option<String>,
}

/// A tool call waiting on a client: its confirmation (`executor: None`),
/// or its execution by the client that owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MirrorChanges {
    pub chat: String,
    pub tool_call_id: String,
    pub executor: Option<String>,
}

/// A call to the session's runtime.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum RuntimeCall {
    Permission {
        request_id: String,
        approved: bool,
    },
    Tool {
        request_id: String,
        outcome: ToolOutcome,
    },
    Abort,
    Steer(String),
}

impl RuntimeCall {
    /// The method's name on the runtime's wire (for logs).
    pub(super) fn method(&self) -> &'static str {
        use Method;
        match self {
            Self::Permission { .. } => AnswerPermission::NAME,
            Self::Tool { .. } => AnswerToolCall::NAME,
            Self::Abort => SessionAbort::NAME,
            Self::Steer(_) => SessionSend::NAME,
        }
    }

    /// Makes the call on `conn` for the runtime session `runtime_id`.
    pub(super) async fn make(&self, conn: &RuntimeConn, runtime_id: &str) -> Result<(), CallError> {
        match self {
            Self::Permission {
                request_id,
                approved,
            } => conn
                .call::<AnswerPermission>(&PermissionAnswer::new(runtime_id, request_id, *approved))
                .await
                .map(drop),
            Self::Tool {
                request_id,
                outcome,
            } => conn
                .call::<AnswerToolCall>(&ToolAnswer::new(runtime_id, request_id, outcome))
                .await
                .map(drop),
            Self::Abort => conn
                .call::<SessionAbort>(&abort_params(runtime_id))
                .await
                .map(drop),
            Self::Steer(text) => conn
                .call::<SessionSend>(&steer_params(runtime_id, text))
                .await
                .map(drop),
        }
    }
}

impl Effects {
    pub(super) fn new(session: &str, slot: usize, runtime_id: &str) -> Self {
        Self {
            session: session.to_owned(),
            slot,
            runtime_id: runtime_id.to_owned(),
            actions: Vec::new(),
            mirrors: Vec::new(),
            calls: Vec::new(),
            ended: None,
        }
    }

    /// An action on the session's own channel.
    pub(super) fn act_on_session(&mut self, action: StateAction) {
        self.actions.push((self.session.clone(), action));
    }

    pub(super) fn act(&mut self, channel: &str, actions: impl IntoIterator<Item = StateAction>) {
        self.actions
            .extend(actions.into_iter().map(|a| (channel.to_owned(), a)));
    }

    pub(super) fn call(&mut self, call: RuntimeCall) {
        self.calls.push(call);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.actions.is_empty()
            && self.mirrors.is_empty()
            && self.calls.is_empty()
            && self.ended.is_none()
    }
}

/// The session's `inputNeeded` entry of a tool call waiting on a client,
/// from the tool call as the chat state has it now; `None` when it no
/// longer waits that way.
pub(super) fn mirror_request(
    id: String,
    m: &MirrorChanges,
    turn_id: String,
    call: ToolCallState,
) -> Option<StateAction> {
    let request = match (&m.executor, call) {
        (None, ToolCallState::PendingConfirmation(c)) => {
            SessionInputRequest::ToolConfirmation(SessionToolConfirmationRequest {
                id,
                chat: m.chat.clone(),
                turn_id,
                tool_call: ToolCallConfirmationState::PendingConfirmation(c),
            })
        }
        (Some(client), ToolCallState::Running(r)) => {
            SessionInputRequest::ToolClientExecution(SessionToolClientExecutionRequest {
                id,
                chat: m.chat.clone(),
                turn_id,
                client_id: client.clone(),
                tool_call: r,
            })
        }
        _ => return None,
    };
    let set = SessionInputNeededSetAction { request };
    Some(StateAction::SessionInputNeededSet(Box::new(set)))
}
