//! How a runtime event becomes AHP chat actions: a pure mapping. The mapper
//! remembers, per turn, which response parts and tool calls it has opened so
//! that streamed deltas and final messages never duplicate each other.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::runtime::wire::RuntimeEvent;

/// The two streams of a response (the answer, the reasoning) in AHP.
#[derive(Clone, Copy)]
enum Stream {
    Answer,
    Reasoning,
}

impl Stream {
    fn part_kind(self) -> &'static str {
        match self {
            Self::Answer => "markdown",
            Self::Reasoning => "reasoning",
        }
    }
    fn delta_action(self) -> &'static str {
        match self {
            Self::Answer => "chat/delta",
            Self::Reasoning => "chat/reasoning",
        }
    }
}

/// Per-turn memory of the mapping.
#[derive(Debug, Default)]
pub struct TurnMapper {
    pub turn_id: String,
    parts: HashSet<String>,
    streamed: HashSet<String>,
    tools: HashSet<String>,
    completed: HashSet<String>,
    pub ended: bool,
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl TurnMapper {
    pub fn new(turn_id: impl Into<String>) -> Self {
        Self {
            turn_id: turn_id.into(),
            ..Self::default()
        }
    }

    /// Opens a tool call: `chat/toolCallStart` then `chat/toolCallReady`;
    /// without `confirmed` it waits for the client's confirmation.
    pub fn open_tool(
        &mut self,
        id: &str,
        name: &str,
        input: &Value,
        contributor: Option<Value>,
        confirmed: Option<&str>,
        message: &str,
    ) -> Vec<Value> {
        if !self.tools.insert(id.to_owned()) {
            return vec![];
        }
        let mut start = json!({"type": "chat/toolCallStart", "turnId": self.turn_id, "toolCallId": id, "toolName": name, "displayName": name});
        let mut ready = json!({"type": "chat/toolCallReady", "turnId": self.turn_id, "toolCallId": id, "invocationMessage": message, "toolInput": text(input)});
        if let Some(c) = contributor {
            start["contributor"] = c.clone();
            ready["contributor"] = c;
        }
        if let Some(c) = confirmed {
            ready["confirmed"] = json!(c);
        }
        vec![start, ready]
    }

    /// Asks the client to confirm a tool call. The runtime announces its own
    /// tools (`tool.execution_start`) before asking permission, so an open call
    /// goes back to pending confirmation with one `chat/toolCallReady`.
    pub fn ask_confirmation(
        &mut self,
        id: &str,
        name: &str,
        input: &Value,
        message: &str,
    ) -> Vec<Value> {
        if self.completed.contains(id) {
            return vec![];
        }
        if !self.tools.contains(id) {
            return self.open_tool(id, name, input, None, None, message);
        }
        vec![
            json!({"type": "chat/toolCallReady", "turnId": self.turn_id, "toolCallId": id, "invocationMessage": message, "toolInput": text(input)}),
        ]
    }

    /// Ends a tool call unless it already ended.
    pub fn complete_tool(
        &mut self,
        id: &str,
        success: bool,
        output: &str,
        name: &str,
    ) -> Vec<Value> {
        if !self.completed.insert(id.to_owned()) {
            return vec![];
        }
        let past = if success {
            format!("Ran {name}")
        } else {
            format!("{name} failed")
        };
        vec![
            json!({"type": "chat/toolCallComplete", "turnId": self.turn_id, "toolCallId": id,
            "result": {"success": success, "pastTenseMessage": past, "content": [{"type": "text", "text": output}]}}),
        ]
    }

    /// Marks a tool call as completed by its client (the runtime's own
    /// completion event for it must not complete it again).
    pub fn mark_completed(&mut self, id: &str) {
        self.completed.insert(id.to_owned());
    }

    fn part(&mut self, kind: &str, id: &str, content: &str) -> Option<Value> {
        self.parts.insert(id.to_owned()).then(|| {
            json!({"type": "chat/responsePart", "turnId": self.turn_id, "part": {"kind": kind, "id": id, "content": content}})
        })
    }

    /// Ends the turn with an error (once).
    pub fn error(&mut self, error_type: &str, message: &str, duration_ms: i64) -> Vec<Value> {
        if std::mem::replace(&mut self.ended, true) {
            return vec![];
        }
        vec![
            json!({"type": "chat/error", "turnId": self.turn_id, "duration": duration_ms,
            "part": {"error": {"errorType": error_type, "message": message}}}),
        ]
    }

    fn delta(&mut self, stream: Stream, id: &str, delta: &str) -> Vec<Value> {
        let mut out: Vec<Value> = self.part(stream.part_kind(), id, "").into_iter().collect();
        self.streamed.insert(id.to_owned());
        out.push(json!({"type": stream.delta_action(), "turnId": self.turn_id, "partId": id, "content": delta}));
        out
    }

    /// A whole message: a part of its own unless it was streamed already.
    fn whole(&mut self, stream: Stream, id: &str, content: &str) -> Vec<Value> {
        if self.streamed.contains(id) || content.is_empty() {
            return vec![];
        }
        self.part(stream.part_kind(), id, content)
            .into_iter()
            .collect()
    }

    /// Maps one runtime event. Events that mean nothing to a chat map to nothing.
    pub fn map(&mut self, event: &RuntimeEvent, duration_ms: i64) -> Vec<Value> {
        match event {
            RuntimeEvent::MessageDelta { message_id, delta } => {
                self.delta(Stream::Answer, message_id, delta)
            }
            RuntimeEvent::ReasoningDelta {
                reasoning_id,
                delta,
            } => self.delta(Stream::Reasoning, reasoning_id, delta),
            RuntimeEvent::Message {
                message_id,
                content,
            } => self.whole(Stream::Answer, message_id, content),
            RuntimeEvent::Reasoning {
                reasoning_id,
                content,
            } => self.whole(Stream::Reasoning, reasoning_id, content),
            RuntimeEvent::Usage(u) => {
                let mut usage = json!({});
                for (key, n) in [
                    ("inputTokens", u.input_tokens),
                    ("outputTokens", u.output_tokens),
                    ("cacheReadTokens", u.cache_read_tokens),
                ] {
                    if let Some(n) = n {
                        usage[key] = json!(n);
                    }
                }
                if let Some(m) = &u.model {
                    usage["model"] = json!(m);
                }
                vec![json!({"type": "chat/usage", "turnId": self.turn_id, "usage": usage})]
            }
            RuntimeEvent::ToolStarted {
                tool_call_id,
                tool_name,
                arguments,
            } => self.open_tool(
                tool_call_id,
                tool_name,
                arguments,
                None,
                Some("not-needed"),
                &format!("Running {tool_name}"),
            ),
            RuntimeEvent::ToolCompleted {
                tool_call_id,
                tool_name,
                success,
                output,
            } => self.complete_tool(
                tool_call_id,
                *success,
                output,
                tool_name.as_deref().unwrap_or("tool"),
            ),
            RuntimeEvent::Error {
                error_type,
                message,
            } => self.error(error_type, message, duration_ms),
            RuntimeEvent::Idle if !std::mem::replace(&mut self.ended, true) => {
                vec![
                    json!({"type": "chat/turnComplete", "turnId": self.turn_id, "duration": duration_ms}),
                ]
            }
            _ => vec![],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_types::actions::StateAction;

    fn event(ty: &str, data: Value) -> RuntimeEvent {
        RuntimeEvent::parse(&json!({"sessionId": "s", "event": {"type": ty, "data": data}})).1
    }

    fn types(v: &[Value]) -> Vec<String> {
        v.iter()
            .map(|a| a["type"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn table() {
        // (event type, data, expected action types)
        let table: Vec<(&str, Value, Vec<&str>)> = vec![
            (
                "assistant.message_delta",
                json!({"messageId": "m1", "deltaContent": "He"}),
                vec!["chat/responsePart", "chat/delta"],
            ),
            (
                "assistant.message_delta",
                json!({"messageId": "m1", "deltaContent": "llo"}),
                vec!["chat/delta"],
            ),
            (
                "assistant.message",
                json!({"messageId": "m1", "content": "Hello"}),
                vec![],
            ),
            (
                "assistant.message",
                json!({"messageId": "m2", "content": "Whole"}),
                vec!["chat/responsePart"],
            ),
            (
                "assistant.reasoning_delta",
                json!({"reasoningId": "r1", "deltaContent": "hmm"}),
                vec!["chat/responsePart", "chat/reasoning"],
            ),
            (
                "assistant.usage",
                json!({"model": "gpt-4.1", "inputTokens": 10, "outputTokens": 2}),
                vec!["chat/usage"],
            ),
            (
                "tool.execution_start",
                json!({"toolCallId": "c1", "toolName": "view", "arguments": {"path": "."}}),
                vec!["chat/toolCallStart", "chat/toolCallReady"],
            ),
            (
                "tool.execution_complete",
                json!({"toolCallId": "c1", "success": true, "result": {"content": "ok"}}),
                vec!["chat/toolCallComplete"],
            ),
            (
                "tool.execution_complete",
                json!({"toolCallId": "c1", "success": true}),
                vec![],
            ),
            ("some.future.event", json!({}), vec![]),
            (
                "session.error",
                json!({"errorType": "model", "message": "500"}),
                vec!["chat/error"],
            ),
            ("session.idle", json!({}), vec![]),
        ];
        let mut m = TurnMapper::new("t1");
        for (ty, data, want) in table {
            let got = m.map(&event(ty, data.clone()), 5);
            assert_eq!(types(&got), want, "{ty} {data}");
            // Every action is a valid AHP action.
            for a in got {
                serde_json::from_value::<StateAction>(a.clone())
                    .unwrap_or_else(|e| panic!("{a}: {e}"));
            }
        }
    }

    #[test]
    fn idle_completes_a_turn_once() {
        let mut m = TurnMapper::new("t");
        assert_eq!(
            types(&m.map(&RuntimeEvent::Idle, 1)),
            vec!["chat/turnComplete"]
        );
        assert!(m.map(&RuntimeEvent::Idle, 1).is_empty());
    }

    /// Applies actions with the official reducer, failing on any the state refuses.
    fn apply(chat: &mut ahp_types::state::ChatState, actions: Vec<Value>) {
        use ahp::reducers::{apply_action_to_chat, ReduceOutcome};
        for a in actions {
            let typed: StateAction = serde_json::from_value(a.clone()).unwrap();
            assert_eq!(
                apply_action_to_chat(chat, &typed),
                ReduceOutcome::Applied,
                "{a}"
            );
        }
    }

    fn tool_status(chat: &ahp_types::state::ChatState, id: &str) -> String {
        let v = serde_json::to_value(chat).unwrap();
        let parts = v["activeTurn"]["responseParts"].as_array().unwrap().clone();
        let tc = parts
            .iter()
            .find(|p| p["toolCall"]["toolCallId"] == id)
            .unwrap_or_else(|| panic!("no tool call {id} in {v}"));
        tc["toolCall"]["status"].as_str().unwrap().to_owned()
    }

    #[test]
    fn a_running_runtime_tool_goes_back_to_pending_confirmation() {
        let mut chat: ahp_types::state::ChatState = serde_json::from_value(json!({
            "resource": "ahp-chat:/x", "title": "Chat", "status": 1,
            "modifiedAt": "2026-01-01T00:00:00Z", "turns": []}))
        .unwrap();
        apply(
            &mut chat,
            vec![
                json!({"type": "chat/turnStarted", "turnId": "t", "startedAt": "2026-01-01T00:00:00Z",
                "message": {"text": "go", "origin": {"kind": "user"}}}),
            ],
        );
        let mut m = TurnMapper::new("t");
        let start = json!({"toolCallId": "c", "toolName": "bash", "arguments": {"command": "ls"}});
        apply(&mut chat, m.map(&event("tool.execution_start", start), 1));
        assert_eq!(tool_status(&chat, "c"), "running");
        let ask = m.ask_confirmation("c", "bash", &json!("ls"), "Allow shell: ls");
        assert_eq!(types(&ask), vec!["chat/toolCallReady"]);
        apply(&mut chat, ask);
        assert_eq!(tool_status(&chat, "c"), "pending-confirmation");
        // A permission for a call never announced opens it, pending.
        let fresh = m.ask_confirmation("d", "write", &json!({}), "Allow write");
        assert_eq!(
            types(&fresh),
            vec!["chat/toolCallStart", "chat/toolCallReady"]
        );
        apply(&mut chat, fresh);
        assert_eq!(tool_status(&chat, "d"), "pending-confirmation");
    }
}
