//! What `session.create` and `session.resume` fix for a runtime session, and
//! how it goes on the wire (the runtime's schema has no type for these two;
//! the fields are as observed on the pinned CLI, docs/compatibility.md).

use std::collections::BTreeMap;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::session_customizations::RuntimeCustomizations;

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

impl Serialize for SystemMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("mode", "customize")?;
        m.serialize_entry("sections", &self.sections)?;
        m.end()
    }
}

/// A tool the session offers the model, run by a client (an "external tool").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExternalTool {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments (the client's, passed on as it is).
    pub parameters: Value,
}

/// A BYOK model provider for a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelProvider {
    #[serde(rename = "type")]
    pub kind: String,
    pub base_url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

/// A credential (the bottom's: the upstream AHP side carries them too).
pub use ahp_bridge_base::config::Secret;

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

/// The params of `session.create` / `session.resume`, in one pass.
impl Serialize for SessionConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("sessionId", &self.session_id)?;
        m.serialize_entry("model", &self.model)?;
        m.serialize_entry("clientName", "ahp-copilot-bridge")?;
        m.serialize_entry("streaming", &true)?;
        m.serialize_entry("workingDirectory", &self.working_directory)?;
        m.serialize_entry("requestPermission", &true)?;
        m.serialize_entry("requestUserInput", &true)?;
        m.serialize_entry("tools", &self.tools)?;
        if let Some(p) = &self.provider {
            m.serialize_entry("provider", p)?;
        }
        if let Some(sm) = &self.system_message {
            m.serialize_entry("systemMessage", sm)?;
        }
        if let (None, Some(t)) = (&self.provider, &self.github_token) {
            m.serialize_entry("gitHubToken", &t.0)?;
        }
        self.customizations.serialize_into(&mut m)?;
        m.end()
    }
}
