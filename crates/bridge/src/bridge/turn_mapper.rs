//! How a runtime event becomes AHP chat actions: a pure mapping to typed
//! `StateAction`s (and a user's turn as a client starts it). The mapper remembers, per turn, which response parts and
//! tool calls it has opened so that streamed deltas and final messages never
//! duplicate each other, and which tool calls ended.

use std::collections::{HashMap, HashSet};

use ahp_types::actions::{
    ChatDeltaAction, ChatErrorAction, ChatReasoningAction, ChatResponsePartAction,
    ChatToolCallCompleteAction, ChatToolCallConfirmedAction, ChatToolCallReadyAction,
    ChatToolCallStartAction, ChatTurnCancelledAction, ChatTurnCompleteAction,
    ChatTurnStartedAction, ChatUsageAction, StateAction,
};
use ahp_types::common::StringOrMarkdown;
use ahp_types::state::{
    ErrorInfo, ErrorResponsePart, MarkdownResponsePart, Message, MessageKind, MessageOrigin,
    ReasoningResponsePart, ResponsePart, ToolCallCancellationReason, ToolCallClientContributor,
    ToolCallConfirmationReason, ToolCallContributor, ToolCallResult, ToolInput, ToolResultContent,
    ToolResultTextContent, UsageInfo,
};
use serde_json::Value;

use crate::runtime::RuntimeEvent;

/// The two streams of a response (the answer, the reasoning) in AHP.
#[derive(Clone, Copy)]
enum ResponseStream {
    Answer,
    Reasoning,
}

/// A user's message starting turn `turn_id` with `text`, as a client
/// would dispatch it (the SDK mirror's and the relay's turns).
pub(crate) fn user_turn_started(turn_id: String, text: String) -> StateAction {
    StateAction::ChatTurnStarted(ChatTurnStartedAction {
        turn_id,
        started_at: jiff::Timestamp::now().to_string(),
        message: user_message(text),
        queued_message_id: None,
        meta: None,
    })
}

/// A user's message of `text` alone.
pub(crate) fn user_message(text: String) -> Message {
    Message {
        text,
        origin: MessageOrigin {
            kind: MessageKind::User,
        },
        attachments: None,
        model: None,
        agent: None,
        meta: None,
    }
}

/// Per-turn memory of the mapping.
#[derive(Debug, Default)]
pub(crate) struct TurnMapper {
    pub turn_id: String,
    parts: HashSet<String>,
    streamed: HashSet<String>,
    tools: HashSet<String>,
    completed: HashSet<String>,
    /// The runtime's own tool calls announced but not yet shown running:
    /// the runtime asks permission right after announcing a tool, and a
    /// call that needs it must go from streaming to pending confirmation,
    /// never through running first. Each waits here, its `toolCallReady`
    /// (not-needed) built, until it proves to run without a prompt.
    deferred: HashMap<String, ChatToolCallReadyAction>,
    pub ended: bool,
}

/// A runtime value as the text AHP shows (a tool's input).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// How a tool call opens: who runs it, and whether it runs at once.
pub(crate) struct OpenTool<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub input: &'a Value,
    /// The client that runs it (a client tool), if any.
    pub client: Option<&'a str>,
    /// Runs at once (`not-needed`); `false`: waits for the client's confirmation.
    pub confirmed: bool,
    pub message: &'a str,
}

impl TurnMapper {
    pub(crate) fn new(turn_id: impl Into<String>) -> Self {
        Self {
            turn_id: turn_id.into(),
            ..Self::default()
        }
    }

