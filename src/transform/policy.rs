//! Pure policy decisions of the transform bridge: which sections exist, which a
//! client may have, who owns a section in a render, and whether an answer is
//! acceptable. No I/O here; everything is unit-tested beside it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::sections::{is_catalogued, SECTION_CATALOGUE};

/// Static policy: what the operator restricted or fixed.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub restricted: BTreeSet<String>,
    /// Sections with an operator override: fixed, never handed to a client.
    pub overridden: BTreeSet<String>,
    pub max_sections: usize,
    pub max_response_bytes: usize,
}

impl Policy {
    /// Whether a client may ever transform `id`.
    pub fn allows(&self, id: &str) -> bool {
        is_catalogued(id) && !self.restricted.contains(id) && !self.overridden.contains(id)
    }

    /// A client's effective opt-in: what it asked for, less unknown, restricted
    /// and operator-fixed ids, deduplicated, in catalogue order.
    pub fn effective(&self, opt_in: &[String]) -> Vec<String> {
        SECTION_CATALOGUE
            .iter()
            .map(|s| s.id)
            .filter(|id| opt_in.iter().any(|o| o == id) && self.allows(id))
            .map(String::from)
            .collect()
    }
}

/// One active client as the transform core sees it: its id and its raw opt-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptIn {
    pub client_id: String,
    pub sections: Vec<String>,
}

/// Section -> owner: for each section, the FIRST client in active-client order
/// whose effective opt-in lists it.
pub fn owners(policy: &Policy, clients: &[OptIn]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for c in clients {
        for id in policy.effective(&c.sections) {
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
        Policy {
            restricted: ["safety".to_string()].into(),
            overridden: ["guidelines".to_string()].into(),
            max_sections: 3,
            max_response_bytes: 100,
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
        let e = p.effective(&ids(&[
            "tone",
            "bogus",
            "safety",
            "guidelines",
            "tone",
            "preamble",
        ]));
        assert_eq!(e, ids(&["preamble", "tone"]));
    }

    #[test]
    fn first_client_in_order_owns_a_section() {
        let p = policy();
        let clients = vec![
            OptIn {
                client_id: "a".into(),
                sections: ids(&["tone"]),
            },
            OptIn {
                client_id: "b".into(),
                sections: ids(&["tone", "last_instructions", "safety"]),
            },
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
}
