//! The runtime's wire, typed: the methods we call and their params, the
//! events it streams (`session.event`), the requests it makes of us and our
//! answers to them. Parsed once, here; nothing past this file matches the
//! runtime's strings.

use std::collections::BTreeMap;

use super::customizations::RuntimeCustomizations;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Methods we call on the runtime.
pub mod method {
    pub const CONNECT: &str = "connect";
    pub const PING: &str = "ping";
    pub const SESSION_CREATE: &str = "session.create";
    pub const SESSION_RESUME: &str = "session.resume";
    pub const SESSION_DESTROY: &str = "session.destroy";
    pub const SESSION_SEND: &str = "session.send";
    pub const SESSION_ABORT: &str = "session.abort";
    pub const ANSWER_PERMISSION: &str = "session.permissions.handlePendingPermissionRequest";
    pub const ANSWER_TOOL_CALL: &str = "session.tools.handlePendingToolCall";
    /// Switches a session's model; the runtime re-renders the system prompt.
    pub const MODEL_SWITCH: &str = "session.model.switchTo";
    pub const AGENT_SELECT: &str = "session.agent.select";
    pub const AGENT_DESELECT: &str = "session.agent.deselect";
    /// Gives a live session GitHub credentials.
    pub const SET_GITHUB_CREDENTIALS: &str = "session.gitHubAuth.setCredentials";
}

/// The notification that carries events.
pub const SESSION_EVENT: &str = "session.event";

/// One event of a runtime session, as far as the bridge acts on it.
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeEvent {
    /// The runtime took a message and starts working on it.
    UserMessage,
    MessageDelta {
        message_id: String,
        delta: String,
    },
    Message {
        message_id: String,
        content: String,
    },
    ReasoningDelta {
        reasoning_id: String,
        delta: String,
    },
    Reasoning {
        reasoning_id: String,
        content: String,
    },
    Usage(Usage),
    ToolStarted {
        tool_call_id: String,
        tool_name: String,
        arguments: Value,
    },
    ToolCompleted {
        tool_call_id: String,
        tool_name: Option<String>,
        success: bool,
        output: String,
    },
    PermissionRequested(PermissionRequest),
    ExternalToolRequested {
        request_id: String,
        tool_call_id: String,
        tool_name: String,
        arguments: Value,
    },
    Error {
        error_type: String,
        message: String,
    },
    Warning {
        warning_type: String,
    },
    /// The runtime finished everything it was doing for the session.
    Idle,
    /// `session.mcp_servers_loaded` (every server, at the first turn) or
    /// `session.mcp_server_status_changed` (one).
    McpServers(Vec<McpServerStatus>),
    /// An event type the bridge does not act on.
    Other(String),
}

