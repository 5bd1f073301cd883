//! The spans of one turn: the turn's own (`chat {model}`, with the
//! OpenTelemetry GenAI attributes), the child of the client's `traceparent`
//! when the `dispatchAction` that started it carried one; and a child of it
//! for each tool call, permission prompt and question of the runtime, open
//! while its thing is (the transforms' children are the router's, under
//! [`TurnSpans::span`]). Owned by the running turn: each child ends when
//! its thing ends, all of them when the turn ends. No prompt, tool input,
//! tool output or answer text is ever an attribute. The spans are never
//! entered, so log lines do not change; they cost nothing to export unless
//! `[telemetry] otlp_endpoint` is set.

use std::collections::HashMap;

use tracing::field::Empty;
use tracing::{debug, info_span, Span};

use crate::ahp::Dispatcher;
use crate::runtime::UserInputAnswer;
use crate::runtime::{RuntimeEvent, Usage};
use crate::telemetry::set_remote_parent;
use crate::telemetry::Escaped;

/// How a turn ended, as its span's `ahp.turn.outcome` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending<'a> {
    Completed,
    Cancelled,
    /// `error.type`: the bridge's kind (`runtime`, `timeout`, `shutdown`)
    /// or the runtime's error type.
    Error(&'a str),
}

pub(super) struct TurnSpans {
    turn: Span,
    /// Summed over the turn's model calls; recorded once, at its end (a
    /// field recorded twice on a started span is exported twice).
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    response_model: Option<String>,
    /// The runtime's `session.error` type, once it sent one.
    runtime_error: Option<String>,
    /// Open tool calls, permission prompts and questions, by their id.
    tools: HashMap<String, Span>,
    permissions: HashMap<String, Span>,
    inputs: HashMap<String, Span>,
}

impl TurnSpans {
    /// The span of turn `turn_id` of session `session`, asking `model`.
    pub(super) fn start(
        session: &str,
        turn_id: &str,
        model: &str,
        by: Option<&Dispatcher>,
    ) -> Self {
        let name = format!("chat {model}");
        let turn = info_span!(
            "chat",
            otel.name = name.as_str(),
            otel.kind = "server",
            otel.status_code = Empty,
            gen_ai.operation.name = "chat",
            gen_ai.request.model = model,
            gen_ai.response.model = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            error.type = Empty,
            ahp.session = session,
            ahp.turn_id = turn_id,
            ahp.principal = by.map(|b| b.principal.as_str()),
            ahp.turn.outcome = Empty,
        );
        // Before anything starts the span: its parent is fixed then.
        if let Some(tp) = by.and_then(|b| b.traceparent.as_deref()) {
            if !set_remote_parent(&turn, tp) {
                debug!(session = %Escaped(session), traceparent = %Escaped(tp), "traceparent not used (invalid, or no trace export)");
            }
        }
        Self {
            turn,
            input_tokens: None,
            output_tokens: None,
            response_model: None,
            runtime_error: None,
            tools: HashMap::new(),
            permissions: HashMap::new(),
            inputs: HashMap::new(),
        }
    }

    /// The turn's span, the parent of what is done for it elsewhere.
    pub(super) fn span(&self) -> &Span {
        &self.turn
    }

    /// A runtime event of the turn: usage adds up, tools open and close.
    pub(super) fn on_event(&mut self, event: &RuntimeEvent) {
        match event {
            RuntimeEvent::Usage(u) => self.usage(u),
            RuntimeEvent::ToolStarted {
                tool_call_id,
                tool_name,
                ..
            } => self.tool_started(tool_call_id, tool_name, "runtime"),
            RuntimeEvent::ToolCompleted {
                tool_call_id,
                success,
                ..
            } => self.tool_ended(tool_call_id, if *success { "success" } else { "failure" }),
            RuntimeEvent::Error { error_type, .. } => {
                self.runtime_error = Some(error_type.clone());
            }
            _ => {}
        }
    }

    /// The tokens of each model call of the turn, summed.
    fn usage(&mut self, u: &Usage) {
        let add = |sum: Option<i64>, n: Option<i64>| match (sum, n) {
            (Some(s), Some(n)) => Some(s + n),
            (s, n) => s.or(n),
        };
        self.input_tokens = add(self.input_tokens, u.input_tokens);
        self.output_tokens = add(self.output_tokens, u.output_tokens);
        if u.model.is_some() {
            self.response_model.clone_from(&u.model);
        }
    }

