//! The `systemMessageTransform` extension as AHP data, all of its wire
//! shapes in one place: the request a client receives and the answer it
//! gives, the section catalogue on the agent (`systemMessageSections`) and
//! each active client's opt-in (`systemMessageTransform`). `ahp-types` drops
//! the last two fields, so they are kept here beside the typed state and put
//! back into every snapshot.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use ahp_bridge_base::sections::SECTION_CATALOGUE;

/// The server -> client request that asks an owner to rewrite its sections;
/// also the extension's name (the proposal, upstream issue #164, names both so).
pub const TRANSFORM_METHOD: &str = "systemMessageTransform";

/// The version of the extension as this host speaks it. The proposal is in no
/// AHP release yet, so it is pre-1.0: a change to its fields bumps the minor.
pub(crate) const TRANSFORM_EXTENSION_VERSION: &str = "0.1.0";

/// One section in a request or an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransformSection {
    pub content: String,
}

/// The params of the `systemMessageTransform` request (host -> client).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TransformParams<'a> {
    /// The session URI the transform applies to.
    pub channel: &'a str,
    pub sections: BTreeMap<&'a str, TransformSection>,
    #[serde(rename = "_meta")]
    pub meta: TransformMeta,
}

/// The request's `_meta`: how long the client has to answer, so a client
/// with a person behind it (the console) can show the deadline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TransformMeta {
    /// Milliseconds from when the request is sent until the host stops
    /// waiting and keeps the original text.
    pub timeout_ms: u64,
}

impl<'a> TransformParams<'a> {
    /// A request for `sections` (id -> text) of `session`, answerable
    /// within `timeout`.
    pub fn new(
        session: &'a str,
        sections: &'a BTreeMap<String, String>,
        timeout: std::time::Duration,
    ) -> Self {
        let sections = sections
            .iter()
            .map(|(id, text)| {
                (
                    id.as_str(),
                    TransformSection {
                        content: text.clone(),
                    },
                )
            })
            .collect();
        Self {
            channel: session,
            sections,
            meta: TransformMeta {
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            },
        }
    }
}

/// The client's answer. A result that does not deserialize as this (no
/// `sections`, a section without a string `content`) is malformed, which
/// the proposal treats as a failed call.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TransformResult {
    pub sections: BTreeMap<String, TransformSection>,
}

impl TransformResult {
    /// The answer's sections (id -> text), or `None` when it is malformed.
    /// Takes the JSON-RPC result as the client's JSON: this is the edge
    /// where a client's answer becomes typed.
    pub fn parse(result: Value) -> Option<BTreeMap<String, String>> {
        let parsed: Self = serde_json::from_value(result).ok()?;
        Some(
            parsed
                .sections
                .into_iter()
                .map(|(id, s)| (id, s.content))
                .collect(),
        )
    }
}

/// `InitializeResult._meta`: tells a client before it creates a session that
/// this host speaks the extension, which version, and how many sections the
/// catalogue (`systemMessageSections` on the root state's agent) holds.
pub(crate) fn advertisement() -> Value {
    json!({
        TRANSFORM_METHOD: {
            "name": TRANSFORM_METHOD,
            "version": TRANSFORM_EXTENSION_VERSION,
            "sections": SECTION_CATALOGUE.len(),
            "catalogue": "the root state's agents[].systemMessageSections",
            "optIn": "SessionActiveClient.systemMessageTransform.sections",
        }
    })
}

/// The key of the opt-in on an active-client entry.
pub(crate) const OPT_IN_FIELD: &str = "systemMessageTransform";

/// An opt-in that is not `{sections: [id, ...]}`; names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BadOptIn(pub String);

/// `SessionActiveClient.systemMessageTransform`: the sections a client
/// wants to transform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransformOptIn {
    pub sections: Vec<String>,
}

impl TransformOptIn {
    /// The opt-in of an active-client entry as sent: none when absent or
    /// null; an error naming the field when it is not an opt-in.
    pub(crate) fn of_entry(entry: &Value) -> Result<Option<Self>, BadOptIn> {
        match entry.get(OPT_IN_FIELD) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => serde_path_to_error::deserialize(v)
                .map(Some)
                .map_err(|e| BadOptIn(format!("{OPT_IN_FIELD}.{}: {}", e.path(), e.inner()))),
        }
    }
}

/// Puts the opt-ins back into a serialized session state (clientId -> opt-in).
pub(crate) fn restore_opt_ins(session: &mut Value, opt_ins: &BTreeMap<String, TransformOptIn>) {
    let Some(list) = session
        .get_mut("activeClients")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in list {
        let id = c["clientId"].as_str().unwrap_or_default().to_owned();
        if let Some(o) = opt_ins.get(&id) {
            c[OPT_IN_FIELD] = serde_json::to_value(o).unwrap_or(Value::Null);
        }
    }
}

/// The catalogue as the agent advertises it; `restricted` ones are marked.
pub(crate) fn section_catalogue(restricted: &[String]) -> Value {
    let list: Vec<Value> = SECTION_CATALOGUE
        .iter()
        .map(|s| {
            let mut e = json!({"id": s.id, "label": s.label, "description": s.description});
            if restricted.iter().any(|r| r == s.id) {
                e["restricted"] = json!(true);
            }
            e
        })
        .collect();
    Value::Array(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse_or_are_malformed() {
        let ok = TransformResult::parse(json!({"sections": {"tone": {"content": "T"}}})).unwrap();
        assert_eq!(ok["tone"], "T");
        for malformed in [
            json!({"nope": 1}),
            json!({"sections": {"tone": {"content": 3}}}),
            json!({"sections": {"tone": "x"}}),
        ] {
            assert_eq!(
                TransformResult::parse(malformed.clone()),
                None,
                "{malformed}"
            );
        }
        let sections = BTreeMap::from([("tone".to_string(), "T".to_string())]);
        assert_eq!(
            serde_json::to_value(TransformParams::new(
                "ahp-session:/s",
                &sections,
                std::time::Duration::from_millis(4500)
            ))
            .unwrap(),
            json!({"channel": "ahp-session:/s", "sections": {"tone": {"content": "T"}}, "_meta": {"timeoutMs": 4500}})
        );
    }

    #[test]
    fn catalogue_marks_restricted() {
        let v = section_catalogue(&["safety".into()]);
        let secs = v.as_array().unwrap();
        assert_eq!(secs.len(), SECTION_CATALOGUE.len());
        assert_eq!(
            secs.iter().find(|s| s["id"] == "safety").unwrap()["restricted"],
            true
        );
        assert!(secs
            .iter()
            .find(|s| s["id"] == "tone")
            .unwrap()
            .get("restricted")
            .is_none());
    }

    #[test]
    fn opt_ins_are_restored_into_snapshots() {
        let kept = BTreeMap::from([(
            "a".to_string(),
            TransformOptIn {
                sections: vec!["tone".into()],
            },
        )]);
        let mut session = json!({"activeClients": [{"clientId": "a"}, {"clientId": "b"}]});
        restore_opt_ins(&mut session, &kept);
        assert_eq!(
            session["activeClients"][0]["systemMessageTransform"]["sections"][0],
            "tone"
        );
        assert!(session["activeClients"][1]
            .get("systemMessageTransform")
            .is_none());
        assert_eq!(
            TransformOptIn::of_entry(&json!({"clientId": "a"})),
            Ok(None)
        );
        let e = TransformOptIn::of_entry(&json!({"systemMessageTransform": {"sections": 1}}));
        assert!(e
            .unwrap_err()
            .0
            .starts_with("systemMessageTransform.sections"));
    }
}
