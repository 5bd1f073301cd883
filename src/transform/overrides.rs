//! AHP opt-ins and operator overrides to the runtime's `systemMessage` config.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use crate::config::OverrideConfig;

/// The `systemMessage` for `session.create`/`resume`: operator overrides as they
/// are, plus `action: "transform"` for exactly the `registered` sections. With
/// neither, `None`: registering anything changes how the runtime renders it.
pub fn system_message(
    registered: &BTreeSet<String>,
    overrides: &BTreeMap<String, OverrideConfig>,
) -> Option<Value> {
    if registered.is_empty() && overrides.is_empty() {
        return None;
    }
    let mut sections = Map::new();
    for (id, o) in overrides {
        let mut s = Map::new();
        s.insert("action".into(), json!(o.action.as_str()));
        if let Some(c) = &o.content {
            s.insert("content".into(), json!(c));
        }
        sections.insert(id.clone(), Value::Object(s));
    }
    for id in registered {
        // An override is the operator's word; a client never displaces it.
        sections
            .entry(id.clone())
            .or_insert_with(|| json!({"action": "transform"}));
    }
    Some(json!({"mode": "customize", "sections": sections}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::OverrideAction;

    #[test]
    fn nothing_registered_sends_nothing() {
        assert_eq!(system_message(&BTreeSet::new(), &BTreeMap::new()), None);
    }

    #[test]
    fn transform_for_registered_and_overrides_kept() {
        let reg: BTreeSet<String> = ["tone".to_string(), "guidelines".to_string()].into();
        let mut ov = BTreeMap::new();
        ov.insert(
            "guidelines".to_string(),
            OverrideConfig {
                action: OverrideAction::Append,
                content: Some("X".into()),
            },
        );
        let v = system_message(&reg, &ov).unwrap();
        assert_eq!(v["mode"], "customize");
        assert_eq!(v["sections"]["tone"], json!({"action": "transform"}));
        assert_eq!(
            v["sections"]["guidelines"],
            json!({"action": "append", "content": "X"})
        );
        assert_eq!(v["sections"].as_object().unwrap().len(), 2);
    }
}
