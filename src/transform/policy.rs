//! Pure policy decisions of the transform bridge: which sections exist, which a
//! client may have, who owns a section in a render, and whether an answer is
//! acceptable. The per-section rules a rewrite must keep are in
//! [`super::rules`]. No I/O here; everything is unit-tested beside it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::rules::{SectionRules, NO_RULES};
use crate::audit::sha256_hex;
use crate::config::{Access, Config, ConfigError, OverrideConfig, PolicyConfig};
use crate::sections::{is_catalogued, SECTION_CATALOGUE};

/// The effective policy: what the operator hid, fixed or ruled, as one
/// immutable value; the router swaps it whole on a reload.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Hidden sections (`[policy] restricted` and `access = "hidden"`).
    pub restricted: BTreeSet<String>,
    /// Sections with an operator override: fixed, never handed to a client.
    pub overrides: BTreeMap<String, OverrideConfig>,
    /// The rules of each section that has any.
    pub rules: BTreeMap<String, SectionRules>,
    /// The one deadline of a runtime transform request.
    pub timeout: Duration,
    pub max_sections: usize,
    pub max_response_bytes: usize,
    document: Value,
    sha256: String,
}

impl Policy {
    /// The policy of a validated config.
    pub fn from_config(cfg: &Config) -> Result<Self, ConfigError> {
        Self::build(&cfg.policy, cfg.transform_principals())
    }

    /// `[policy]` with the principals that may transform (name -> allow-list,
    /// `None`: any section): they decide nothing here (each client's opt-in
    /// carries its own allow-list) but belong in the policy's document.
    pub fn build(
        p: &PolicyConfig,
        principals: BTreeMap<String, Option<Vec<String>>>,
    ) -> Result<Self, ConfigError> {
        let mut out = Self {
            overrides: p.overrides.clone(),
            timeout: p.transform_timeout,
            max_sections: p.max_sections,
            max_response_bytes: p.max_response_bytes,
            ..Self::default()
        };
        let mut sections = Map::new();
        for s in p.effective_sections() {
            let r = &s.rules;
            if s.access == Access::Hidden {
                out.restricted.insert(s.id.to_owned());
            } else if *r != Default::default() || s.access != Access::Transform {
                let key = format!("policy.sections.{}", s.id);
                out.rules
                    .insert(s.id.to_owned(), SectionRules::compile(&key, s.access, r)?);
            }
            let fixed = p
                .overrides
                .get(s.id)
                .map(|o| json!({"action": o.action.as_str(), "content": o.content}));
            sections.insert(
                s.id.to_owned(),
                json!({
                    "access": s.access.as_str(),
                    "override": fixed,
                    "mode": r.mode.as_str(),
                    "maxGrowthBytes": r.max_growth_bytes,
                    "maxShrinkBytes": r.max_shrink_bytes,
                    "mustKeep": r.must_keep,
                    "deny": r.deny,
                    "redact": r.redact,
                }),
            );
        }
        out.document = json!({
            "format": 1,
            "transformTimeoutMs": p.transform_timeout.as_millis() as u64,
            "maxSections": p.max_sections,
            "maxResponseBytes": p.max_response_bytes,
            "sections": sections,
            "transformPrincipals": principals,
        });
        // serde_json's Map is sorted (no preserve_order): canonical, as the audit hashes records.
        out.sha256 = sha256_hex(out.document.to_string().as_bytes());
        Ok(out)
    }

    /// The policy itself, as a `policy` audit record holds it: every
    /// catalogued section's effective rules, the limits, the principals.
    pub fn policy_document(&self) -> Value {
        self.document.clone()
    }

    /// SHA-256 (hex) of [`Self::policy_document`] serialized canonically
    /// (sorted keys, no whitespace): what every transform record names.
    pub fn policy_sha256(&self) -> String {
        self.sha256.clone()
    }

    /// Whether a client may ever be sent `id` (transform or read-only).
    pub fn allows(&self, id: &str) -> bool {
        is_catalogued(id) && !self.restricted.contains(id) && !self.overrides.contains_key(id)
    }

    /// The rules a rewrite of `id` must keep.
    pub fn rules(&self, id: &str) -> &SectionRules {
        self.rules.get(id).unwrap_or(&NO_RULES)
    }

    /// The hidden sections, in catalogue order (for the advertised catalogue).
    pub fn hidden_sections(&self) -> Vec<String> {
        SECTION_CATALOGUE
            .iter()
            .filter(|s| self.restricted.contains(s.id))
            .map(|s| s.id.to_owned())
            .collect()
    }

