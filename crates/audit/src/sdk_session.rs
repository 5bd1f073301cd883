//! `sdk_session`: what the policy made of an SDK app's `session.create` or
//! `session.resume`: the session, the connection and principal, the
//! sections the app transforms itself, the MCP servers sent on, and the
//! decision with each finding (what, the rule, and whether it was refused or
//! stripped). The text itself is never written; its SHA-256 is.

use serde::{Deserialize, Serialize};

use super::record::{Kind, Record};

/// What became of the app's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SdkDecision {
    /// Sent on as asked (redaction aside).
    Allowed,
    /// Answered with an error; nothing reached the runtime.
    Refused,
    /// Sent on without what the policy does not allow.
    Stripped,
}

/// One finding: what the app asked for and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SdkFinding {
    pub what: String,
    pub rule: String,
    /// `refuse` or `strip`.
    pub action: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SdkSessionRecord {
    pub time: String,
    /// The app's `sessionId`.
    pub session: String,
    /// `session.create` or `session.resume`.
    pub method: String,
    /// `sdk:<connection>`.
    pub client: String,
    pub principal: String,
    pub decision: SdkDecision,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<SdkFinding>,
    /// What redaction cut text from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
    pub transform_sections: Vec<String>,
    pub mcp_servers: Vec<String>,
    /// SHA-256 of the params as sent on (none when refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_sha256: Option<String>,
    pub policy_sha256: String,
}

impl Record for SdkSessionRecord {
    const KIND: Kind = Kind::SdkSession;
}

impl SdkSessionRecord {
    /// One cell of `audit show`.
    pub fn summary(&self) -> String {
        let decision = match self.decision {
            SdkDecision::Allowed => "allowed",
            SdkDecision::Refused => "refused",
            SdkDecision::Stripped => "stripped",
        };
        let findings: Vec<String> = self
            .findings
            .iter()
            .map(|f| format!("{} ({}, {})", f.what, f.rule, f.action))
            .collect();
        let mut s = format!(
            "{} {} by {} ({}): {decision}",
            self.method, self.session, self.client, self.principal
        );
        if !findings.is_empty() {
            s.push_str(": ");
            s.push_str(&findings.join(", "));
        }
        s
    }
}
