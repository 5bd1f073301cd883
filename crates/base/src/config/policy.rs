//! `[policy]`: what clients may do with the system prompt's sections: the
//! hidden ones, the deadline and limits of a transform, the operator's
//! overrides; the per-section rules are in [`super::policy_rules`].

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::{bad, duration, ConfigError, CustomizationPolicy, RegoConfig, SectionRuleConfig};
use crate::sections::is_catalogued;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    /// Sections no client may transform.
    pub restricted: Vec<String>,
    #[serde(deserialize_with = "duration")]
    pub transform_timeout: Duration,
    /// A client answer with more sections than this is refused whole.
    pub max_sections: usize,
    /// A client answer larger than this (serialized) is refused whole.
    pub max_response_bytes: usize,
    /// Operator overrides, fixed for every session.
    pub overrides: BTreeMap<String, OverrideConfig>,
    /// Per-section rules (`[policy.sections.ID]`), in [`policy_rules`].
    pub sections: BTreeMap<String, SectionRuleConfig>,
    /// What clients may publish as customizations.
    pub customizations: CustomizationPolicy,
    /// `[policy.rego]`: the operator's Rego modules, beside the rules above.
    pub rego: Option<RegoConfig>,
    /// In front of the runtime's AHP host: a permission request that only
    /// reads (`policy::read_only`) and that the policy allows is approved
    /// by the bridge without asking a client.
    pub auto_approve_read_only: bool,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            restricted: vec!["safety".into()],
            transform_timeout: Duration::from_secs(5),
            max_sections: 32,
            max_response_bytes: 256 * 1024,
            overrides: BTreeMap::new(),
            sections: BTreeMap::new(),
            customizations: CustomizationPolicy::default(),
            rego: None,
            auto_approve_read_only: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverrideConfig {
    pub action: OverrideAction,
    #[serde(default)]
    pub content: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverrideAction {
    Append,
    Prepend,
    Replace,
    Remove,
}

impl OverrideAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Append => "append",
            Self::Prepend => "prepend",
            Self::Replace => "replace",
            Self::Remove => "remove",
        }
    }
}

impl PolicyConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if let Some(id) = self.restricted.iter().find(|id| !is_catalogued(id)) {
            return Err(bad(
                "policy.restricted",
                format!("{id:?} is not a known section id"),
            ));
        }
        if self.transform_timeout.is_zero() {
            return Err(bad("policy.transform_timeout", "must be more than 0"));
        }
        if self.max_sections == 0 {
            return Err(bad("policy.max_sections", "must be at least 1"));
        }
        for (id, o) in &self.overrides {
            o.validate(id)?;
        }
        if let Some(r) = &self.rego {
            r.validate(self.transform_timeout)?;
        }
        Ok(())
    }
}

impl OverrideConfig {
    fn validate(&self, id: &str) -> Result<(), ConfigError> {
        let key = format!("policy.overrides.{id}");
        if !is_catalogued(id) {
            return Err(bad(&key, "not a known section id"));
        }
        match (self.action, &self.content) {
            (OverrideAction::Remove, Some(_)) => {
                Err(bad(&key, "action \"remove\" takes no content"))
            }
            (OverrideAction::Remove, None) | (_, Some(_)) => Ok(()),
            (_, None) => Err(bad(
                &key,
                format!("action {:?} needs content", self.action.as_str()),
            )),
        }
    }
}
