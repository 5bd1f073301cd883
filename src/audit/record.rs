//! The audit records, typed. Every record has a `kind`; a record without one
//! (written before kinds existed) is a `transform` record. The log adds
//! `kind`, `seq`, `prev` and `hash` to each (see [`super::log`]).
//!
//! `transform`: one `systemMessage.transform` request: what each owner did,
//! and for every section the hashes of its text before and after (its content
//! too only when the operator asks for it).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::sha256_hex;

/// What a record is; the log writes it as the record's `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Transform,
    Policy,
    Checkpoint,
    Recovered,
    Rotation,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transform => "transform",
            Self::Policy => "policy",
            Self::Checkpoint => "checkpoint",
            Self::Recovered => "recovered",
            Self::Rotation => "rotation",
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
pub struct RecoveredRecord {
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
pub struct RotationRecord {
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
pub struct CheckpointRecord {
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
    /// `transformed`, `unchanged`, `refused` (every change broke a rule),
    /// `timeout`, `error`, `malformed`, `oversize`, `disconnected`.
    pub outcome: &'static str,
    /// Section ids the owner answered without being asked for them.
    pub ignored: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SectionRecord {
    pub id: String,
    /// `transformed`, `unchanged`, `refused:RULE` (e.g. `refused:append-only`,
    /// `refused:deny[0]`), an owner's outcome, or `passthrough:REASON`.
    pub decision: String,
    pub owner: Option<String>,
    pub sha256_before: String,
    pub sha256_after: String,
    pub len_before: usize,
    pub len_after: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_after: Option<String>,
}

impl SectionRecord {
    /// Hashes both texts; keeps them only with `include_content`.
    pub fn new(
        id: &str,
        decision: String,
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
        let s = SectionRecord::new("tone", "transformed".into(), Some("a"), "x", "yy", false);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["sha256Before"], sha256_hex(b"x"));
        assert_eq!(v["lenAfter"], 2);
        assert!(v.get("contentBefore").is_none());
        let s = SectionRecord::new("tone", "unchanged".into(), None, "x", "x", true);
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
