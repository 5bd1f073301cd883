//! One running turn and everything it waits on from clients: the runtime's
//! permission prompts, the client tool calls, the runtime's questions. They
//! live here and nowhere else, so they vanish with the turn; [`RunningTurn::end`]
//! says what each left waiting needs as an answer. Pure: each operation
//! returns the [`Effects`] it asks for.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Instant;

use ahp_types::actions::{
    ChatInputCompletedAction, ChatInputRequestedAction, SessionInputNeededRemovedAction,
    SessionInputNeededSetAction, StateAction,
};
use ahp_types::state::{
    SessionChatInputRequest, SessionInputRequest, ToolCallResult, ToolResultContent,
};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use super::effects::{Effects, MirrorChanges, RuntimeCall};
use super::turn_mapper::{OpenTool, TurnMapper};
use super::turn_trace::{Ending, TurnSpans};
use super::user_input::{chat_request, runtime_answer};
use crate::ahp::Dispatcher;
use crate::runtime::ToolOutcome;
use crate::runtime::UserInputAnswer;
use crate::runtime::{PermissionRequest, RuntimeEvent};
use crate::telemetry::{metrics, TurnOutcome};

/// What a turn ended by a graceful shutdown tells the client (and the
/// runtime, and an SDK app).
pub(crate) const SHUTTING_DOWN: &str = "the host is shutting down";

/// A turn to run: started by a client, or by the host from the queue.
#[derive(Debug, Clone)]
pub(crate) struct TurnRequest {
    pub chat: String,
    pub turn_id: String,
    pub prompt: String,
    /// The model the message chose, if any: the session switches to it.
    pub model: Option<String>,
    /// The custom agent the message chose, by its customization `uri`.
    pub agent: Option<String>,
    /// Who started it (a queued message: nobody in particular).
    pub by: Option<Dispatcher>,
}

/// A question of the runtime waiting for a client's answer; dropping it
/// answers "no response", so the runtime never waits forever.
struct PendingInput {
    answer: oneshot::Sender<UserInputAnswer>,
    choices: Vec<String>,
}

/// A client tool call the runtime waits on.
struct ClientTool {
    request_id: String,
    owner: String,
}

pub(super) struct RunningTurn {
    mapper: TurnMapper,
    started: Instant,
    /// When the runtime was last heard from in this turn (or a client
    /// answered what the turn waited on).
    last_heard: tokio::time::Instant,
    /// The first text of the answer came (timed once, for the metric).
    answered: bool,
    chat: String,
    /// The runtime has sent an event of this turn. Until then a
    /// `session.idle` may be the stale one of a failed turn.
    taken: bool,
    /// The turn before ended by `session.error` before its idle came.
    stale_idle: bool,
    /// Permission prompts: tool call id -> runtime request id.
    permissions: HashMap<String, String>,
    client_tools: HashMap<String, ClientTool>,
    /// Questions awaiting a client's answer, by AHP request id.
    inputs: HashMap<String, PendingInput>,
    /// The turn's span and its open children.
    spans: TurnSpans,
    /// The client that started it (a queued message: none): who the
    /// operator's Rego policy sees asking for its permissions.
    starter: Option<String>,
    /// Never sent: dropped with the turn, which ends its [`TurnOver`].
    _over: oneshot::Sender<Infallible>,
}

/// Ends (with an error: nothing is ever sent) when its running turn is
/// over, however it ended: what waits on the turn's deadline stops then.
pub(super) type TurnOver = oneshot::Receiver<Infallible>;

/// The `inputNeeded` id of a tool call's mirror.
pub(super) fn mirror_id(tool_call_id: &str) -> String {
    format!("tool-{tool_call_id}")
}

/// Takes an entry out of the session's `inputNeeded`.
pub(super) fn needed_removed(id: String) -> StateAction {
    StateAction::SessionInputNeededRemoved(SessionInputNeededRemovedAction { id })
}

impl RunningTurn {
    pub(super) fn new(
        turn_id: &str,
        chat: &str,
        stale_idle: bool,
        spans: TurnSpans,
        starter: Option<String>,
    ) -> (Self, TurnOver) {
        let (over, turn_over) = oneshot::channel();
        let turn = Self {
            mapper: TurnMapper::new(turn_id),
            started: Instant::now(),
            last_heard: tokio::time::Instant::now(),
            answered: false,
            chat: chat.to_owned(),
            taken: false,
            stale_idle,
            permissions: HashMap::new(),
            client_tools: HashMap::new(),
            inputs: HashMap::new(),
            spans,
            starter,
            _over: over,
        };
        (turn, turn_over)
    }

