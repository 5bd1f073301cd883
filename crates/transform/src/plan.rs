//! The routing decisions of one runtime request, pure: which owner is asked
//! which sections, which go back at once and why, and whether an owner's
//! answer is acceptable as a whole (its size, its section count, the ids it
//! should not have sent).

use std::collections::{BTreeMap, BTreeSet};

use super::{ClientAnswer, Sections};
use ahp_bridge_audit::Passthrough;
use ahp_bridge_policy::Policy;

/// A routing plan for one runtime request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// owner client id -> the sections it is asked for (in request order of ids).
    pub asks: BTreeMap<String, BTreeSet<String>>,
    /// Sections that go back unchanged at once, with the reason.
    pub passthrough: BTreeMap<String, Passthrough>,
}

/// Splits a runtime request's sections between owners. Restricted sections are
/// refused here a second time, whatever the registration said.
pub(crate) fn plan(
    policy: &Policy,
    owners: &BTreeMap<String, String>,
    requested: &BTreeSet<String>,
) -> Plan {
    let mut p = Plan::default();
    for id in requested {
        if policy.is_restricted(id) {
            p.passthrough.insert(id.clone(), Passthrough::Restricted);
        } else if !policy.allows(id) {
            p.passthrough.insert(id.clone(), Passthrough::NotAllowed);
        } else if let Some(owner) = owners.get(id) {
            p.asks.entry(owner.clone()).or_default().insert(id.clone());
        } else {
            p.passthrough.insert(id.clone(), Passthrough::NoOwner);
        }
    }
    p
}

/// An answer too large to use: more than `max_response_bytes`, or more
/// than `max_sections` sections; it is refused whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Oversize;

/// An accepted answer: the sections it replaces and the ids it should not have sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Accepted {
    pub replaced: Sections,
    pub ignored: Vec<String>,
}

/// Checks one owner's answer against what it was asked: extra ids are
/// ignored (and reported); too many sections or too many bytes is refused.
pub(crate) fn validate_answer(
    policy: &Policy,
    asked: &BTreeSet<String>,
    answer: ClientAnswer,
) -> Result<Accepted, Oversize> {
    if answer.bytes > policy.max_response_bytes() || answer.sections.len() > policy.max_sections() {
        return Err(Oversize);
    }
    let mut out = Accepted::default();
    for (id, content) in answer.sections {
        if asked.contains(&id) {
            out.replaced.insert(id, content);
        } else {
            out.ignored.push(id);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_bridge_base::config::{Config, OverrideAction, OverrideConfig};

    fn policy() -> Policy {
        let fixed = OverrideConfig {
            action: OverrideAction::Remove,
            content: None,
        };
        let mut cfg = Config::default();
        cfg.policy.overrides.insert("guidelines".into(), fixed);
        cfg.policy.max_sections = 3;
        cfg.policy.max_response_bytes = 100;
        Policy::from_config(&cfg).unwrap()
    }
    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }
    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }
    fn answer(sections: &[(&str, &str)], bytes: usize) -> ClientAnswer {
        ClientAnswer {
            sections: sections
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            bytes,
        }
    }

    #[test]
    fn plan_refuses_restricted_even_if_owned_and_passes_unowned() {
        let p = policy();
        let mut o = BTreeMap::new();
        o.insert("safety".to_string(), "a".to_string());
        o.insert("tone".to_string(), "a".to_string());
        let pl = plan(&p, &o, &set(&["safety", "tone", "identity"]));
        assert_eq!(pl.asks.get("a"), Some(&set(&["tone"])));
        assert_eq!(pl.passthrough.get("safety"), Some(&Passthrough::Restricted));
        assert_eq!(pl.passthrough.get("identity"), Some(&Passthrough::NoOwner));
    }

    #[test]
    fn validation_accepts_replaces_and_ignores_extras() {
        let p = policy();
        let r = answer(&[("tone", "T"), ("extra", "x")], 10);
        let a = validate_answer(&p, &set(&["tone", "preamble"]), r).unwrap();
        assert_eq!(a.replaced.get("tone").map(String::as_str), Some("T"));
        assert_eq!(a.ignored, ids(&["extra"]));
        assert!(!a.replaced.contains_key("preamble"));
    }

    #[test]
    fn validation_refuses_oversize() {
        let p = policy();
        let asked = set(&["tone"]);
        assert_eq!(validate_answer(&p, &asked, answer(&[], 101)), Err(Oversize));
        let many = answer(&[("a", ""), ("b", ""), ("c", ""), ("d", "")], 50);
        assert_eq!(validate_answer(&p, &asked, many), Err(Oversize));
    }
}
