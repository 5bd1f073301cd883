//! The calls we make on the runtime, one type per method: its name, its
//! params and what we read of its result. Params in the runtime's published
//! schema are the generated types (`schema.rs`); `session.create`,
//! `session.resume`, `session.destroy`, the permission and tool answers and
//! the credentials call are written here (the schema has no type for the
//! first three; the others are unions of which we send one shape).

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Serialize;

use super::schema as s;
use super::session_config::SessionConfig;

/// A method of the runtime's: its name, its params, the result we read.
pub trait Method {
    const NAME: &'static str;
    type Params: Serialize + Send + Sync + 'static;
    /// `IgnoredAny` where we read nothing (then no answer is a mismatch).
    type Result: DeserializeOwned + Send + 'static;
}

macro_rules! method {
    ($(#[$doc:meta])* $vis:vis $name:ident, $wire:literal, $params:ty, $result:ty) => {
        $(#[$doc])*
        $vis struct $name;
        impl Method for $name {
            const NAME: &'static str = $wire;
            type Params = $params;
            type Result = $result;
        }
    };
}

method!(
    /// The handshake, with the connection token when there is one.
    pub(crate) Connect, "connect", ConnectParams, s::ConnectResult
);
method!(
    /// The handshake of runtimes older than `connect`.
    pub Ping, "ping", s::PingParams, s::PingResult
);
method!(pub SessionCreate, "session.create", SessionConfig, IgnoredAny);
method!(pub SessionResume, "session.resume", SessionConfig, IgnoredAny);
method!(pub SessionDestroy, "session.destroy", SessionRef, IgnoredAny);
method!(
    /// A message queued (`mode` unset) or injected into the running agent
    /// loop (`immediate`: steering).
    pub SessionSend, "session.send", s::SessionSendParams, IgnoredAny
);
method!(
    pub SessionAbort,
    "session.abort",
    s::SessionAbortParams,
    IgnoredAny
);
method!(
    pub AnswerPermission,
    "session.permissions.handlePendingPermissionRequest",
    PermissionAnswer,
    IgnoredAny
);
method!(
    pub AnswerToolCall,
    "session.tools.handlePendingToolCall",
    ToolAnswer,
    IgnoredAny
);
method!(
    /// Switches a session's model; the runtime re-renders the system prompt.
    pub ModelSwitch, "session.model.switchTo", s::ModelSwitchToParams, IgnoredAny
);
method!(
    pub AgentSelect,
    "session.agent.select",
    s::AgentSelectParams,
    IgnoredAny
);
method!(
    pub AgentDeselect,
    "session.agent.deselect",
    s::AgentDeselectParams,
    IgnoredAny
);
method!(
    /// Gives a live session GitHub credentials.
    pub SetGithubCredentials, "session.gitHubAuth.setCredentials", GithubCredentials, IgnoredAny
);

#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct ConnectParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// A session by its id (`session.destroy`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRef {
    pub session_id: String,
}

impl SessionRef {
    pub fn new(session_id: &str) -> Self {
        Self {
            session_id: session_id.to_owned(),
        }
    }
}

pub fn send_params(session_id: &str, prompt: &str) -> s::SessionSendParams {
    s::SessionSendParams {
        session_id: session_id.to_owned(),
        prompt: prompt.to_owned(),
        mode: None,
    }
}

/// A message injected into the running agent loop (steering), not queued.
pub fn steer_params(session_id: &str, prompt: &str) -> s::SessionSendParams {
    s::SessionSendParams {
        mode: Some(s::SendMode::Immediate),
        ..send_params(session_id, prompt)
    }
}

pub fn abort_params(session_id: &str) -> s::SessionAbortParams {
    s::SessionAbortParams {
        session_id: session_id.to_owned(),
    }
}

pub fn model_switch_params(session_id: &str, model: &str) -> s::ModelSwitchToParams {
    s::ModelSwitchToParams {
        session_id: session_id.to_owned(),
        model_id: model.to_owned(),
    }
}

pub fn agent_select_params(session_id: &str, name: &str) -> s::AgentSelectParams {
    s::AgentSelectParams {
        session_id: session_id.to_owned(),
        name: name.to_owned(),
    }
}

pub fn agent_deselect_params(session_id: &str) -> s::AgentDeselectParams {
    s::AgentDeselectParams {
        session_id: session_id.to_owned(),
    }
}

/// `session.permissions.handlePendingPermissionRequest`: approved once, or
/// rejected (two of the schema's `PermissionDecision` kinds).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionAnswer {
    session_id: String,
    request_id: String,
    result: PermissionResult,
}

#[derive(Debug, Clone, Serialize)]
struct PermissionResult {
    kind: &'static str,
}

impl PermissionAnswer {
    pub fn new(session_id: &str, request_id: &str, approved: bool) -> Self {
        Self {
            session_id: session_id.to_owned(),
            request_id: request_id.to_owned(),
            result: PermissionResult {
                kind: if approved { "approve-once" } else { "reject" },
            },
        }
    }
}

/// How a client tool call ended, for the runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub success: bool,
    pub text: String,
    /// Why it failed, as the client said it (any JSON).
    pub error: Option<serde_json::Value>,
}

impl ToolOutcome {
    pub fn failed(why: &str) -> Self {
        Self {
            success: false,
            text: why.to_owned(),
            error: Some(serde_json::Value::String(why.to_owned())),
        }
    }
}

/// `session.tools.handlePendingToolCall`: the schema's expanded result
/// (`ExternalToolTextResultForLlm`), its `error` set when the call failed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnswer {
    session_id: String,
    request_id: String,
    result: ToolResult,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolResult {
    text_result_for_llm: String,
    result_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<serde_json::Value>,
}

impl ToolAnswer {
    pub fn new(session_id: &str, request_id: &str, outcome: &ToolOutcome) -> Self {
        let error = (!outcome.success).then(|| {
            outcome
                .error
                .clone()
                .unwrap_or_else(|| serde_json::Value::String("the tool failed".into()))
        });
        Self {
            session_id: session_id.to_owned(),
            request_id: request_id.to_owned(),
            result: ToolResult {
                text_result_for_llm: outcome.text.clone(),
                result_type: if outcome.success {
                    "success"
                } else {
                    "failure"
                },
                error,
            },
        }
    }
}

/// `session.gitHubAuth.setCredentials` with a token (the schema's
/// `SettableTokenAuthInfo`). The token is never shown by `Debug`.
#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GithubCredentials {
    session_id: String,
    credentials: TokenCredentials,
}

#[derive(Clone, Serialize)]
struct TokenCredentials {
    #[serde(rename = "type")]
    kind: &'static str,
    host: &'static str,
    token: String,
}

impl GithubCredentials {
    pub fn new(session_id: &str, token: &super::session_config::Secret) -> Self {
        Self {
            session_id: session_id.to_owned(),
            credentials: TokenCredentials {
                kind: "token",
                host: "https://github.com",
                token: token.0.clone(),
            },
        }
    }
}

impl std::fmt::Debug for GithubCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GithubCredentials")
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[path = "calls_tests.rs"]
mod tests;
