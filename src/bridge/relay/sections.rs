//! What an upstream session is created with: `approvalMode` manual, so
//! every tool the host would ask about comes to the bridge's policy first,
//! and the sections text reaches the prompt through
//! (`config.systemMessageSections`): the operator's `[policy.overrides]`.

use ahp_types::common::JsonObject;
use serde_json::{json, Value};

use crate::config::{OverrideAction, PolicyConfig};

/// One section the operator adds to every session.
#[derive(Debug, Clone)]
pub struct OperatorSection {
    pub id: String,
    pub action: OverrideAction,
    pub content: String,
}

impl OperatorSection {
    /// `[policy.overrides]` (validated to append or prepend on the host's
    /// ids when `protocol = "ahp"`).
    pub fn all_of(policy: &PolicyConfig) -> Vec<Self> {
        policy
            .overrides
            .iter()
            .filter_map(|(id, o)| {
                Some(Self {
                    id: id.clone(),
                    action: o.action,
                    content: o.content.clone()?,
                })
            })
            .collect()
    }
}

/// The `config` of an upstream session.
pub(super) fn session_config(operator: &[OperatorSection]) -> JsonObject {
    let mut config = JsonObject::new();
    config.insert("approvalMode".into(), Value::from("manual"));
    let sections: serde_json::Map<String, Value> = operator
        .iter()
        .map(|s| {
            (
                s.id.clone(),
                json!({"content": s.content, "action": s.action.as_str()}),
            )
        })
        .collect();
    if !sections.is_empty() {
        config.insert("systemMessageSections".into(), Value::Object(sections));
    }
    config
}