    /// A client's effective opt-in: what it asked for, less unknown, hidden
    /// and operator-fixed ids and ids its principal may not transform,
    /// deduplicated, in catalogue order.
    pub fn effective(&self, opt_in: &OptIn) -> Vec<String> {
        SECTION_CATALOGUE
            .iter()
            .map(|s| s.id)
            .filter(|id| opt_in.sections.iter().any(|o| o == id) && self.allows(id))
            .filter(|id| opt_in.allowed.as_ref().map_or(true, |a| a.contains(*id)))
            .map(String::from)
            .collect()
    }
}

/// One active client as the transform core sees it: its id, its raw opt-in,
/// and its principal's allow-list (`None`: any section the policy allows;
/// empty without the `transform` role).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptIn {
    pub client_id: String,
    pub sections: Vec<String>,
    pub allowed: Option<BTreeSet<String>>,
}

/// Section -> owner: for each section, the FIRST client in active-client order
/// whose effective opt-in lists it.
pub fn owners(policy: &Policy, clients: &[OptIn]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for c in clients {
        for id in policy.effective(c) {
            out.entry(id).or_insert_with(|| c.client_id.clone());
        }
    }
    out
}

/// A routing plan for one runtime request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// owner client id -> the sections it is asked for (in request order of ids).
    pub asks: BTreeMap<String, BTreeSet<String>>,
    /// Sections that go back unchanged at once, with the reason.
    pub passthrough: BTreeMap<String, &'static str>,
}

/// Splits a runtime request's sections between owners. Restricted sections are
/// refused here a second time, whatever the registration said.
pub fn plan(
    policy: &Policy,
    owners: &BTreeMap<String, String>,
    requested: &BTreeSet<String>,
) -> Plan {
    let mut p = Plan::default();
    for id in requested {
        if policy.restricted.contains(id) {
            p.passthrough.insert(id.clone(), "restricted");
        } else if !policy.allows(id) {
            p.passthrough.insert(id.clone(), "not_allowed");
        } else if let Some(owner) = owners.get(id) {
            p.asks.entry(owner.clone()).or_default().insert(id.clone());
        } else {
            p.passthrough.insert(id.clone(), "no_owner");
        }
    }
    p
}

/// Why an owner's answer was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Malformed,
    Oversize,
}

/// An accepted answer: the sections it replaces and the ids it should not have sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accepted {
    pub replaced: BTreeMap<String, String>,
    pub ignored: Vec<String>,
}

