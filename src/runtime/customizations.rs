//! What a runtime session is given of the customizations, in the runtime's
//! own `session.create` / `session.resume` fields (observed on the pinned
//! CLI; none of them is remembered across a resume, so every bind sends
//! the whole set).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

/// A custom agent as the runtime's `customAgents` entry takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomAgent {
    pub name: String,
    pub display_name: String,
    pub description: String,
    /// Enters the system message while the agent is selected.
    pub prompt: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disable_model_invocation: bool,
}

/// A stdio MCP server the runtime starts for the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerSpec {
    pub command: String,
    pub args: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// The customization fields of one runtime session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeCustomizations {
    /// Roots holding `<name>/SKILL.md`.
    pub skill_directories: Vec<String>,
    /// Skill names left out of the model's list.
    pub disabled_skills: Vec<String>,
    pub custom_agents: Vec<CustomAgent>,
    pub mcp_servers: BTreeMap<String, McpServerSpec>,
    /// Roots holding `*.instructions.md`.
    pub instruction_directories: Vec<String>,
}

impl RuntimeCustomizations {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Adds the fields to `session.create` / `session.resume` params; adds
    /// nothing when there is nothing, so a session without customizations
    /// is created exactly as before.
    pub fn apply_to(&self, params: &mut Value) {
        let mut set = |key: &str, v: Value| params[key] = v;
        if !self.skill_directories.is_empty() {
            set("skillDirectories", json!(self.skill_directories));
        }
        if !self.disabled_skills.is_empty() {
            set("disabledSkills", json!(self.disabled_skills));
        }
        if !self.custom_agents.is_empty() {
            set("customAgents", json!(self.custom_agents));
        }
        if !self.mcp_servers.is_empty() {
            set("mcpServers", json!(self.mcp_servers));
        }
        if !self.instruction_directories.is_empty() {
            set(
                "instructionDirectories",
                json!(self.instruction_directories),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_added_without_customizations_and_each_field_has_its_wire_name() {
        let mut p = json!({"sessionId": "s"});
        RuntimeCustomizations::default().apply_to(&mut p);
        assert_eq!(p, json!({"sessionId": "s"}));
        let c = RuntimeCustomizations {
            skill_directories: vec!["/s".into()],
            disabled_skills: vec!["beta".into()],
            custom_agents: vec![CustomAgent {
                name: "reviewer".into(),
                display_name: "Reviewer".into(),
                description: "Reviews.".into(),
                prompt: "You review.".into(),
                tools: Some(vec!["view".into()]),
                model: None,
                disable_model_invocation: false,
            }],
            mcp_servers: BTreeMap::from([(
                "echo".into(),
                McpServerSpec {
                    command: "python3".into(),
                    args: vec!["e.py".into()],
                    env: BTreeMap::new(),
                    cwd: None,
                },
            )]),
            instruction_directories: vec!["/i".into()],
        };
        c.apply_to(&mut p);
        assert_eq!(p["skillDirectories"], json!(["/s"]));
        assert_eq!(p["disabledSkills"], json!(["beta"]));
        assert_eq!(p["customAgents"][0]["displayName"], "Reviewer");
        assert!(p["customAgents"][0].get("disableModelInvocation").is_none());
        assert_eq!(
            p["mcpServers"]["echo"],
            json!({"command": "python3", "args": ["e.py"]})
        );
        assert_eq!(p["instructionDirectories"], json!(["/i"]));
    }
}