    /// The client that started the turn, if a client did.
    pub(super) fn starter(&self) -> Option<&str> {
        self.starter.as_deref()
    }

    /// The chat the turn runs in.
    pub(super) fn chat(&self) -> &str {
        &self.chat
    }

    /// Whether `event` is the late idle of the failed turn before (then it
    /// is swallowed, once). Any other event this turn acts on makes the
    /// runtime's work this turn's: events the bridge does not act on
    /// (`assistant.idle`, ...) may still be the failed turn's.
    pub(super) fn stale(&mut self, event: &RuntimeEvent) -> bool {
        if *event == RuntimeEvent::Idle && self.stale_idle && !self.taken {
            self.stale_idle = false;
            return true;
        }
        if !matches!(event, RuntimeEvent::Other(_)) {
            self.taken = true;
        }
        false
    }

    /// The turn's span: the parent of its transforms.
    pub(super) fn span(&self) -> &tracing::Span {
        self.spans.span()
    }

    fn elapsed_ms(&self) -> i64 {
        self.started.elapsed().as_millis() as i64
    }

    pub(super) fn turn_id(&self) -> &str {
        &self.mapper.turn_id
    }

    /// When the turn last heard from the runtime; `None` while it waits on
    /// a client (a prompt, a client tool, a question): then the runtime is
    /// quiet because of the client, not stuck.
    pub(super) fn last_heard(&self) -> Option<tokio::time::Instant> {
        let waiting = !self.permissions.is_empty()
            || !self.client_tools.is_empty()
            || !self.inputs.is_empty();
        (!waiting).then_some(self.last_heard)
    }

    /// The runtime (or a client, for the runtime) did something for this turn.
    fn heard(&mut self) {
        self.last_heard = tokio::time::Instant::now();
    }

    /// Maps a runtime event into the chat; whether the event ended the turn.
    pub(super) fn on_event(&mut self, event: &RuntimeEvent, fx: &mut Effects) -> bool {
        self.heard();
        if !self.answered
            && matches!(
                event,
                RuntimeEvent::MessageDelta { .. } | RuntimeEvent::Message { .. }
            )
        {
            self.answered = true;
            metrics().first_token(self.started.elapsed());
        }
        self.spans.on_event(event);
        let actions = self.mapper.map(event, self.elapsed_ms());
        fx.act(&self.chat, actions);
        self.mapper.ended
    }

    /// Ends the AHP turn; when `answer_runtime`, what it waited on is
    /// answered towards the runtime (permissions denied, client tools failed
    /// with `why`, questions unanswered (dropped)) and the message aborted.
    /// `failure`: the turn ends with `chat/error` of that kind. Returns the
    /// turn's chat.
    pub(super) fn end(
        mut self,
        outcome: TurnOutcome,
        why: &str,
        failure: Option<&str>,
        answer_runtime: bool,
        fx: &mut Effects,
    ) -> String {
        metrics().turn_ended(outcome, self.started.elapsed());
        if let Some(kind) = failure {
            let actions = self.mapper.error(kind, why, self.elapsed_ms());
            fx.act(&self.chat, actions);
        }
        self.spans.end(match (outcome, failure) {
            (TurnOutcome::Completed, _) => Ending::Completed,
            (TurnOutcome::Cancelled, _) => Ending::Cancelled,
            (TurnOutcome::Error, Some(kind)) => Ending::Error(kind),
            // The runtime's own `session.error`: the spans saw it, with its kind.
            (TurnOutcome::Error, None) => Ending::Completed,
        });
        let waiting = self.permissions.keys().chain(self.client_tools.keys());
        let removals: Vec<StateAction> = waiting.map(|id| needed_removed(mirror_id(id))).collect();
        for r in removals {
            fx.act_on_session(r);
        }
        if answer_runtime {
            for request_id in self.permissions.into_values() {
                fx.call(RuntimeCall::Permission {
                    request_id,
                    approved: false,
                });
            }
            for t in self.client_tools.into_values() {
                let outcome = ToolOutcome::failed(why);
                fx.call(RuntimeCall::Tool {
                    request_id: t.request_id,
                    outcome,
                });
            }
            fx.call(RuntimeCall::Abort);
        }
        self.chat
    }