/// Checks one owner's result against what it was asked: it must be
/// `{sections: {ID: {content: string}}}`; extra ids are ignored (and reported);
/// more than `max_sections` entries or more than `max_response_bytes` is refused whole.
pub fn validate_answer(
    policy: &Policy,
    asked: &BTreeSet<String>,
    result: &Value,
    result_bytes: usize,
) -> Result<Accepted, Refusal> {
    if result_bytes > policy.max_response_bytes {
        return Err(Refusal::Oversize);
    }
    let sections = result
        .get("sections")
        .and_then(Value::as_object)
        .ok_or(Refusal::Malformed)?;
    if sections.len() > policy.max_sections {
        return Err(Refusal::Oversize);
    }
    let mut out = Accepted::default();
    for (id, s) in sections {
        let content = s
            .as_object()
            .and_then(|o| o.get("content"))
            .and_then(Value::as_str)
            .ok_or(Refusal::Malformed)?;
        if asked.contains(id) {
            out.replaced.insert(id.clone(), content.to_owned());
        } else {
            out.ignored.push(id.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy() -> Policy {
        let fixed = OverrideConfig {
            action: crate::config::OverrideAction::Remove,
            content: None,
        };
        Policy {
            restricted: ["safety".to_string()].into(),
            overrides: [("guidelines".to_string(), fixed)].into(),
            max_sections: 3,
            max_response_bytes: 100,
            ..Policy::default()
        }
    }
    fn opt_in(client_id: &str, sections: &[&str]) -> OptIn {
        OptIn {
            client_id: client_id.into(),
            sections: ids(sections),
            allowed: None,
        }
    }
    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }
    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn effective_drops_unknown_restricted_and_overridden() {
        let p = policy();
        let e = p.effective(&opt_in(
            "a",
            &["tone", "bogus", "safety", "guidelines", "tone", "preamble"],
        ));
        assert_eq!(e, ids(&["preamble", "tone"]));
    }

    #[test]
    fn first_client_in_order_owns_a_section() {
        let p = policy();
        let clients = vec![
            opt_in("a", &["tone"]),
            opt_in("b", &["tone", "last_instructions", "safety"]),
        ];
        let o = owners(&p, &clients);
        assert_eq!(o.get("tone").map(String::as_str), Some("a"));
        assert_eq!(o.get("last_instructions").map(String::as_str), Some("b"));
        assert!(!o.contains_key("safety"));
    }

    #[test]
    fn plan_refuses_restricted_even_if_owned_and_passes_unowned() {
        let p = policy();
        let mut o = BTreeMap::new();
        o.insert("safety".to_string(), "a".to_string());
        o.insert("tone".to_string(), "a".to_string());
        let pl = plan(&p, &o, &set(&["safety", "tone", "identity"]));
        assert_eq!(pl.asks.get("a"), Some(&set(&["tone"])));
        assert_eq!(pl.passthrough.get("safety"), Some(&"restricted"));
        assert_eq!(pl.passthrough.get("identity"), Some(&"no_owner"));
    }

    #[test]
    fn validation_accepts_replaces_and_ignores_extras() {
        let p = policy();
        let r = json!({"sections": {"tone": {"content": "T"}, "extra": {"content": "x"}}});
        let a = validate_answer(&p, &set(&["tone", "preamble"]), &r, 10).unwrap();
        assert_eq!(a.replaced.get("tone").map(String::as_str), Some("T"));
        assert_eq!(a.ignored, ids(&["extra"]));
        assert!(!a.replaced.contains_key("preamble"));
    }

    #[test]
    fn validation_refuses_malformed_and_oversize() {
        let p = policy();
        let asked = set(&["tone"]);
        assert_eq!(
            validate_answer(&p, &asked, &json!({"nope": 1}), 5),
            Err(Refusal::Malformed)
        );
        assert_eq!(
            validate_answer(
                &p,
                &asked,
                &json!({"sections": {"tone": {"content": 3}}}),
                5
            ),
            Err(Refusal::Malformed)
        );
        assert_eq!(
            validate_answer(&p, &asked, &json!({"sections": {"tone": "x"}}), 5),
            Err(Refusal::Malformed)
        );
        assert_eq!(
            validate_answer(&p, &asked, &json!({"sections": {}}), 101),
            Err(Refusal::Oversize)
        );
        let many = json!({"sections": {"a": {"content": ""}, "b": {"content": ""}, "c": {"content": ""}, "d": {"content": ""}}});
        assert_eq!(
            validate_answer(&p, &asked, &many, 50),
            Err(Refusal::Oversize)
        );
    }

    #[test]
    fn a_principal_allow_list_narrows_ownership() {
        let p = policy();
        let mut limited = opt_in("policy-service", &["tone", "preamble"]);
        limited.allowed = Some(set(&["tone"]));
        let clients = vec![limited.clone(), opt_in("ide", &["preamble"])];
        let o = owners(&p, &clients);
        assert_eq!(o.get("tone").map(String::as_str), Some("policy-service"));
        assert_eq!(
            o.get("preamble").map(String::as_str),
            Some("ide"),
            "not allowed to the first, so the next owns it"
        );
        limited.allowed = Some(BTreeSet::new());
        assert!(
            p.effective(&limited).is_empty(),
            "no transform role: nothing"
        );
    }

    #[test]
    fn built_from_config_with_a_stable_hash_of_its_document() {
        let text = "[policy]\nrestricted = [\"safety\"]\n\
            [policy.sections.tone]\nmode = \"append-only\"\ndeny = ['x+']\n\
            [policy.sections.guidelines]\naccess = \"read-only\"\n\
            [policy.sections.last_instructions]\naccess = \"hidden\"\n";
        let cfg = Config::parse(text).unwrap();
        cfg.validate().unwrap();
        let p = Policy::from_config(&cfg).unwrap();
        assert_eq!(p.hidden_sections(), ids(&["safety", "last_instructions"]));
        assert!(!p.allows("last_instructions") && p.allows("guidelines"));
        assert_eq!(p.rules("guidelines").access, Access::ReadOnly);
        assert_eq!(p.rules("tone").deny.len(), 1);
        assert!(p.rules("identity").deny.is_empty(), "no rules: none");
        let doc = p.policy_document();
        assert_eq!(doc["sections"]["tone"]["mode"], "append-only");
        assert_eq!(doc["sections"]["safety"]["access"], "hidden");
        assert_eq!(doc["transformPrincipals"], json!({"local": null}));
        assert_eq!(p.policy_sha256(), sha256_hex(doc.to_string().as_bytes()));
        assert_eq!(p.policy_sha256().len(), 64);
        // The same policy hashes the same; any change of a rule changes it.
        let again = Policy::from_config(&Config::parse(text).unwrap()).unwrap();
        assert_eq!(again.policy_sha256(), p.policy_sha256());
        let changed = Config::parse(&text.replace("x+", "y+")).unwrap();
        assert_ne!(
            Policy::from_config(&changed).unwrap().policy_sha256(),
            p.policy_sha256()
        );
    }
}