    /// Opens a tool call: `chat/toolCallStart` then `chat/toolCallReady`,
    /// running (`confirmed`) or pending the client's confirmation.
    pub(crate) fn open_tool(&mut self, t: OpenTool) -> Vec<StateAction> {
        if !self.tools.insert(t.id.to_owned()) {
            return vec![];
        }
        let contributor = t.client.map(|c| {
            ToolCallContributor::Client(ToolCallClientContributor {
                client_id: c.to_owned(),
            })
        });
        let start = ChatToolCallStartAction {
            turn_id: self.turn_id.clone(),
            tool_call_id: t.id.to_owned(),
            meta: None,
            tool_name: t.name.to_owned(),
            display_name: t.name.to_owned(),
            intention: None,
            contributor: contributor.clone(),
        };
        let mut ready = self.ready(t.id, t.input, t.message);
        ready.contributor = contributor;
        ready.confirmed = t.confirmed.then_some(ToolCallConfirmationReason::NotNeeded);
        vec![
            StateAction::ChatToolCallStart(start),
            StateAction::ChatToolCallReady(ready),
        ]
    }

    fn ready(&self, id: &str, input: &Value, message: &str) -> ChatToolCallReadyAction {
        ChatToolCallReadyAction {
            turn_id: self.turn_id.clone(),
            tool_call_id: id.to_owned(),
            meta: None,
            contributor: None,
            intention: None,
            invocation_message: StringOrMarkdown::Plain(message.to_owned()),
            tool_input: Some(ToolInput::Inline(text(input))),
            confirmation_title: None,
            risk_assessment: None,
            edits: None,
            editable: None,
            confirmed: None,
            options: None,
        }
    }

    /// The runtime announced one of its own tools: `chat/toolCallStart`
    /// now (streaming); running only once no permission prompt came for it
    /// ([`Self::shown_running`]).
    fn announce(&mut self, id: &str, name: &str, input: &Value) -> Vec<StateAction> {
        let message = format!("Running {name}");
        let mut opened = self.open_tool(OpenTool {
            id,
            name,
            input,
            client: None,
            confirmed: true,
            message: &message,
        });
        if let Some(StateAction::ChatToolCallReady(ready)) = opened.pop() {
            self.deferred.insert(id.to_owned(), ready);
        }
        opened
    }

    /// A deferred call runs without a prompt: its `toolCallReady` (not-needed).
    pub(crate) fn shown_running(&mut self, id: &str) -> Vec<StateAction> {
        self.deferred
            .remove(id)
            .map(StateAction::ChatToolCallReady)
            .into_iter()
            .collect()
    }

    /// Every deferred call shown running (the turn moved on, or ends).
    fn all_running(&mut self) -> Vec<StateAction> {
        let mut ids: Vec<String> = self.deferred.keys().cloned().collect();
        ids.sort();
        ids.iter().flat_map(|id| self.shown_running(id)).collect()
    }

    /// Asks the client to confirm a tool call. The runtime announces its own
    /// tools (`tool.execution_start`) before asking permission: an announced
    /// call goes from streaming to pending confirmation with one
    /// `chat/toolCallReady`, never through running.
    pub(crate) fn ask_confirmation(
        &mut self,
        id: &str,
        name: &str,
        input: &Value,
        message: &str,
    ) -> Vec<StateAction> {
        if self.completed.contains(id) {
            return vec![];
        }
        self.deferred.remove(id);
        if !self.tools.contains(id) {
            let t = OpenTool {
                id,
                name,
                input,
                client: None,
                confirmed: false,
                message,
            };
            return self.open_tool(t);
        }
        let ready = self.ready(id, input, message);
        vec![StateAction::ChatToolCallReady(ready)]
    }

    /// A permission the operator's policy refused. No client is asked, so
    /// no client may see the call pending confirmation, not even for one
    /// action: the call is shown as needing none and ends failed, with the
    /// policy's messages as its result. (AHP 1.0's reducer reaches the
    /// `cancelled` state only from a pending confirmation, so "denied" is
    /// said by the result.) A call already shown to the clients (asked
    /// before, or running) is denied as a client's denial would end it.
    pub(crate) fn refuse(
        &mut self,
        id: &str,
        name: &str,
        input: &Value,
        message: &str,
        reason: &str,
    ) -> Vec<StateAction> {
        if self.completed.contains(id) {
            return vec![];
        }
        let unseen = !self.tools.contains(id) || self.deferred.contains_key(id);
        if !unseen {
            return self.deny_shown(id, input, message, reason);
        }
        let mut actions = if self.tools.contains(id) {
            vec![]
        } else {
            self.open_tool(OpenTool {
                id,
                name,
                input,
                client: None,
                confirmed: true,
                message,
            })
        };
        let denied = format!("Denied by policy: {reason}");
        actions.extend(self.complete_tool(id, false, &denied, name));
        actions
    }