    /// `permission.requested` the operator's policy refused: the call is
    /// never shown pending (no client is asked) and ends denied, with
    /// `reason`; the runtime is told "denied".
    pub(super) fn refuse_permission(
        &mut self,
        p: &PermissionRequest,
        reason: &str,
        fx: &mut Effects,
    ) {
        self.heard();
        let (tool_call_id, tool_name, input, message) = shown(p);
        let actions = self
            .mapper
            .refuse(&tool_call_id, &tool_name, &input, &message, reason);
        fx.act(&self.chat, actions);
        self.spans.permission_asked(&tool_call_id, &p.kind);
        self.spans.permission_answered(&tool_call_id, false);
        self.spans.tool_ended(&tool_call_id, "cancelled");
        fx.call(RuntimeCall::Permission {
            request_id: p.request_id.clone(),
            approved: false,
        });
    }

    /// `permission.requested`: the call goes (back) to pending confirmation.
    pub(super) fn ask_permission(&mut self, p: &PermissionRequest, fx: &mut Effects) {
        self.heard();
        let (tool_call_id, tool_name, input, message) = shown(p);
        let actions = self
            .mapper
            .ask_confirmation(&tool_call_id, &tool_name, &input, &message);
        fx.act(&self.chat, actions);
        self.permissions
            .insert(tool_call_id.clone(), p.request_id.clone());
        self.spans.permission_asked(&tool_call_id, &p.kind);
        fx.mirrors.push(MirrorChanges {
            chat: self.chat.clone(),
            tool_call_id,
            executor: None,
        });
    }
}

impl RunningTurn {
    /// `external_tool.requested`: a client tool call, run by `owner` when
    /// it is still an active client, failed at once otherwise.
    pub(super) fn open_client_tool(
        &mut self,
        request_id: &str,
        tool_call_id: &str,
        name: &str,
        arguments: &Value,
        owner: Option<&str>,
        fx: &mut Effects,
    ) {
        self.heard();
        let actions = self.mapper.open_tool(OpenTool {
            id: tool_call_id,
            name,
            input: arguments,
            client: owner,
            confirmed: true,
            message: &format!("Running {name}"),
        });
        fx.act(&self.chat, actions);
        self.spans.tool_started(tool_call_id, name, "client");
        let Some(owner) = owner else {
            self.spans.tool_ended(tool_call_id, "failure");
            let gone = self.mapper.complete_tool(
                tool_call_id,
                false,
                "the client that provides this tool is gone",
                name,
            );
            fx.act(&self.chat, gone);
            return;
        };
        self.client_tools.insert(
            tool_call_id.to_owned(),
            ClientTool {
                request_id: request_id.to_owned(),
                owner: owner.to_owned(),
            },
        );
        fx.mirrors.push(MirrorChanges {
            chat: self.chat.clone(),
            tool_call_id: tool_call_id.to_owned(),
            executor: Some(owner.to_owned()),
        });
    }

    /// A runtime tool announced without a prompt so far is shown running.
    pub(super) fn show_running(&mut self, tool_call_id: &str, fx: &mut Effects) {
        let actions = self.mapper.shown_running(tool_call_id);
        fx.act(&self.chat, actions);
    }

    /// Whether a tool call still waits on a client (for its mirror).
    pub(super) fn waits_on_client(&self, tool_call_id: &str) -> bool {
        self.permissions.contains_key(tool_call_id) || self.client_tools.contains_key(tool_call_id)
    }

