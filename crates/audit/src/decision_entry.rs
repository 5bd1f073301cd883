//! One Rego decision as the audit keeps it: on its own in a `decision`
//! record, or as a transform section's `regoDecision`. Its own file because
//! both records hold it: the section's record and the decision record each
//! import it, and neither imports the other.

use serde::{Deserialize, Serialize};

use ahp_bridge_policy::Decision;

/// The decision itself, as it stands alone or inside a section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionEntry {
    /// `opt_in`, `session`, `transform`, `permission`, `customization`.
    pub point: String,
    pub principal: Option<String>,
    /// `denied`, `would_deny`, `warned`, `error`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warn: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// SHA-256 of the modules and data that decided.
    pub revision: String,
}

impl DecisionEntry {
    pub fn of(d: &Decision, principal: Option<&str>) -> Self {
        Self {
            point: d.point.as_str().to_owned(),
            principal: principal.map(str::to_owned),
            outcome: d.outcome.as_str().to_owned(),
            deny: d.deny.clone(),
            warn: d.warn.clone(),
            error: d.error.clone(),
            revision: d.revision.clone(),
        }
    }

    /// The messages, as one cell of `audit show`.
    pub fn messages(&self) -> String {
        let mut all: Vec<&str> = self.deny.iter().map(String::as_str).collect();
        all.extend(self.warn.iter().map(String::as_str));
        if let Some(e) = &self.error {
            all.push(e);
        }
        all.join("; ")
    }
}
