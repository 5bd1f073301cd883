//! What an upstream session is created with: `approvalMode` manual, so
//! every tool the host would ask about comes to the bridge's policy first,
//! and the text its prompt starts with (`config.systemMessageSections`):
//! the operator's `[policy.overrides]`, then each section the creating
//! client sent, if the section policy and `ahp.transform` let it through.
//! What is refused is not sent; the session is created without it (as a
//! refused rewrite keeps the original). The plan's audit record names every
//! section, sent or refused, with its SHA-256.

use ahp_types::common::JsonObject;
use serde_json::{json, Map, Value};

use crate::ahp::SessionStart;
use crate::audit::sha256_hex;
use crate::audit::{AddedSectionRecord, SectionOrigin, SessionSectionsRecord};
use std::collections::BTreeMap;

use crate::config::{OverrideAction, OverrideConfig};
use crate::policy::Policy;
use crate::policy::{AddAction, SectionAddition};
use crate::policy::{Ask, Governor, Recording};
use crate::policy::{Body, Subject};

/// One section the operator adds to every session.
#[derive(Debug, Clone)]
pub(super) struct OperatorSection {
    pub id: String,
    pub action: AddAction,
    pub content: String,
}

impl OperatorSection {
    /// `[policy.overrides]` of the policy in force (validated to append or
    /// prepend on the host's ids when `protocol = "ahp"`).
    pub(super) fn all_of(overrides: &BTreeMap<String, OverrideConfig>) -> Vec<Self> {
        overrides
            .iter()
            .filter_map(|(id, o)| {
                let action = match o.action {
                    OverrideAction::Append => AddAction::Append,
                    OverrideAction::Prepend => AddAction::Prepend,
                    OverrideAction::Replace | OverrideAction::Remove => return None,
                };
                Some(Self {
                    id: id.clone(),
                    action,
                    content: o.content.clone()?,
                })
            })
            .collect()
    }
}

/// A session's start, decided.
pub(super) struct SectionPlan {
    /// The upstream `createSession.config`.
    pub config: JsonObject,
    /// The client sections it sends (to leave out if their record cannot
    /// be written).
    pub client_sections: Vec<String>,
    pub record: SessionSectionsRecord,
}

/// What decides a session's start.
pub(super) struct Deciders<'a> {
    pub policy: &'a Policy,
    pub governor: &'a Governor,
    pub operator: &'a [OperatorSection],
    pub include_content: bool,
}

impl Deciders<'_> {
    /// The start of the bridge's session `north` as upstream session `up`.
    pub(super) fn plan(&self, north: &str, up: &str, start: &SessionStart) -> SectionPlan {
        let mut sent = Map::new();
        let mut records = Vec::new();
        for o in self.operator {
            sent.insert(o.id.clone(), section(o.action, &o.content));
            records.push(self.record(
                &o.id,
                o.action,
                &o.content,
                SectionOrigin::Operator,
                "sent".into(),
            ));
        }
        let creator = start.creator.as_ref();
        let subject = creator.map_or_else(Subject::nobody, |c| c.subject.clone());
        let owner = creator
            .and_then(|c| c.client_id.clone())
            .unwrap_or_default();
        let mut client_sections = Vec::new();
        for a in &start.additions {
            let decision = match self.refusal(north, a, start, &subject, &owner) {
                Some(rule) => format!("refused:{rule}"),
                None => {
                    sent.insert(a.id.clone(), section(a.action, &a.content));
                    client_sections.push(a.id.clone());
                    "sent".to_owned()
                }
            };
            records.push(self.record(&a.id, a.action, &a.content, SectionOrigin::Client, decision));
        }
        let mut config = JsonObject::new();
        config.insert("approvalMode".into(), Value::from("manual"));
        if !sent.is_empty() {
            config.insert("systemMessageSections".into(), Value::Object(sent));
        }
        SectionPlan {
            config,
            client_sections,
            record: SessionSectionsRecord {
                time: jiff::Timestamp::now().to_string(),
                session: north.to_owned(),
                upstream_session: up.to_owned(),
                principal: start.owner.clone(),
                client: creator.and_then(|c| c.client_id.clone()),
                sections: records,
                policy_sha256: self.policy.policy_sha256(),
            },
        }
    }

    /// The rule a client's section breaks, if any: a section the operator
    /// fixes, a hidden one, the section rules, then `ahp.transform`.
    fn refusal(
        &self,
        north: &str,
        a: &SectionAddition,
        start: &SessionStart,
        subject: &Subject,
        owner: &str,
    ) -> Option<String> {
        if self.operator.iter().any(|o| o.id == a.id) {
            return Some("fixed".into());
        }
        if !self.policy.allows(&a.id) {
            return Some("hidden".into());
        }
        // No creator known (it cannot be: a session is created by a
        // client): nothing it may change.
        let none = Default::default();
        let allowed = match &start.creator {
            Some(c) => c.transform_sections.as_ref(),
            None => Some(&none),
        };
        let rules = self.policy.rules(&a.id);
        if let Err(rule) = rules.check_addition(&a.id, allowed, a.action, &a.content) {
            return Some(rule.to_string());
        }
        let verdict = self.governor.decide(Ask {
            subject,
            session: Some(north),
            body: Body::Addition {
                section: &a.id,
                action: a.action.as_str(),
                added: &a.content,
                owner,
            },
            about: &a.id,
            recording: Recording::Now,
        });
        verdict.refused().map(|_| "rego".to_owned())
    }

    fn record(
        &self,
        id: &str,
        action: AddAction,
        content: &str,
        origin: SectionOrigin,
        decision: String,
    ) -> AddedSectionRecord {
        AddedSectionRecord {
            id: id.to_owned(),
            action: action.as_str().to_owned(),
            origin,
            decision,
            sha256: sha256_hex(content.as_bytes()),
            len: content.len(),
            content: self.include_content.then(|| content.to_owned()),
        }
    }
}

/// A section as the host takes it.
fn section(action: AddAction, content: &str) -> Value {
    json!({"content": content, "action": action.as_str()})
}

impl SectionPlan {
    /// The plan without the client's sections (their record could not be
    /// written, and the operator wants nothing unaudited to reach the model).
    pub(super) fn without_client_sections(mut self) -> JsonObject {
        if let Some(Value::Object(sent)) = self.config.get_mut("systemMessageSections") {
            for id in &self.client_sections {
                sent.remove(id);
            }
            if sent.is_empty() {
                self.config.remove("systemMessageSections");
            }
        }
        self.config
    }
}
