//! The audit records, typed. Every record has a `kind`; a record without one
//! (written before kinds existed) is a `transform` record. The log adds
//! `kind`, `seq`, `prev` and `hash` to each (see [`super::log`]).
//!
//! `transform`: one `systemMessage.transform` request: what each owner did,
//! and for every section the hashes of its text before and after (its content
//! too only when the operator asks for it).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::decision_entry::DecisionEntry;
use super::sha256_hex;
use ahp_bridge_policy::BrokenRule;
use ahp_bridge_policy::Policy;

/// What a record is; the log writes it as the record's `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Transform,
    Customization,
    Policy,
    Checkpoint,
    Recovered,
    Rotation,
    SdkSession,
    Decision,
    SessionSections,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transform => "transform",
            Self::Customization => "customization",
            Self::Policy => "policy",
            Self::Checkpoint => "checkpoint",
            Self::Recovered => "recovered",
            Self::Rotation => "rotation",
            Self::SdkSession => "sdk_session",
            Self::Decision => "decision",
            Self::SessionSections => "session_sections",
        }
    }

    /// The kind of a record as read back: none is `transform` (older logs);
    /// an unknown one is `None`.
    pub fn of(record: &Value) -> Option<Self> {
        match record.get("kind") {
            None => Some(Self::Transform),
            Some(k) => serde_json::from_value(k.clone()).ok(),
        }
    }
}

/// A typed record the log can append.
pub trait Record: Serialize {
    const KIND: Kind;
}

impl Record for TransformRecord {
    const KIND: Kind = Kind::Transform;
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TransformRecord {
    pub time: String,
    /// The AHP session URI.
    pub session: String,
    pub runtime_session: String,
    pub owners: Vec<OwnerRecord>,
    pub sections: Vec<SectionRecord>,
    /// From the runtime's request to our answer, in microseconds.
    pub latency_us: u64,
    /// SHA-256 of the effective policy (see the last `policy` record).
    pub policy_sha256: String,
}

/// `policy`: the policy in force from here on, written at startup and at
/// every reload, so each later record's `policySha256` can be looked up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRecord {
    pub time: String,
    pub policy: Value,
    pub policy_sha256: String,
}

impl PolicyRecord {
    /// The record of `policy`, now.
    pub fn of(policy: &Policy) -> Self {
        Self {
            time: now_rfc3339(),
            policy: policy.policy_document(),
            policy_sha256: policy.policy_sha256(),
        }
    }
}

impl Record for PolicyRecord {
    const KIND: Kind = Kind::Policy;
}

/// `recovered`: what a failed or torn write left behind, stated so that
/// `verify` can tell it from tampering. The bytes from `cutOffset` (in this
/// file) up to this record's line are no record: `cutBytes` of them, with
/// SHA-256 `cutSha256`, starting at line `cutLine`. `lostRecords` records could
/// not be written at all since the last one that was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RecoveredRecord {
    pub time: String,
    pub reason: String,
    pub cut_offset: u64,
    pub cut_line: u64,
    pub cut_bytes: u64,
    pub cut_sha256: String,
    pub lost_records: u64,
}

impl Record for RecoveredRecord {
    const KIND: Kind = Kind::Recovered;
}

/// `rotation`: the first record of a rotated-to file; its `prev` is the last
/// hash of `previousFile` (a name in the same directory).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RotationRecord {
    pub time: String,
    pub previous_file: String,
    pub previous_seq: u64,
}

impl Record for RotationRecord {
    const KIND: Kind = Kind::Rotation;
}

/// `checkpoint`: signed by the operator's Ed25519 key (see
/// [`super::checkpoint`]): the chain head at `seq - 1` and a 16-hex-digit
/// prefix of each record's hash since the previous checkpoint, so a chain
/// recomputed without the key fails and the first altered record is named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CheckpointRecord {
    pub time: String,
    pub key_id: String,
    /// The first record this checkpoint covers.
    pub from_seq: u64,
    /// The hash of the record just before this checkpoint.
    pub head: String,
    pub hashes: Vec<String>,
}

impl Record for CheckpointRecord {
    const KIND: Kind = Kind::Checkpoint;
}

/// How one owner's part of the request ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerRecord {
    pub client_id: String,
    /// The principal the client acts for (`corp:alice`, `ide`), while it
    /// had one when the request was routed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    pub outcome: OwnerOutcome,
    /// Section ids the owner answered without being asked for them.
    pub ignored: Vec<String>,
}