    /// A call the clients were shown, denied as a client would deny it.
    fn deny_shown(
        &mut self,
        id: &str,
        input: &Value,
        message: &str,
        reason: &str,
    ) -> Vec<StateAction> {
        let ready = self.ready(id, input, message);
        let actions = vec![
            StateAction::ChatToolCallReady(ready),
            StateAction::ChatToolCallConfirmed(ChatToolCallConfirmedAction {
                turn_id: self.turn_id.clone(),
                tool_call_id: id.to_owned(),
                meta: None,
                approved: false,
                confirmed: None,
                reason: Some(ToolCallCancellationReason::Denied),
                edited_tool_input: None,
                user_suggestion: None,
                reason_message: Some(StringOrMarkdown::Plain(reason.to_owned())),
                selected_option_id: None,
            }),
        ];
        self.mark_completed(id);
        actions
    }

    /// Ends a tool call unless it already ended.
    pub(crate) fn complete_tool(
        &mut self,
        id: &str,
        success: bool,
        output: &str,
        name: &str,
    ) -> Vec<StateAction> {
        if !self.completed.insert(id.to_owned()) {
            return vec![];
        }
        let mut out = self.shown_running(id);
        let past = if success {
            format!("Ran {name}")
        } else {
            format!("{name} failed")
        };
        let result = ToolCallResult {
            success,
            past_tense_message: StringOrMarkdown::Plain(past),
            content: Some(vec![ToolResultContent::Text(ToolResultTextContent {
                text: output.to_owned(),
            })]),
            structured_content: None,
            error: None,
        };
        out.push(StateAction::ChatToolCallComplete(
            ChatToolCallCompleteAction {
                turn_id: self.turn_id.clone(),
                tool_call_id: id.to_owned(),
                meta: None,
                result,
                requires_result_confirmation: None,
            },
        ));
        out
    }

    /// Marks a tool call as completed by its client (the runtime's own
    /// completion event for it must not complete it again).
    pub(crate) fn mark_completed(&mut self, id: &str) {
        self.completed.insert(id.to_owned());
    }

    fn part(&mut self, stream: ResponseStream, id: &str, content: &str) -> Option<StateAction> {
        if !self.parts.insert(id.to_owned()) {
            return None;
        }
        let (id, content) = (id.to_owned(), content.to_owned());
        let part = match stream {
            ResponseStream::Answer => ResponsePart::Markdown(MarkdownResponsePart { id, content }),
            ResponseStream::Reasoning => {
                ResponsePart::Reasoning(ReasoningResponsePart { id, content })
            }
        };
        Some(StateAction::ChatResponsePart(ChatResponsePartAction {
            turn_id: self.turn_id.clone(),
            part,
            meta: None,
        }))
    }

    /// Ends the turn with an error (once).
    pub(crate) fn error(
        &mut self,
        error_type: &str,
        message: &str,
        duration_ms: i64,
    ) -> Vec<StateAction> {
        if std::mem::replace(&mut self.ended, true) {
            return vec![];
        }
        let error = ErrorInfo {
            error_type: error_type.to_owned(),
            message: message.to_owned(),
            stack: None,
            meta: None,
        };
        vec![StateAction::ChatError(ChatErrorAction {
            turn_id: self.turn_id.clone(),
            duration: duration_ms,
            part: ErrorResponsePart {
                error,
                resumable: None,
            },
            meta: None,
        })]
    }

    /// Ends the turn cancelled (once): its driver went away and the runtime
    /// was told to abort it.
    pub(crate) fn cancelled(&mut self, duration_ms: i64) -> Vec<StateAction> {
        if std::mem::replace(&mut self.ended, true) {
            return vec![];
        }
        vec![StateAction::ChatTurnCancelled(ChatTurnCancelledAction {
            turn_id: self.turn_id.clone(),
            duration: duration_ms,
            meta: None,
        })]
    }

