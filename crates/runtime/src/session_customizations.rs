//! What a runtime session is given of the customizations, in the runtime's
//! own `session.create` / `session.resume` fields (observed on the pinned
//! CLI; none of them is remembered across a resume, so every bind sends
//! the whole set).

use std::collections::BTreeMap;

use serde::ser::SerializeMap;
use serde::Serialize;

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
    pub fn serialize_into<M: SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
        if !self.skill_directories.is_empty() {
            m.serialize_entry("skillDirectories", &self.skill_directories)?;
        }
        if !self.disabled_skills.is_empty() {
            m.serialize_entry("disabledSkills", &self.disabled_skills)?;
        }
        if !self.custom_agents.is_empty() {
            m.serialize_entry("customAgents", &self.custom_agents)?;
        }
        if !self.mcp_servers.is_empty() {
            m.serialize_entry("mcpServers", &self.mcp_servers)?;
        }
        if !self.instruction_directories.is_empty() {
            m.serialize_entry("instructionDirectories", &self.instruction_directories)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    /// The fields as they go on the wire, beside a `sessionId`.
    fn params(c: &RuntimeCustomizations) -> Value {
        struct P<'a>(&'a RuntimeCustomizations);
        impl Serialize for P<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(None)?;
                m.serialize_entry("sessionId", "s")?;
                self.0.serialize_into(&mut m)?;
                m.end()
            }
        }
        serde_json::to_value(P(c)).unwrap()
    }

    #[test]
    fn nothing_is_added_without_customizations_and_each_field_has_its_wire_name() {
        assert_eq!(
            params(&RuntimeCustomizations::default()),
            json!({"sessionId": "s"})
        );
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
        let p = params(&c);
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
