//! The host's own session settings the bridge offers its clients: which of
//! the host's `resolveSessionConfig` properties pass, and their values on
//! the way up. `approvalMode` stays the bridge's (`manual`, so every tool
//! the host would ask about reaches the policy), as do
//! `systemMessageSections` (decided section by section) and the settings
//! that are the operator's to choose (`remoteSession`, the session store,
//! managed settings); `mode` passes without `autopilot`, in which the agent
//! runs tools without asking, past the policy.

use std::collections::BTreeMap;

use ahp_types::commands::ResolveSessionConfigResult;
use ahp_types::common::JsonObject;
use ahp_types::state::SessionConfigPropertySchema;
use serde_json::Value;

/// The host's settings a client may choose.
const PASSED: &[&str] = &["mode", "inputRequestTimeout"];

/// Values of `mode` the bridge does not offer.
const WITHHELD: &[(&str, &str)] = &[("mode", "autopilot")];

/// The host's settings the bridge offers, from its schema, with the values
/// it withholds taken out of their choices (and their labels).
pub(super) fn offered(
    host: ResolveSessionConfigResult,
) -> BTreeMap<String, SessionConfigPropertySchema> {
    host.schema
        .properties
        .into_iter()
        .filter(|(k, p)| PASSED.contains(&k.as_str()) && p.read_only != Some(true))
        .map(|(k, mut p)| {
            if let Some(values) = p.r#enum.take() {
                let keep: Vec<bool> = values.iter().map(|v| !withheld(&k, v)).collect();
                let pick = |list: Vec<String>| -> Vec<String> {
                    list.into_iter()
                        .zip(&keep)
                        .filter(|(_, k)| **k)
                        .map(|(v, _)| v)
                        .collect()
                };
                p.enum_labels = p.enum_labels.take().map(pick);
                p.enum_descriptions = p.enum_descriptions.take().map(pick);
                p.r#enum = Some(values.into_iter().filter(|v| !withheld(&k, v)).collect());
            }
            (k, p)
        })
        .collect()
}

fn withheld(key: &str, value: &Value) -> bool {
    WITHHELD.iter().any(|(k, v)| *k == key && value == *v)
}

/// Of a session's config `values`, those the host takes (the rest are the
/// bridge's).
pub(super) fn for_host<'a>(
    values: impl IntoIterator<Item = (&'a String, &'a Value)>,
) -> JsonObject {
    values
        .into_iter()
        .filter(|(k, v)| PASSED.contains(&k.as_str()) && !withheld(k, v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// What the bridge puts back when the host moves a setting it keeps to a
/// value past the policy (a client accepting a plan "in autopilot", an
/// approval mode other than manual): `None` when nothing needs to.
pub(super) fn put_back(changed: &JsonObject) -> Option<JsonObject> {
    let mut back = JsonObject::new();
    if changed.get("mode").is_some_and(|v| withheld("mode", v)) {
        back.insert("mode".into(), Value::from("interactive"));
    }
    if changed.get("approvalMode").is_some_and(|v| v != "manual") {
        back.insert("approvalMode".into(), Value::from("manual"));
    }
    (!back.is_empty()).then_some(back)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_passed_settings_pass_and_autopilot_never() {
        let host: ResolveSessionConfigResult = serde_json::from_value(json!({
            "schema": {"type": "object", "properties": {
                "mode": {"type": "string", "title": "Mode", "enum": ["interactive", "plan", "autopilot"],
                         "enumLabels": ["I", "P", "A"], "sessionMutable": true},
                "approvalMode": {"type": "string", "title": "Approvals", "enum": ["manual", "allow-all"]},
                "remoteSession": {"type": "string", "title": "Remote", "enum": ["off", "on"]},
                "inputRequestTimeout": {"type": "string", "title": "Timeout", "enum": ["5m", "none"]}
            }},
            "values": {}
        }))
        .unwrap();
        let offered = offered(host);
        assert_eq!(
            offered.keys().collect::<Vec<_>>(),
            ["inputRequestTimeout", "mode"]
        );
        assert_eq!(
            offered["mode"].r#enum,
            Some(vec![json!("interactive"), json!("plan")])
        );
        assert_eq!(
            offered["mode"].enum_labels,
            Some(vec!["I".into(), "P".into()])
        );
        let values = serde_json::Map::from_iter([
            ("mode".to_owned(), json!("plan")),
            ("approvalMode".to_owned(), json!("allow-all")),
        ]);
        assert_eq!(Value::Object(for_host(&values)), json!({"mode": "plan"}));
        let autopilot = serde_json::Map::from_iter([("mode".to_owned(), json!("autopilot"))]);
        assert!(for_host(&autopilot).is_empty());
        assert_eq!(
            put_back(&autopilot).map(Value::Object),
            Some(json!({"mode": "interactive"}))
        );
        let allow = serde_json::Map::from_iter([("approvalMode".to_owned(), json!("allow-all"))]);
        assert_eq!(
            put_back(&allow).map(Value::Object),
            Some(json!({"approvalMode": "manual"}))
        );
        let plan = serde_json::Map::from_iter([("mode".to_owned(), json!("plan"))]);
        assert_eq!(put_back(&plan), None);
    }
}
