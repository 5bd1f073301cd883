//! `customization`: one container of customizations that reached a
//! runtime session, or was refused on its way there: where it came from,
//! who published it, the SHA-256 of each piece of text it carries, the MCP
//! servers (and the commands) it starts, and the decision with its reason.

use serde::{Deserialize, Serialize};

use super::record::{Kind, Record};

/// Where a container came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// `[[customizations.directories]]`.
    HostDirectory,
    /// `[[customizations.plugins]]`.
    HostPlugin,
    /// `[customizations.mcp_servers.NAME]`.
    HostMcpServer,
    /// A plugin an active client published.
    ClientPlugin,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HostDirectory => "host-directory",
            Self::HostPlugin => "host-plugin",
            Self::HostMcpServer => "host-mcp-server",
            Self::ClientPlugin => "client-plugin",
        }
    }
}

/// Did it reach the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CustomizationDecision {
    Applied,
    Refused,
}

/// One piece of text the container carries (a skill, an agent, a rule...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildDigest {
    pub kind: String,
    pub name: String,
    /// SHA-256 of the file as read.
    pub sha256: String,
}

/// An MCP server the container has the runtime start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerDigest {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomizationRecord {
    pub time: String,
    /// The AHP session URI.
    pub session: String,
    /// The container's id in the session's customizations.
    pub container: String,
    pub name: String,
    pub source: Source,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    pub children: Vec<ChildDigest>,
    pub mcp_servers: Vec<McpServerDigest>,
    pub decision: CustomizationDecision,
    /// Why it was refused: the policy key or rule, said for an operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Record for CustomizationRecord {
    const KIND: Kind = Kind::Customization;
}

impl CustomizationRecord {
    /// One cell of `audit show`.
    pub fn summary(&self) -> String {
        let who = match (&self.client_id, &self.principal) {
            (Some(c), Some(p)) => format!(" from client {c:?} ({p})"),
            (Some(c), None) => format!(" from client {c:?}"),
            _ => String::new(),
        };
        let decision = match (&self.decision, &self.reason) {
            (CustomizationDecision::Applied, _) => "applied".to_owned(),
            (CustomizationDecision::Refused, Some(r)) => format!("refused: {r}"),
            (CustomizationDecision::Refused, None) => "refused".to_owned(),
        };
        let children: Vec<String> = self
            .children
            .iter()
            .map(|c| {
                format!(
                    "{} {} {}",
                    c.kind,
                    c.name,
                    &c.sha256[..12.min(c.sha256.len())]
                )
            })
            .chain(
                self.mcp_servers
                    .iter()
                    .map(|m| format!("mcp {} ({})", m.name, m.command)),
            )
            .collect();
        format!(
            "{} {:?} ({}){who}: {decision}; {}",
            self.source.as_str(),
            self.name,
            self.container,
            if children.is_empty() {
                "nothing".to_owned()
            } else {
                children.join(", ")
            }
        )
    }
}
