//! The operator's policy as one immutable value: which sections are hidden
//! or fixed, the rules a rewrite of each must keep ([`rules`], [`redact`]),
//! the operator's Rego modules, compiled ([`rego`]), the limits of an
//! answer, and its canonical document and hash. Who owns a
//! section in a render follows from it ([`owners`]).
//!
//! One policy is in force at a time, shared through a [`PolicySource`]: a
//! reload replaces it whole, and every reader (the router, the host, the
//! bridge's bindings) takes a snapshot per use, so a request in flight keeps
//! the policy it started with. At the bottom of the crate and pure, but for
//! one read: [`Policy::from_config`] reads the `[policy.rego]` files it names
//! (through the config, within its bounds), so every load compiles them.

mod addition;
mod governor;
mod policy_source;
mod read_only;
mod redact;
mod rego;
mod rules;
pub use addition::{parse_additions, AddAction, SectionAddition, MAX_ADDED_BYTES};
pub use governor::{rewrite, Ask, Decided, Governor, Recorder, Recording, Rewrite};
pub use read_only::only_reads;
pub use redact::{redact, restore_redacted, Redaction, RestoreError};
pub use rego::{
    examples, lexical, session_config, testing, Body, ClientKind, CompileError, Customization,
    Decision, Input, Point, Server, Subject,
};
pub use rules::{BrokenRule, SectionRules};

pub use policy_source::{PolicyReader, PolicySource};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use sha2::{Digest, Sha256};

use self::rego::Rego;
use self::rules::NO_RULES;
use ahp_bridge_base::config::{Access, Config, ConfigError, OverrideConfig, PolicyConfig};
use ahp_bridge_base::sections::{is_catalogued, SECTION_CATALOGUE};

/// The effective policy: what the operator hid, fixed or ruled, as one
/// immutable value; the router swaps it whole on a reload. The fields are
/// read through methods only: the document and its hash are derived from
/// them once, and a changed copy would carry a stale hash.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Hidden sections (`[policy] restricted` and `access = "hidden"`).
    restricted: BTreeSet<String>,
    /// Sections with an operator override: fixed, never handed to a client.
    overrides: BTreeMap<String, OverrideConfig>,
    /// The rules of each section that has any.
    rules: BTreeMap<String, SectionRules>,
    /// The one deadline of a runtime transform request.
    timeout: Duration,
    max_sections: usize,
    max_response_bytes: usize,
    /// The operator's Rego modules (`[policy.rego]`), compiled.
    rego: Option<Arc<Rego>>,
    /// `[policy] auto_approve_read_only`.
    auto_approve_read_only: bool,
    document: Value,
    sha256: String,
}

impl Policy {
    /// The policy of a validated config, with the `[policy.rego]` files it
    /// names read and compiled (the one read of them per load). At start
    /// and at each reload: it reads only reloadable keys.
    pub fn from_config(cfg: &Config) -> Result<Self, ConfigError> {
        let r = cfg.reloadable();
        let additions = cfg.runtime.protocol == ahp_bridge_base::config::RuntimeProtocol::Ahp;
        Self::build(r.policy(), r.transform_principals(), additions)
    }

    /// `[policy]` with the principals that may transform (name -> allow-list,
    /// `None`: any section): they decide nothing here (each client's opt-in
    /// carries its own allow-list) but belong in the policy's document.
    /// `additions`: the policy also decides section additions (in front of
    /// the runtime's own AHP host), and is checked on their input too.
    pub fn build(
        p: &PolicyConfig,
        principals: BTreeMap<String, Option<Vec<String>>>,
        additions: bool,
    ) -> Result<Self, ConfigError> {
        let rego = match &p.rego {
            None => None,
            Some(r) => {
                let mut sources = r.read()?;
                sources.additions = additions;
                let compiled = Rego::compile(&sources, r.enforcement, r.timeout).map_err(|e| {
                    ahp_bridge_base::config::ConfigError {
                        key: "policy.rego.modules".into(),
                        reason: e.to_string(),
                    }
                })?;
                Some(Arc::new(compiled))
            }
        };
        let mut out = Self {
            rego,
            overrides: p.overrides.clone(),
            timeout: p.transform_timeout,
            max_sections: p.max_sections,
            max_response_bytes: p.max_response_bytes,
            auto_approve_read_only: p.auto_approve_read_only,
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
        // Only when on: a policy without it hashes as before.
        if p.auto_approve_read_only {
            out.document["autoApproveReadOnly"] = json!(true);
        }
        // Only with [policy.rego]: a policy without one hashes as before.
        if let Some(r) = &out.rego {
            out.document["rego"] = json!({
                "revision": r.revision(),
                "enforcement": r.enforcement().as_str(),
                "timeoutMs": r.timeout().as_millis() as u64,
                "modules": r.modules(),
                "points": r.points().map(|p| p.as_str()).collect::<Vec<_>>(),
            });
        }
        // serde_json's Map is sorted (no preserve_order): canonical, as the audit hashes records.
        out.sha256 = hex::encode(Sha256::digest(out.document.to_string().as_bytes()));
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

    /// The operator's Rego policy, when `[policy.rego]` names one.
    pub fn rego(&self) -> Option<&Rego> {
        self.rego.as_deref()
    }

    /// Whether the operator hid `id`.
    pub fn is_restricted(&self, id: &str) -> bool {
        self.restricted.contains(id)
    }

    /// The operator's fixed sections.
    pub fn overrides(&self) -> &BTreeMap<String, OverrideConfig> {
        &self.overrides
    }

    /// The one deadline of a runtime transform request.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether a permission request that only reads, and that the policy
    /// allows, is approved without asking a client.
    pub fn auto_approves_read_only(&self) -> bool {
        self.auto_approve_read_only
    }

    /// The most sections one answer may hold.
    pub fn max_sections(&self) -> usize {
        self.max_sections
    }

    /// The most bytes one answer may hold.
    pub fn max_response_bytes(&self) -> usize {
        self.max_response_bytes
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
            .filter(|id| opt_in.allowed.as_ref().is_none_or(|a| a.contains(*id)))
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
    /// Who it is: its principal while it has one (the audit names it), as
    /// the operator's Rego policy sees it too (`ahp.transform`).
    pub subject: rego::Subject,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy() -> Policy {
        let fixed = OverrideConfig {
            action: ahp_bridge_base::config::OverrideAction::Remove,
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
            subject: rego::Subject::nobody(),
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
        assert_eq!(
            p.policy_sha256(),
            hex::encode(Sha256::digest(doc.to_string().as_bytes()))
        );
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
