//! `session_sections`: the text a session of the runtime's own AHP host
//! starts with in its prompt (`config.systemMessageSections`), written
//! before the host is asked to create it: each section, who it came from
//! (the creating client or the operator's `[policy.overrides]`), whether it
//! was sent or refused and by which rule, and the SHA-256 and length of its
//! text (the text itself only with `[audit] include_content`).

use serde::{Deserialize, Serialize};

use super::record::{Kind, Record};

/// Where a section's text came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SectionOrigin {
    Client,
    Operator,
}

/// One section of the session's start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddedSectionRecord {
    pub id: String,
    /// `append` or `prepend`.
    pub action: String,
    pub origin: SectionOrigin,
    /// `sent`, or `refused:RULE` (the rule as the config names it).
    pub decision: String,
    pub sha256: String,
    pub len: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSectionsRecord {
    pub time: String,
    /// The bridge's session URI.
    pub session: String,
    /// The host's session URI.
    pub upstream_session: String,
    /// The creator's principal, and its client.
    pub principal: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    pub sections: Vec<AddedSectionRecord>,
    pub policy_sha256: String,
}

impl Record for SessionSectionsRecord {
    const KIND: Kind = Kind::SessionSections;
}

impl SessionSectionsRecord {
    /// One cell of `audit show`.
    pub fn summary(&self) -> String {
        let sections: Vec<String> = self
            .sections
            .iter()
            .map(|s| {
                let origin = match s.origin {
                    SectionOrigin::Client => "client",
                    SectionOrigin::Operator => "operator",
                };
                format!(
                    "{} {} ({origin}, {} bytes): {}",
                    s.action, s.id, s.len, s.decision
                )
            })
            .collect();
        format!(
            "{} by {}: {}",
            self.session,
            self.principal,
            if sections.is_empty() {
                "no sections".to_owned()
            } else {
                sections.join(", ")
            }
        )
    }
}
