//! `decision`: one decision of the operator's Rego policy that denied,
//! would have denied (report mode), warned or erred. A transform section's
//! decision is not a record of its own: it is the section's `regoDecision`
//! inside the transform record, so the section's hashes and its decision
//! are chained together. The record names what was decided on (a section
//! id, a permission's kind, a customization's name), never prompt text.

use serde::{Deserialize, Serialize};

use super::record::{now_rfc3339, Kind, Record};
use crate::policy::rego::{Decision, Subject};

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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionRecord {
    pub time: String,
    /// The AHP session (or an SDK app's session id), where there is one.
    pub session: Option<String>,
    /// The client or app connection that asked, where there is one.
    pub client: Option<String>,
    /// What was decided on: `tone,preamble`, `shell`, `mcp_server echo`, ...
    pub about: String,
    #[serde(flatten)]
    pub decision: DecisionEntry,
}

impl Record for DecisionRecord {
    const KIND: Kind = Kind::Decision;
}

impl DecisionRecord {
    /// The record of `d`, decided for `subject` (its principal and client
    /// are named).
    pub fn new(
        d: &Decision,
        subject: &Subject,
        session: Option<&str>,
        about: impl Into<String>,
    ) -> Self {
        Self {
            time: now_rfc3339(),
            session: session.map(str::to_owned),
            client: subject.client.id.clone(),
            about: about.into(),
            decision: DecisionEntry::of(d, subject.principal.as_deref()),
        }
    }

    /// One cell of `audit show`.
    pub fn summary(&self) -> String {
        let d = &self.decision;
        format!(
            "{} {}: {} by {}: {}",
            d.point,
            self.about,
            d.outcome,
            d.principal.as_deref().unwrap_or("-"),
            d.messages()
        )
    }
}
