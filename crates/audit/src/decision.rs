//! `decision`: one decision of the operator's Rego policy that denied,
//! would have denied (report mode), warned or erred. A transform section's
//! decision is not a record of its own: it is the section's `regoDecision`
//! inside the transform record, so the section's hashes and its decision
//! are chained together. The record names what was decided on (a section
//! id, a permission's kind, a customization's name), never prompt text.

use serde::{Deserialize, Serialize};

use super::decision_entry::DecisionEntry;
use super::record::{now_rfc3339, Kind, Record};
use ahp_bridge_policy::{Decision, Subject};

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
