//! What a runtime session is bound to, derived from the AHP state. Pure.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::ahp::host::ActiveClientView;
use crate::transform::policy::{owners, OptIn, Policy};

/// The part of a runtime session's config that is fixed at create/resume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Binding {
    /// Sections registered for `action: "transform"`.
    pub registered: BTreeSet<String>,
    /// Section -> owning client, at binding time.
    pub owners: BTreeMap<String, String>,
    /// Tool name -> (owning client, the definition given to the runtime).
    pub tools: BTreeMap<String, (String, Value)>,
}

impl Binding {
    /// Derives the binding the runtime session should have now.
    pub fn derive(policy: &Policy, clients: &[ActiveClientView]) -> Self {
        let opt_ins: Vec<OptIn> = clients.iter().map(OptIn::from).collect();
        let owners = owners(policy, &opt_ins);
        let mut tools = BTreeMap::new();
        for c in clients {
            for t in &c.tools {
                let Some(name) = t["name"].as_str() else {
                    continue;
                };
                // The first client to offer a name owns it.
                tools
                    .entry(name.to_owned())
                    .or_insert_with(|| (c.client_id.clone(), runtime_tool(t)));
            }
        }
        Self {
            registered: owners.keys().cloned().collect(),
            owners,
            tools,
        }
    }

    /// The `tools` for `session.create`/`resume`.
    pub fn runtime_tools(&self) -> Vec<Value> {
        self.tools.values().map(|(_, t)| t.clone()).collect()
    }

    pub fn tool_owner(&self, name: &str) -> Option<&str> {
        self.tools.get(name).map(|(o, _)| o.as_str())
    }
}

/// An AHP tool definition as the runtime wants it.
fn runtime_tool(t: &Value) -> Value {
    json!({
        "name": t["name"],
        "description": t.get("description").and_then(Value::as_str).unwrap_or(""),
        "parameters": t.get("inputSchema").cloned().unwrap_or(json!({"type": "object", "properties": {}})),
    })
}

/// `file:///x/y` -> `/x/y`; plain paths pass.
pub fn path_of_uri(uri: &str) -> String {
    uri.strip_prefix("file://").unwrap_or(uri).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: &str, opt: &[&str], tools: &[&str]) -> ActiveClientView {
        ActiveClientView {
            client_id: id.into(),
            tools: tools
                .iter()
                .map(|t| json!({"name": t, "description": "d"}))
                .collect(),
            opt_in: opt.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn derive_and_compare() {
        let p = Policy {
            restricted: ["safety".to_string()].into(),
            ..Policy::default()
        };
        let a = Binding::derive(
            &p,
            &[
                client("a", &["tone", "safety"], &["t1"]),
                client("b", &["tone", "guidelines"], &["t1", "t2"]),
            ],
        );
        assert_eq!(
            a.registered,
            ["guidelines".to_string(), "tone".to_string()].into()
        );
        assert_eq!(a.owners["tone"], "a");
        assert_eq!(a.tool_owner("t1"), Some("a"));
        assert_eq!(a.tool_owner("t2"), Some("b"));
        assert_eq!(a.runtime_tools().len(), 2);
        // Same opt-ins, different order: the owners change, so the binding differs.
        let b = Binding::derive(
            &p,
            &[
                client("b", &["tone", "guidelines"], &["t1", "t2"]),
                client("a", &["tone", "safety"], &["t1"]),
            ],
        );
        assert_ne!(a, b);
        assert_eq!(Binding::derive(&p, &[]), Binding::default());
    }

    #[test]
    fn uris() {
        assert_eq!(path_of_uri("file:///tmp/x"), "/tmp/x");
        assert_eq!(path_of_uri("/tmp/y"), "/tmp/y");
    }
}