    /// A tool call opens (once per id), run by the runtime or a client.
    pub(super) fn tool_started(&mut self, id: &str, name: &str, runs_on: &'static str) {
        if self.tools.contains_key(id) {
            return;
        }
        let span = info_span!(
            parent: &self.turn,
            "execute_tool",
            otel.name = format!("execute_tool {name}").as_str(),
            otel.status_code = Empty,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = name,
            gen_ai.tool.call.id = id,
            ahp.tool.runs_on = runs_on,
            ahp.tool.outcome = Empty,
        );
        self.tools.insert(id.to_owned(), span);
    }

    /// A tool call ends: `success`, `failure`, `cancelled`.
    pub(super) fn tool_ended(&mut self, id: &str, outcome: &str) {
        if let Some(span) = self.tools.remove(id) {
            close(span, "ahp.tool.outcome", outcome, outcome != "success");
        }
    }

    /// The runtime asks permission for tool call `id` (kind `kind`).
    pub(super) fn permission_asked(&mut self, id: &str, kind: &str) {
        let span = info_span!(
            parent: &self.turn,
            "permission",
            otel.status_code = Empty,
            gen_ai.tool.call.id = id,
            ahp.permission.kind = kind,
            ahp.permission.outcome = Empty,
        );
        self.permissions.insert(id.to_owned(), span);
    }

    pub(super) fn permission_answered(&mut self, id: &str, approved: bool) {
        if let Some(span) = self.permissions.remove(id) {
            let outcome = if approved { "approved" } else { "denied" };
            close(span, "ahp.permission.outcome", outcome, false);
        }
    }

    /// The runtime asks the user (input request `id`).
    pub(super) fn input_asked(&mut self, id: &str) {
        let span = info_span!(
            parent: &self.turn,
            "input",
            otel.status_code = Empty,
            ahp.input.id = id,
            ahp.input.outcome = Empty,
        );
        self.inputs.insert(id.to_owned(), span);
    }

    pub(super) fn input_answered(&mut self, id: &str, answer: &UserInputAnswer) {
        if let Some(span) = self.inputs.remove(id) {
            let outcome = match answer {
                UserInputAnswer::Answer { .. } => "answered",
                UserInputAnswer::NoResponse => "no_response",
            };
            close(span, "ahp.input.outcome", outcome, false);
        }
    }

    /// Ends the turn's span, and every child still open (its thing was
    /// left waiting by the turn's end). A runtime error makes a turn that
    /// ended otherwise an error.
    pub(super) fn end(mut self, ending: Ending) {
        let waiting = self
            .tools
            .drain()
            .chain(self.permissions.drain())
            .chain(self.inputs.drain());
        for (_, span) in waiting {
            // Whichever of these the span has.
            for field in [
                "ahp.tool.outcome",
                "ahp.permission.outcome",
                "ahp.input.outcome",
            ] {
                span.record(field, "turn_ended");
            }
        }
        let turn = &self.turn;
        turn.record("gen_ai.usage.input_tokens", self.input_tokens);
        turn.record("gen_ai.usage.output_tokens", self.output_tokens);
        turn.record("gen_ai.response.model", self.response_model.as_deref());
        let ending = match (&self.runtime_error, ending) {
            (Some(kind), Ending::Completed) => Ending::Error(kind),
            (_, e) => e,
        };
        let outcome = match ending {
            Ending::Completed => "completed",
            Ending::Cancelled => "cancelled",
            Ending::Error(kind) => {
                self.turn.record("error.type", kind);
                "error"
            }
        };
        close(self.turn, "ahp.turn.outcome", outcome, outcome == "error");
    }
}

/// Records how a span's thing ended and lets go of it: the span ends once
/// no other handle (a transform in flight) and no open child is left.
fn close(span: Span, field: &str, outcome: &str, failed: bool) {
    span.record(field, outcome);
    span.record("otel.status_code", if failed { "ERROR" } else { "OK" });
    drop(span);
}