    /// The owner completed its tool call in AHP: the runtime gets its result.
    pub(super) fn client_tool_completed(
        &mut self,
        tool_call_id: &str,
        result: &ToolCallResult,
        fx: &mut Effects,
    ) {
        self.heard();
        self.mapper.mark_completed(tool_call_id);
        let Some(t) = self.client_tools.remove(tool_call_id) else {
            return;
        };
        fx.act_on_session(needed_removed(mirror_id(tool_call_id)));
        let outcome = if result.success { "success" } else { "failure" };
        self.spans.tool_ended(tool_call_id, outcome);
        let text = result
            .content
            .iter()
            .flatten()
            .filter_map(|c| match c {
                ToolResultContent::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let outcome = ToolOutcome {
            success: result.success,
            text,
            error: result
                .error
                .as_ref()
                .and_then(|e| serde_json::to_value(e).ok()),
        };
        fx.call(RuntimeCall::Tool {
            request_id: t.request_id,
            outcome,
        });
    }

    /// A client approved or denied a permission prompt.
    pub(super) fn confirmed(&mut self, tool_call_id: &str, approved: bool, fx: &mut Effects) {
        self.heard();
        if !approved {
            // A denied call is cancelled in AHP: the runtime's failure event must not complete it.
            self.mapper.mark_completed(tool_call_id);
            self.spans.tool_ended(tool_call_id, "cancelled");
        }
        self.spans.permission_answered(tool_call_id, approved);
        let Some(request_id) = self.permissions.remove(tool_call_id) else {
            return;
        };
        fx.act_on_session(needed_removed(mirror_id(tool_call_id)));
        fx.call(RuntimeCall::Permission {
            request_id,
            approved,
        });
    }

    /// Fails the client tool calls `pick` selects (tool call id, runtime
    /// request id, owner), in AHP and towards the runtime; how many.
    pub(super) fn fail_client_tools(
        &mut self,
        pick: impl Fn(&str, &str, &str) -> bool,
        why: &str,
        error: &str,
        fx: &mut Effects,
    ) -> usize {
        self.heard();
        let gone: Vec<String> = self
            .client_tools
            .iter()
            .filter(|(id, t)| pick(id, &t.request_id, &t.owner))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            let Some(t) = self.client_tools.remove(id) else {
                continue;
            };
            let actions = self.mapper.complete_tool(id, false, why, "tool");
            fx.act(&self.chat, actions);
            self.spans.tool_ended(id, "failure");
            fx.act_on_session(needed_removed(mirror_id(id)));
            let outcome = ToolOutcome {
                error: Some(json!(error)),
                ..ToolOutcome::failed(why)
            };
            fx.call(RuntimeCall::Tool {
                request_id: t.request_id,
                outcome,
            });
        }
        gone.len()
    }

    /// The runtime asks the user: an input request in the chat, mirrored in
    /// the session's `inputNeeded`; `answer` gets the client's answer.
    pub(super) fn ask_input(
        &mut self,
        id: &str,
        question: Option<&str>,
        choices: Vec<String>,
        allow_freeform: Option<bool>,
        answer: oneshot::Sender<UserInputAnswer>,
        fx: &mut Effects,
    ) {
        self.heard();
        let request = chat_request(id, question, &choices, allow_freeform);
        let requested = ChatInputRequestedAction {
            request: request.clone(),
        };
        fx.act(&self.chat, [StateAction::ChatInputRequested(requested)]);
        let needed = SessionInputRequest::ChatInput(SessionChatInputRequest {
            id: id.to_owned(),
            chat: self.chat.clone(),
            request,
        });
        let set = SessionInputNeededSetAction { request: needed };
        fx.act_on_session(StateAction::SessionInputNeededSet(Box::new(set)));
        self.inputs
            .insert(id.to_owned(), PendingInput { answer, choices });
        self.spans.input_asked(id);
    }

    /// A client answered (or declined) a question of the runtime.
    pub(super) fn input_completed(&mut self, completed: &ChatInputCompletedAction) {
        self.heard();
        if let Some(p) = self.inputs.remove(&completed.request_id) {
            let answer = runtime_answer(completed, &p.choices);
            self.spans.input_answered(&completed.request_id, &answer);
            let _ = p.answer.send(answer);
        }
    }
}

/// A permission request as a tool call shows it: its id, its tool's name,
/// its input and the prompt's message.
fn shown(p: &PermissionRequest) -> (String, String, Value, String) {
    let tool_name = p.tool_name.clone().unwrap_or_else(|| p.kind.clone());
    let tool_call_id = p
        .tool_call_id
        .clone()
        .unwrap_or_else(|| p.request_id.clone());
    let detail = p
        .intention
        .as_deref()
        .or(p.full_command_text.as_deref())
        .unwrap_or("");
    let input = p
        .full_command_text
        .as_ref()
        .map(|c| json!(c))
        .or_else(|| p.args.clone())
        .unwrap_or(Value::Null);
    let message = format!("Allow {}: {detail}", p.kind);
    (tool_call_id, tool_name, input, message)
}