    fn delta(&mut self, stream: ResponseStream, id: &str, delta: &str) -> Vec<StateAction> {
        let mut out: Vec<StateAction> = self.part(stream, id, "").into_iter().collect();
        self.streamed.insert(id.to_owned());
        let (turn_id, part_id, content) = (self.turn_id.clone(), id.to_owned(), delta.to_owned());
        out.push(match stream {
            ResponseStream::Answer => StateAction::ChatDelta(ChatDeltaAction {
                turn_id,
                part_id,
                content,
                meta: None,
            }),
            ResponseStream::Reasoning => StateAction::ChatReasoning(ChatReasoningAction {
                turn_id,
                part_id,
                content,
                meta: None,
            }),
        });
        out
    }

    /// A whole message: a part of its own unless it was streamed already.
    fn whole(&mut self, stream: ResponseStream, id: &str, content: &str) -> Vec<StateAction> {
        if self.streamed.contains(id) || content.is_empty() {
            return vec![];
        }
        self.part(stream, id, content).into_iter().collect()
    }

    /// Maps one runtime event. Events that mean nothing to a chat map to
    /// nothing. Output of the model (and the turn's end) shows every
    /// deferred tool call running first: no prompt came for them.
    pub(crate) fn map(&mut self, event: &RuntimeEvent, duration_ms: i64) -> Vec<StateAction> {
        let moved_on = matches!(
            event,
            RuntimeEvent::MessageDelta { .. }
                | RuntimeEvent::Message { .. }
                | RuntimeEvent::ReasoningDelta { .. }
                | RuntimeEvent::Reasoning { .. }
                | RuntimeEvent::Error { .. }
                | RuntimeEvent::Idle
        );
        let mut out = if moved_on { self.all_running() } else { vec![] };
        out.extend(self.map_event(event, duration_ms));
        out
    }

    fn map_event(&mut self, event: &RuntimeEvent, duration_ms: i64) -> Vec<StateAction> {
        match event {
            RuntimeEvent::MessageDelta { message_id, delta } => {
                self.delta(ResponseStream::Answer, message_id, delta)
            }
            RuntimeEvent::ReasoningDelta {
                reasoning_id,
                delta,
            } => self.delta(ResponseStream::Reasoning, reasoning_id, delta),
            RuntimeEvent::Message {
                message_id,
                content,
            } => self.whole(ResponseStream::Answer, message_id, content),
            RuntimeEvent::Reasoning {
                reasoning_id,
                content,
            } => self.whole(ResponseStream::Reasoning, reasoning_id, content),
            RuntimeEvent::Usage(u) => vec![StateAction::ChatUsage(ChatUsageAction {
                turn_id: self.turn_id.clone(),
                usage: UsageInfo {
                    input_tokens: u.input_tokens,
                    output_tokens: u.output_tokens,
                    model: u.model.clone(),
                    cache_read_tokens: u.cache_read_tokens,
                    meta: None,
                },
                meta: None,
            })],
            RuntimeEvent::ToolStarted {
                tool_call_id,
                tool_name,
                arguments,
            } => self.announce(tool_call_id, tool_name, arguments),
            // The runtime's schema names no tool in a completion.
            RuntimeEvent::ToolCompleted {
                tool_call_id,
                success,
                output,
            } => self.complete_tool(tool_call_id, *success, output, "tool"),
            RuntimeEvent::Error {
                error_type,
                message,
            } => self.error(error_type, message, duration_ms),
            RuntimeEvent::Idle if !std::mem::replace(&mut self.ended, true) => {
                vec![StateAction::ChatTurnComplete(ChatTurnCompleteAction {
                    turn_id: self.turn_id.clone(),
                    duration: duration_ms,
                    meta: None,
                })]
            }
            _ => vec![],
        }
    }
}

#[cfg(test)]
#[path = "turn_mapper_tests.rs"]
mod tests;
