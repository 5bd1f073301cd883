//! What an SDK app sends the runtime, typed for the parts the bridge checks
//! (the SDKs' `session.create` / `session.resume`, `connect`, and the
//! transform callback's answer), as the official SDKs send them
//! (docs/sdk.md). Everything else of a message is passed on as it came.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The envelope of any JSON-RPC message, borrowed from its frame: enough to
/// route it (is it a request, an answer, which method) without reading the
/// rest.
#[derive(Debug, Deserialize)]
pub struct Envelope<'a> {
    #[serde(borrow, default)]
    pub id: Option<&'a RawValue>,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(borrow, default)]
    pub params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub error: Option<&'a RawValue>,
}

/// `connect {token?}`: the only field the bridge reads.
#[derive(Debug, Default, Deserialize)]
pub struct AppConnectParams {
    #[serde(default)]
    pub token: Option<String>,
}

/// The fields of `session.create` / `session.resume` the policy looks at.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppSessionParams {
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub system_message: Option<AppSystemMessage>,
    #[serde(default)]
    pub mcp_servers: Option<BTreeMap<String, AppMcpServer>>,
    #[serde(default)]
    pub custom_agents: Option<Vec<AppAgent>>,
}

/// `systemMessage`: `append` (the default), `replace` or `customize`.
#[derive(Debug, Default, Deserialize)]
pub struct AppSystemMessage {
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub sections: Option<BTreeMap<String, AppSection>>,
}

/// One section's override: `replace | remove | append | prepend` with
/// optional content, or `transform | preserve` without.
#[derive(Debug, Clone, Deserialize)]
pub struct AppSection {
    pub action: String,
    #[serde(default)]
    pub content: Option<String>,
}

/// An MCP server the app asks the runtime to start: a local command or a
/// remote URL.
#[derive(Debug, Clone, Deserialize)]
pub struct AppMcpServer {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
}

/// A custom agent: its prompt reaches the model while it is selected.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppAgent {
    pub name: String,
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub mcp_servers: Option<BTreeMap<String, AppMcpServer>>,
}

/// `systemMessage.transform`'s params and its answer: section id -> text.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TransformSections {
    pub sections: BTreeMap<String, SectionText>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SectionText {
    pub content: String,
}

/// What routes a notification: the session it is about.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AboutSession {
    #[serde(default)]
    pub session_id: Option<String>,
}

/// `session.send`: the prompt an app sends a session (the AHP side shows
/// it as the turn's message).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppSend {
    pub session_id: String,
    pub prompt: String,
}