/// How one owner's part of a transform request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OwnerOutcome {
    /// It changed at least one section, and the change passed the rules.
    Transformed,
    /// It answered, and nothing it sent changed a section.
    Unchanged,
    /// Every section it changed broke a rule of the policy.
    Refused,
    /// No answer by the request's one deadline.
    Timeout,
    /// It answered with a JSON-RPC error.
    Error,
    /// Its answer was not a `systemMessageTransform` result, or named a
    /// placeholder it was never sent.
    Malformed,
    /// Its answer was over `max_response_bytes` or `max_sections`.
    Oversize,
    /// It was not connected (or went away before answering).
    Disconnected,
}

impl OwnerOutcome {
    /// Whether its answer was used at all (section by section).
    pub fn answered(self) -> bool {
        matches!(self, Self::Transformed | Self::Unchanged | Self::Refused)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transformed => "transformed",
            Self::Unchanged => "unchanged",
            Self::Refused => "refused",
            Self::Timeout => "timeout",
            Self::Error => "error",
            Self::Malformed => "malformed",
            Self::Oversize => "oversize",
            Self::Disconnected => "disconnected",
        }
    }
}

/// Why a section went back unchanged without being asked of anyone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Passthrough {
    /// Hidden by the policy (`[policy] restricted`, `access = "hidden"`).
    Restricted,
    /// Fixed by an operator override, or not in the catalogue.
    NotAllowed,
    /// No active client opted in to it.
    NoOwner,
}

impl Passthrough {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Restricted => "restricted",
            Self::NotAllowed => "not_allowed",
            Self::NoOwner => "no_owner",
        }
    }
}

/// What happened to one section of a transform request; written as
/// `transformed`, `unchanged`, `refused:RULE` (e.g. `refused:append-only`,
/// `refused:deny[0]`), the owner's outcome when its answer was not used
/// (`timeout`, ...), or `passthrough:REASON`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SectionDecision {
    Transformed,
    Unchanged,
    Refused(BrokenRule),
    /// The owner's answer as a whole was not used.
    Failed(OwnerOutcome),
    Passthrough(Passthrough),
}

impl std::fmt::Display for SectionDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Transformed => f.write_str("transformed"),
            Self::Unchanged => f.write_str("unchanged"),
            Self::Refused(rule) => write!(f, "refused:{rule}"),
            Self::Failed(o) => f.write_str(o.as_str()),
            Self::Passthrough(p) => write!(f, "passthrough:{}", p.as_str()),
        }
    }
}

impl Serialize for SectionDecision {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SectionRecord {
    pub id: String,
    pub decision: SectionDecision,
    pub owner: Option<String>,
    pub sha256_before: String,
    pub sha256_after: String,
    pub len_before: usize,
    pub len_after: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_after: Option<String>,
    /// The operator's Rego decision on this section's rewrite, when it
    /// denied, would have denied, warned or erred.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rego_decision: Option<DecisionEntry>,
}

impl SectionRecord {
    /// Hashes both texts; keeps them only with `include_content`.
    pub fn new(
        id: &str,
        decision: SectionDecision,
        owner: Option<&str>,
        before: &str,
        after: &str,
        include_content: bool,
    ) -> Self {
        Self {
            id: id.to_owned(),
            decision,
            owner: owner.map(String::from),
            sha256_before: sha256_hex(before.as_bytes()),
            sha256_after: sha256_hex(after.as_bytes()),
            len_before: before.len(),
            len_after: after.len(),
            content_before: include_content.then(|| before.to_owned()),
            content_after: include_content.then(|| after.to_owned()),
            rego_decision: None,
        }
    }
}

/// Now, as the record's `time`.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_and_content_only_on_request() {
        let s = SectionRecord::new(
            "tone",
            SectionDecision::Transformed,
            Some("a"),
            "x",
            "yy",
            false,
        );
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["sha256Before"], sha256_hex(b"x"));
        assert_eq!(v["lenAfter"], 2);
        assert!(v.get("contentBefore").is_none());
        let s = SectionRecord::new("tone", SectionDecision::Unchanged, None, "x", "x", true);
        assert_eq!(serde_json::to_value(&s).unwrap()["contentAfter"], "x");
    }

    #[test]
    fn kinds_read_back_and_old_records_are_transforms() {
        assert_eq!(
            Kind::of(&serde_json::json!({"seq": 1})),
            Some(Kind::Transform)
        );
        assert_eq!(
            Kind::of(&serde_json::json!({"kind": "checkpoint"})),
            Some(Kind::Checkpoint)
        );
        assert_eq!(Kind::of(&serde_json::json!({"kind": "bogus"})), None);
        for k in [Kind::Policy, Kind::Recovered, Kind::Rotation] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
    }
}