/// An MCP server's state as the runtime reports it: `status` is one of
/// `connected`, `failed`, `needs-auth`, `pending`, `disabled`, `stopped`,
/// `not_configured`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct McpServerStatus {
    #[serde(alias = "serverName")]
    pub name: String,
    pub status: String,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Usage {
    pub model: Option<String>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cache_read_tokens: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PermissionRequest {
    pub request_id: String,
    pub kind: String,
    pub tool_name: Option<String>,
    pub tool_call_id: Option<String>,
    pub intention: Option<String>,
    pub full_command_text: Option<String>,
    pub args: Option<Value>,
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl RuntimeEvent {
    /// Parses `session.event` params: `(sessionId, event)`. Missing fields are
    /// empty rather than fatal: the runtime is trusted, and an event it
    /// shaped differently must not stop the turn.
    pub fn parse(params: &Value) -> (String, Self) {
        let session = params["sessionId"].as_str().unwrap_or_default().to_owned();
        let ty = params
            .pointer("/event/type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let data = &params["event"]["data"];
        let s = |k: &str| data[k].as_str().unwrap_or_default().to_owned();
        let event = match ty {
            "user.message" => Self::UserMessage,
            "assistant.message_delta" => Self::MessageDelta {
                message_id: s("messageId"),
                delta: s("deltaContent"),
            },
            "assistant.message" => Self::Message {
                message_id: s("messageId"),
                content: s("content"),
            },
            "assistant.reasoning_delta" => Self::ReasoningDelta {
                reasoning_id: s("reasoningId"),
                delta: s("deltaContent"),
            },
            "assistant.reasoning" => Self::Reasoning {
                reasoning_id: s("reasoningId"),
                content: s("content"),
            },
            "assistant.usage" => Self::Usage(Usage::deserialize(data).unwrap_or_default()),
            "tool.execution_start" => Self::ToolStarted {
                tool_call_id: s("toolCallId"),
                tool_name: s("toolName"),
                arguments: data.get("arguments").cloned().unwrap_or(Value::Null),
            },
            "tool.execution_complete" => Self::ToolCompleted {
                tool_call_id: s("toolCallId"),
                tool_name: data["toolName"].as_str().map(String::from),
                success: data["success"].as_bool().unwrap_or(false),
                output: data
                    .pointer("/result/content")
                    .map(text)
                    .unwrap_or_default(),
            },
            "permission.requested" => {
                let mut p =
                    PermissionRequest::deserialize(&data["permissionRequest"]).unwrap_or_default();
                p.request_id = s("requestId");
                if p.kind.is_empty() {
                    p.kind = "unknown".into();
                }
                Self::PermissionRequested(p)
            }
            "external_tool.requested" => Self::ExternalToolRequested {
                request_id: s("requestId"),
                tool_call_id: s("toolCallId"),
                tool_name: s("toolName"),
                arguments: data.get("arguments").cloned().unwrap_or(Value::Null),
            },
            "session.error" => Self::Error {
                error_type: data["errorType"].as_str().unwrap_or("error").to_owned(),
                message: s("message"),
            },
            "session.warning" => Self::Warning {
                warning_type: s("warningType"),
            },
            "session.idle" => Self::Idle,
            "session.mcp_servers_loaded" => Self::McpServers(
                Vec::<McpServerStatus>::deserialize(&data["servers"]).unwrap_or_default(),
            ),
            "session.mcp_server_status_changed" => {
                Self::McpServers(McpServerStatus::deserialize(data).into_iter().collect())
            }
            other => Self::Other(other.to_owned()),
        };
        (session, event)
    }
}

/// A request the runtime makes of us.
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeRequest {
    /// `systemMessage.transform`: the content of each registered section.
    Transform {
        session_id: String,
        sections: BTreeMap<String, String>,
    },
    /// `userInput.request`: the agent asks the user.
    UserInput {
        session_id: String,
        question: Option<String>,
        choices: Vec<String>,
        allow_freeform: Option<bool>,
    },
    /// `hooks.invoke` (only with `hooks: true`): nothing to add.
    Hooks,
}

impl RuntimeRequest {
    /// Recognises a request; `None` for methods the bridge does not support.
    pub fn parse(method: &str, params: &Value) -> Option<Self> {
        let session_id = params["sessionId"].as_str().unwrap_or_default().to_owned();
        Some(match method {
            "systemMessage.transform" => Self::Transform {
                session_id,
                sections: params["sections"]
                    .as_object()
                    .map(|o| {
                        o.iter()
                            .filter_map(|(k, v)| {
                                v["content"].as_str().map(|c| (k.clone(), c.to_owned()))
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            "userInput.request" => Self::UserInput {
                session_id,
                question: params["question"].as_str().map(String::from),
                choices: params["choices"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|c| c.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
                allow_freeform: params["allowFreeform"].as_bool(),
            },
            "hooks.invoke" => Self::Hooks,
            _ => return None,
        })
    }
}

/// Our answer to a runtime request.
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeAnswer {
    /// The content for every section asked.
    Transformed(BTreeMap<String, String>),
    UserInput(UserInputAnswer),
    Hooks,
}

#[derive(Debug, Clone, PartialEq)]
pub enum UserInputAnswer {
    Answer {
        text: String,
        was_freeform: bool,
    },
    /// Declined, cancelled, or nobody there to ask.
    NoResponse,
}

impl RuntimeAnswer {
    pub fn to_json(&self) -> Value {
        match self {
            Self::Transformed(sections) => {
                let sections: Map<String, Value> = sections
                    .iter()
                    .map(|(k, v)| (k.clone(), json!({"content": v})))
                    .collect();
                json!({"sections": sections})
            }
            Self::UserInput(UserInputAnswer::Answer { text, was_freeform }) => {
                json!({"answer": text, "wasFreeform": was_freeform})
            }
            Self::UserInput(UserInputAnswer::NoResponse) => json!({"noResponse": true}),
            Self::Hooks => json!({"output": {}}),
        }
    }
}

/// How the runtime renders one section (`systemMessage.sections.ID.action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SectionAction {
    /// Rendered, then handed to us (`systemMessage.transform`).
    Transform,
    Append,
    Prepend,
    Replace,
    Remove,
}

/// One section's entry in the `systemMessage` config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SectionOverride {
    pub action: SectionAction,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// The `systemMessage` config of `session.create` / `session.resume`, in
/// `customize` mode (without it the runtime asks for no transform at all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemMessage {
    pub sections: BTreeMap<String, SectionOverride>,
}

impl SystemMessage {
    pub fn to_json(&self) -> Value {
        json!({"mode": "customize", "sections": self.sections})
    }
}

/// A tool the session offers the model, run by a client (an "external tool").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalTool {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// A BYOK model provider for a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelProvider {
    pub kind: String,
    pub base_url: String,
    pub api_key: Option<String>,
}

/// A credential: carried to the runtime, never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// What `session.create` and `session.resume` fix for a runtime session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    pub session_id: String,
    pub model: String,
    pub working_directory: String,
    pub tools: Vec<ExternalTool>,
    pub provider: Option<ModelProvider>,
    /// The `systemMessage` config; `None` leaves the runtime's default prompt.
    pub system_message: Option<SystemMessage>,
    /// A GitHub token for the runtime's sign-in (only without a provider:
    /// the runtime refuses both).
    pub github_token: Option<Secret>,
    /// Skills, agents, MCP servers, rules (empty: none are sent).
    pub customizations: RuntimeCustomizations,
}

impl SessionConfig {
    pub fn to_params(&self) -> Value {
        let tools: Vec<Value> = self
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
            .collect();
        let mut p = json!({
            "sessionId": self.session_id, "model": self.model, "clientName": "ahp-copilot-bridge",
            "streaming": true, "workingDirectory": self.working_directory,
            "requestPermission": true, "requestUserInput": true, "tools": tools,
        });
        if let Some(pr) = &self.provider {
            let mut prov = json!({"type": pr.kind, "baseUrl": pr.base_url});
            if let Some(k) = &pr.api_key {
                prov["apiKey"] = json!(k);
            }
            p["provider"] = prov;
        }
        if let Some(sm) = &self.system_message {
            p["systemMessage"] = sm.to_json();
        }
        if let (None, Some(t)) = (&self.provider, &self.github_token) {
            p["gitHubToken"] = json!(t.0);
        }
        self.customizations.apply_to(&mut p);
        p
    }
}

pub fn session_ref(session_id: &str) -> Value {
    json!({"sessionId": session_id})
}

pub fn send_params(session_id: &str, prompt: &str) -> Value {
    json!({"sessionId": session_id, "prompt": prompt})
}

/// Hands a session a GitHub token while it lives.
pub fn github_credentials_params(session_id: &str, token: &Secret) -> Value {
    json!({"sessionId": session_id, "credentials": {"type": "token", "host": "https://github.com", "token": token.0}})
}

/// A message injected into the running agent loop (steering), not queued.
pub fn steer_params(session_id: &str, prompt: &str) -> Value {
    json!({"sessionId": session_id, "prompt": prompt, "mode": "immediate"})
}

pub fn model_switch_params(session_id: &str, model: &str) -> Value {
    json!({"sessionId": session_id, "modelId": model})
}

/// How a client tool call ended, for the runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub success: bool,
    pub text: String,
    pub error: Option<Value>,
}

impl ToolOutcome {
    pub fn failed(why: &str) -> Self {
        Self {
            success: false,
            text: why.to_owned(),
            error: Some(json!(why)),
        }
    }
}

/// Params of `session.tools.handlePendingToolCall`.
pub fn tool_answer(session_id: &str, request_id: &str, outcome: &ToolOutcome) -> Value {
    let mut result = json!({"textResultForLlm": outcome.text,
        "resultType": if outcome.success { "success" } else { "failure" }});
    if !outcome.success {
        result["error"] = outcome
            .error
            .clone()
            .unwrap_or_else(|| json!("the tool failed"));
    }
    json!({"sessionId": session_id, "requestId": request_id, "result": result})
}

/// Params of `session.permissions.handlePendingPermissionRequest`.
pub fn permission_answer(session_id: &str, request_id: &str, approved: bool) -> Value {
    let kind = if approved { "approve-once" } else { "reject" };
    json!({"sessionId": session_id, "requestId": request_id, "result": {"kind": kind}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(ty: &str, data: Value) -> RuntimeEvent {
        let (s, e) = RuntimeEvent::parse(
            &json!({"sessionId": "s1", "event": {"id": "e", "type": ty, "data": data}}),
        );
        assert_eq!(s, "s1");
        e
    }

    #[test]
    fn events_parse() {
        assert_eq!(
            event(
                "assistant.message_delta",
                json!({"messageId": "m", "deltaContent": "He"})
            ),
            RuntimeEvent::MessageDelta {
                message_id: "m".into(),
                delta: "He".into()
            }
        );
        assert_eq!(
            event(
                "tool.execution_complete",
                json!({"toolCallId": "c", "success": true, "result": {"content": "ok"}})
            ),
            RuntimeEvent::ToolCompleted {
                tool_call_id: "c".into(),
                tool_name: None,
                success: true,
                output: "ok".into()
            }
        );
        let RuntimeEvent::PermissionRequested(p) = event(
            "permission.requested",
            json!({"requestId": "r", "permissionRequest": {"kind": "shell", "toolCallId": "c", "fullCommandText": "ls"}}),
        ) else {
            panic!("a permission request")
        };
        assert_eq!((p.request_id.as_str(), p.kind.as_str()), ("r", "shell"));
        assert_eq!(p.full_command_text.as_deref(), Some("ls"));
        assert_eq!(
            event("session.error", json!({})),
            RuntimeEvent::Error {
                error_type: "error".into(),
                message: String::new()
            }
        );
        assert_eq!(
            event("x.future", json!({})),
            RuntimeEvent::Other("x.future".into())
        );
    }

    #[test]
    fn requests_and_answers() {
        let r = RuntimeRequest::parse(
            "systemMessage.transform",
            &json!({"sessionId": "s", "sections": {"tone": {"content": "T"}, "bad": {"content": 1}}}),
        )
        .unwrap();
        let RuntimeRequest::Transform { sections, .. } = r else {
            panic!("a transform")
        };
        assert_eq!(sections.len(), 1);
        assert_eq!(
            RuntimeAnswer::Transformed(sections).to_json(),
            json!({"sections": {"tone": {"content": "T"}}})
        );
        assert_eq!(
            RuntimeRequest::parse("exitPlanMode.request", &json!({})),
            None
        );
        assert_eq!(
            RuntimeAnswer::UserInput(UserInputAnswer::NoResponse).to_json(),
            json!({"noResponse": true})
        );
        let failed = tool_answer("s", "r", &ToolOutcome::failed("gone"));
        assert_eq!(failed["result"]["resultType"], "failure");
        assert_eq!(failed["result"]["error"], "gone");
        assert_eq!(
            permission_answer("s", "r", false)["result"]["kind"],
            "reject"
        );
    }
}
