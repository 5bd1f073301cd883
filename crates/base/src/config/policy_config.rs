//! `[policy]`: what clients may do with the system prompt's sections: the
//! hidden ones, the deadline and limits of a transform, the operator's
//! overrides, and the effective policy of every catalogued section as
//! `config check` prints it; the per-section rules' types are in
//! [`super::policy_rules`].

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use std::fmt::Write as _;

use super::{
    bad, duration, Access, ConfigError, CustomizationPolicy, EffectiveSection, RegoConfig,
    SectionRuleConfig,
};
use crate::sections::{is_catalogued, SECTION_CATALOGUE};

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

    /// `[policy.sections.*]`, each against the rest of the policy. Checked
    /// after every other section of the config, as before this moved here.
    pub(super) fn validate_sections(&self) -> Result<(), ConfigError> {
        for (id, r) in &self.sections {
            self.validate_section(id, r)?;
            r.validate_lists(|k| format!("policy.sections.{id}.{k}"))?;
        }
        Ok(())
    }

    /// Every catalogued section's effective policy, in catalogue order.
    pub fn effective_sections(&self) -> Vec<EffectiveSection> {
        SECTION_CATALOGUE
            .iter()
            .map(|s| {
                let rules = self.sections.get(s.id).cloned().unwrap_or_default();
                let restricted = self.restricted.iter().any(|r| r == s.id);
                let access = match rules.access {
                    Some(a) => a,
                    None if restricted => Access::Hidden,
                    None => Access::Transform,
                };
                EffectiveSection {
                    id: s.id,
                    access,
                    fixed: self.overrides.get(s.id).map(|o| o.action),
                    rules,
                }
            })
            .collect()
    }

    /// The sections no client ever sees: `restricted` and `access = "hidden"`.
    pub fn hidden_sections(&self) -> Vec<String> {
        self.effective_sections()
            .into_iter()
            .filter(|s| s.access == Access::Hidden)
            .map(|s| s.id.to_owned())
            .collect()
    }

    /// The effective policy as a table: one row per catalogued section.
    /// `principals`: who may transform, as `Config::transform_principals`
    /// says.
    pub fn table(&self, principals: &BTreeMap<String, Option<Vec<String>>>) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<21} {:<18} {:<13} {:>7} {:>7} {:>5} {:>5} {:>7}  principals",
            "section", "access", "mode", "growth", "shrink", "keep", "deny", "redact"
        );
        let limit = |v: Option<usize>| v.map_or("-".to_owned(), |n| n.to_string());
        for s in self.effective_sections() {
            let r = &s.rules;
            let (access, who) = match (s.fixed, s.access) {
                (Some(action), _) => (format!("override:{}", action.as_str()), "-".to_owned()),
                (None, Access::Hidden) => ("hidden".to_owned(), "-".to_owned()),
                (None, a) => {
                    let names: Vec<&str> = principals
                        .iter()
                        .filter(|(_, allowed)| {
                            allowed.as_ref().is_none_or(|l| l.iter().any(|x| x == s.id))
                        })
                        .map(|(n, _)| n.as_str())
                        .collect();
                    let who = if names.is_empty() {
                        "(none)".to_owned()
                    } else {
                        names.join(", ")
                    };
                    (a.as_str().to_owned(), who)
                }
            };
            let _ = writeln!(
                out,
                "{:<21} {:<18} {:<13} {:>7} {:>7} {:>5} {:>5} {:>7}  {who}",
                s.id,
                access,
                r.mode.as_str(),
                limit(r.max_growth_bytes),
                limit(r.max_shrink_bytes),
                r.must_keep.len(),
                r.deny.len(),
                r.redact.len(),
            );
        }
        out
    }

    /// `[policy.sections.ID]` against the rest of the policy: a known id,
    /// an access that agrees with `restricted`, no rules where they could
    /// never apply (an overridden, hidden or read-only section), modes and
    /// limits that allow a change.
    fn validate_section(&self, id: &str, r: &SectionRuleConfig) -> Result<(), ConfigError> {
        let key = |k: &str| format!("policy.sections.{id}{k}");
        if !is_catalogued(id) {
            return Err(bad(&key(""), "not a known section id"));
        }
        let restricted = self.restricted.iter().any(|x| x == id);
        if let Some(a) = r.access.filter(|a| *a != Access::Hidden && restricted) {
            return Err(bad(
                &key(".access"),
                format!(
                    "{:?} contradicts policy.restricted, which lists {id:?} (remove it there; note that the default is [\"safety\"])",
                    a.as_str()
                ),
            ));
        }
        let rules = r.rewrite_rules();
        let claims_access = r.access.is_some_and(|a| a != Access::Hidden);
        if self.overrides.contains_key(id)
            && (!rules.is_empty() || !r.redact.is_empty() || claims_access)
        {
            return Err(bad(
                &key(""),
                format!("{id:?} has an operator override (policy.overrides.{id}), so no client ever sees or rewrites it and these rules would never apply"),
            ));
        }
        let access = r.access.unwrap_or(if restricted {
            Access::Hidden
        } else {
            Access::Transform
        });
        let never = |k: &str, why: &str| Err(bad(&key(&format!(".{k}")), why));
        match access {
            Access::Hidden => {
                if let Some(k) = rules
                    .first()
                    .copied()
                    .or((!r.redact.is_empty()).then_some("redact"))
                {
                    return never(
                        k,
                        "the section is hidden (never sent), so this rule would never apply",
                    );
                }
            }
            Access::ReadOnly => {
                if let Some(k) = rules.first() {
                    return never(k, "the section is read-only (every rewrite is refused), so this rule would never apply");
                }
            }
            Access::Transform => {}
        }
        r.validate_mode(key)
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
