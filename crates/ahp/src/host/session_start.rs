//! What a session was created with that its backend passes on, beyond its
//! state: who created it (as the policy sees it), and in front of the
//! runtime's own AHP host the section text it starts with and the values
//! of that host's own settings.

use std::collections::BTreeSet;

use ahp_bridge_policy::SectionAddition;
use ahp_bridge_policy::Subject;

/// What a session was created with that its backend passes on.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionStart {
    /// The owner's principal.
    pub owner: String,
    /// Who created it, while this host runs (not kept across a restart).
    pub creator: Option<Creator>,
    /// `config.systemMessageSections`, parsed.
    pub additions: Vec<SectionAddition>,
    /// The values of the backend's own settings (`mode`, ...).
    pub backend_settings: serde_json::Map<String, serde_json::Value>,
}

/// The client that created a session, as the policy sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Creator {
    pub client_id: Option<String>,
    pub subject: Subject,
    /// The sections its principal may change: `None` for any the policy
    /// allows, empty without the `transform` role.
    pub transform_sections: Option<BTreeSet<String>>,
}
