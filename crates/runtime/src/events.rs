//! The runtime's events (`session.event` notifications), typed from its
//! schema (`schema.rs`). An event is either understood whole or not passed
//! on: a missing required field or a wrong type is a [`Mismatch`], never an
//! empty value; a type the schema does not name is one too; a type the
//! schema names but the bridge does not act on is [`RuntimeEvent::Other`].

use serde::Deserialize;
use serde_json::Value;

use super::mismatch::{Mismatch, MismatchKind};
use super::schema as s;

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
    /// An event type of the runtime's schema the bridge does not act on.
    Other(String),
}

/// An MCP server's state as the runtime reports it: `status` is one of
/// `connected`, `failed`, `needs-auth`, `pending`, `disabled`, `stopped`,
/// `not_configured` (passed on as text: a new one is not a mismatch).
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerStatus {
    pub name: String,
    pub status: String,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    pub model: Option<String>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cache_read_tokens: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PermissionRequest {
    pub request_id: String,
    pub kind: String,
    pub tool_name: Option<String>,
    pub tool_call_id: Option<String>,
    pub intention: Option<String>,
    pub full_command_text: Option<String>,
    pub args: Option<Value>,
    /// The `permissionRequest` object as the runtime sent it, every field
    /// (the schema types only those above): what the operator's Rego
    /// policy decides on (`input.request`).
    pub raw: Value,
}

/// A `session.event` as it arrived: the runtime session it is of, the
/// event's id (absent from some test fakes' events; then every one is new)
/// and the event.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrived {
    pub session_id: String,
    pub id: Option<String>,
    pub event: RuntimeEvent,
}

/// `session.event`'s params, before the data is typed by its event type.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventEnvelope {
    session_id: String,
    event: Raw,
}

#[derive(Deserialize)]
struct Raw {
    /// Unique to the event: how a repeat is known ([`super::repeats`]).
    #[serde(default)]
    id: Option<String>,
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    data: Value,
}

/// The data of an event of type `ty`, typed, or the mismatch.
fn data<T: serde::de::DeserializeOwned>(ty: &str, data: Value) -> Result<T, Mismatch> {
    serde_path_to_error::deserialize(data).map_err(|e| Mismatch::parse(ty, e))
}

fn count(n: Option<u64>) -> Option<i64> {
    n.and_then(|n| i64::try_from(n).ok())
}

/// An event type the runtime's schema names, or one of the runtime's own
/// namespaces it sends without naming them (`model.*`).
fn known(ty: &str) -> bool {
    s::EVENT_TYPES.binary_search(&ty).is_ok()
        || s::OBSERVED_EVENT_PREFIXES.iter().any(|p| ty.starts_with(p))
}

impl RuntimeEvent {
    /// Types `session.event` params. The socket boundary: only the
    /// connection (and tests) hand it JSON.
    pub fn parse<'de, P>(params: P) -> Result<Arrived, Mismatch>
    where
        P: serde::Deserializer<'de, Error = serde_json::Error>,
    {
        let EventEnvelope { session_id, event } = serde_path_to_error::deserialize(params)
            .map_err(|e| Mismatch::parse(SESSION_EVENT, e))?;
        let Raw { id, ty, data: d } = event;
        let t = ty.as_str();
        let event = match t {
            "user.message" => Self::UserMessage,
            "session.idle" => Self::Idle,
            "assistant.message_delta" => {
                let d: s::AssistantMessageDeltaData = data(t, d)?;
                Self::MessageDelta {
                    message_id: d.message_id,
                    delta: d.delta_content,
                }
            }
            "assistant.message" => {
                let d: s::AssistantMessageData = data(t, d)?;
                Self::Message {
                    message_id: d.message_id,
                    content: d.content,
                }
            }
            "assistant.reasoning_delta" => {
                let d: s::AssistantReasoningDeltaData = data(t, d)?;
                Self::ReasoningDelta {
                    reasoning_id: d.reasoning_id,
                    delta: d.delta_content,
                }
            }
            "assistant.reasoning" => {
                let d: s::AssistantReasoningData = data(t, d)?;
                Self::Reasoning {
                    reasoning_id: d.reasoning_id,
                    content: d.content,
                }
            }
            "assistant.usage" => {
                let d: s::AssistantUsageData = data(t, d)?;
                Self::Usage(Usage {
                    model: Some(d.model),
                    input_tokens: count(d.input_tokens),
                    output_tokens: count(d.output_tokens),
                    cache_read_tokens: count(d.cache_read_tokens),
                })
            }
            "tool.execution_start" => {
                let d: s::ToolExecutionStartData = data(t, d)?;
                Self::ToolStarted {
                    tool_call_id: d.tool_call_id,
                    tool_name: d.tool_name,
                    arguments: d.arguments.unwrap_or(Value::Null),
                }
            }
            "tool.execution_complete" => {
                let d: s::ToolExecutionCompleteData = data(t, d)?;
                Self::ToolCompleted {
                    tool_call_id: d.tool_call_id,
                    success: d.success,
                    // A tool may complete without a result (it failed).
                    output: d.result.map(|r| r.content).unwrap_or_default(),
                }
            }
            "permission.requested" => {
                let raw = d.get("permissionRequest").cloned().unwrap_or(Value::Null);
                let d: s::PermissionRequestedData = data(t, d)?;
                let p = d.permission_request;
                Self::PermissionRequested(PermissionRequest {
                    request_id: d.request_id,
                    kind: p.kind,
                    tool_name: p.tool_name,
                    tool_call_id: p.tool_call_id,
                    intention: p.intention,
                    full_command_text: p.full_command_text,
                    args: p.args,
                    raw,
                })
            }
            "external_tool.requested" => {
                let d: s::ExternalToolRequestedData = data(t, d)?;
                Self::ExternalToolRequested {
                    request_id: d.request_id,
                    tool_call_id: d.tool_call_id,
                    tool_name: d.tool_name,
                    arguments: d.arguments.unwrap_or(Value::Null),
                }
            }
            "session.error" => {
                let d: s::ErrorData = data(t, d)?;
                Self::Error {
                    error_type: d.error_type,
                    message: d.message,
                }
            }
            "session.warning" => {
                let d: s::WarningData = data(t, d)?;
                Self::Warning {
                    warning_type: d.warning_type,
                }
            }
            "session.mcp_servers_loaded" => {
                let d: s::McpServersLoadedData = data(t, d)?;
                Self::McpServers(
                    d.servers
                        .into_iter()
                        .map(|s| McpServerStatus {
                            name: s.name,
                            status: s.status,
                            error: s.error,
                        })
                        .collect(),
                )
            }
            "session.mcp_server_status_changed" => {
                let d: s::McpServerStatusChangedData = data(t, d)?;
                Self::McpServers(vec![McpServerStatus {
                    name: d.server_name,
                    status: d.status,
                    error: d.error,
                }])
            }
            other if known(other) => Self::Other(ty),
            _ => {
                return Err(Mismatch::new(
                    MismatchKind::UnknownEvent,
                    t,
                    "an event type the runtime's schema does not name",
                ))
            }
        };
        Ok(Arrived {
            session_id,
            id,
            event,
        })
    }
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
