//! The host's own channels (the spec reserves `x-` names for them),
//! as AHP data: their URIs, the role a subscription needs, their state and
//! the actions that change it. `x-audit://log` is the audit log's live
//! tail: its head, its last checkpoint, the records not shipped, and the
//! newest records; one action per record appended. `x-policy://effective`
//! is the policy in force: its document (what `config check` prints as a
//! table) and hash; one action at every reload.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use ahp_bridge_base::config::Role;

/// The audit log's channel.
pub(crate) const AUDIT_LOG: &str = "x-audit://log";

/// How many records the audit channel's snapshot holds at most.
pub(crate) const AUDIT_RECENT: usize = 200;
/// And how many bytes of them (records with `include_content` are large):
/// the oldest go first.
pub(crate) const AUDIT_RECENT_BYTES: usize = 1024 * 1024;

/// The effective policy's channel.
pub(crate) const POLICY: &str = "x-policy://effective";

/// The host's status channel.
pub(crate) const HOST_STATUS: &str = "x-host://status";

/// The role subscribing to `uri` needs, if it is one of the host's channels.
pub(crate) fn required_role(uri: &str) -> Option<Role> {
    match uri {
        AUDIT_LOG | POLICY => Some(Role::Admin),
        HOST_STATUS => Some(Role::Observe),
        _ => None,
    }
}

/// Their entries in `InitializeResult._meta`, beside the transform extension's.
pub(crate) fn advertisement() -> Value {
    json!({
        AUDIT_LOG: {
            "role": "admin",
            "snapshot": "head (SEQ:HASH), records, lastCheckpoint {seq, signed}, shippingGap, recent (the newest records, at most 200, oldest first)",
            "actions": [AuditRecordAppended::TYPE],
        },
        POLICY: {
            "role": "admin",
            "snapshot": "policy (the effective policy document), sha256, loadedAt",
            "actions": [PolicyLoaded::TYPE],
        },
        HOST_STATUS: {
            "role": "observe",
            "snapshot": "version, protocol, runtimes [{runtime, up, restarts}], clients, sessions, startedAt",
            "actions": [HostStatus::TYPE],
        }
    })
}

/// `x-host://status`'s state, and (with its `type`) the action sent when
/// any of it changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HostStatus {
    #[serde(rename = "type", skip_serializing_if = "str::is_empty")]
    pub kind: &'static str,
    /// This bridge's version.
    pub version: &'static str,
    /// The AHP version it implements.
    pub protocol: &'static str,
    pub runtimes: Vec<RuntimeStatus>,
    /// Initialized client connections, of every principal.
    pub clients: usize,
    /// Sessions, of every principal.
    pub sessions: usize,
    pub started_at: String,
}

impl HostStatus {
    pub(crate) const TYPE: &'static str = "x-host/statusChanged";
}

/// One runtime of the pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct RuntimeStatus {
    pub runtime: usize,
    pub up: bool,
    pub restarts: u64,
}

/// `x-policy://effective`'s state, and (with its `type`) the action a
/// reload sends: the whole policy each time, it is small.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PolicyLoaded {
    #[serde(rename = "type", skip_serializing_if = "str::is_empty")]
    pub kind: &'static str,
    pub policy: Value,
    pub sha256: String,
    /// When this policy was put in force (RFC 3339).
    pub loaded_at: String,
}

impl PolicyLoaded {
    pub(crate) const TYPE: &'static str = "x-policy/loaded";
}

/// The last checkpoint record seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Checkpoint {
    pub seq: u64,
    pub signed: bool,
}

/// One record as the audit log wrote it: its place in the chain, and its
/// line as written (passed on as text, never made a tree again).
#[derive(Debug, Clone)]
pub struct WrittenRecord {
    pub seq: u64,
    pub hash: String,
    /// A checkpoint's: whether it is signed.
    pub checkpoint: Option<bool>,
    pub line: Box<RawValue>,
}

/// What [`WrittenRecord`] reads of a line.
#[derive(Deserialize)]
struct Head {
    seq: Option<u64>,
    #[serde(default)]
    hash: String,
    #[serde(default)]
    kind: String,
    signature: Option<serde::de::IgnoredAny>,
}

impl WrittenRecord {
    /// From a record as the log just wrote it and its line (read once,
    /// to keep it as JSON text; the record's fields read from the tree).
    /// Takes JSON: the audit log's records are JSON documents of many kinds,
    /// and this keeps only the few fields every kind has.
    pub fn new(record: &Value, line: &str) -> Option<Self> {
        Some(Self {
            seq: record["seq"].as_u64().unwrap_or_default(),
            hash: record["hash"].as_str().unwrap_or_default().to_owned(),
            checkpoint: (record["kind"] == "checkpoint").then(|| record.get("signature").is_some()),
            line: RawValue::from_string(line.to_owned()).ok()?,
        })
    }

    /// From a line of the log (read back from the file at startup);
    /// `None` when it is not a JSON object.
    pub fn parse(line: &str) -> Option<Self> {
        let head: Head = serde_json::from_str(line).ok()?;
        Some(Self {
            seq: head.seq.unwrap_or_default(),
            hash: head.hash,
            checkpoint: (head.kind == "checkpoint").then_some(head.signature.is_some()),
            line: RawValue::from_string(line.to_owned()).ok()?,
        })
    }
}

/// `x-audit://log`'s state.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AuditLogState {
    /// `SEQ:HASH` of the newest record, once one was seen.
    pub head: Option<String>,
    /// Records in the chain (the head's `seq`).
    pub records: u64,
    pub last_checkpoint: Option<Checkpoint>,
    /// Records the syslog shipper could not queue so far.
    pub shipping_gap: u64,
    /// The newest records (the log file's end at startup, then this run's), oldest first.
    pub recent: VecDeque<Box<RawValue>>,
    /// The serialized size of each of `recent`, and their sum.
    #[serde(skip)]
    sizes: VecDeque<usize>,
    #[serde(skip)]
    recent_bytes: usize,
}

impl AuditLogState {
    /// Takes in one written record; the action that says so.
    pub(crate) fn append(
        &mut self,
        record: WrittenRecord,
        shipping_gap: u64,
    ) -> AuditRecordAppended {
        let seq = match record.seq {
            0 => self.records + 1,
            n => n,
        };
        self.head = Some(format!("{seq}:{}", record.hash));
        self.records = seq;
        self.shipping_gap = shipping_gap;
        if let Some(signed) = record.checkpoint {
            self.last_checkpoint = Some(Checkpoint { seq, signed });
        }
        let size = record.line.get().len();
        let record = record.line;
        self.recent.push_back(record.clone());
        self.sizes.push_back(size);
        self.recent_bytes += size;
        while self.recent.len() > AUDIT_RECENT || self.recent_bytes > AUDIT_RECENT_BYTES {
            self.recent.pop_front();
            self.recent_bytes -= self.sizes.pop_front().unwrap_or(0);
        }
        AuditRecordAppended {
            kind: AuditRecordAppended::TYPE,
            record,
            head: self.head.clone().unwrap_or_default(),
            shipping_gap,
        }
    }
}

/// `x-audit/recordAppended`: one record written to the audit log.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AuditRecordAppended {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub record: Box<RawValue>,
    pub head: String,
    pub shipping_gap: u64,
}

impl AuditRecordAppended {
    pub(crate) const TYPE: &'static str = "x-audit/recordAppended";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(record: Value) -> WrittenRecord {
        WrittenRecord::parse(&record.to_string()).unwrap()
    }

    fn seq_of(line: &RawValue) -> Value {
        serde_json::from_str::<Value>(line.get()).unwrap()["seq"].clone()
    }

    #[test]
    fn the_tail_keeps_the_newest_and_the_head() {
        let mut s = AuditLogState::default();
        for seq in 1..=(AUDIT_RECENT as u64 + 5) {
            s.append(
                written(json!({"seq": seq, "hash": format!("h{seq}"), "kind": "transform"})),
                0,
            );
        }
        let a = s.append(
            written(json!({"seq": 206, "hash": "h206", "kind": "checkpoint", "signature": "s"})),
            3,
        );
        assert_eq!(s.recent.len(), AUDIT_RECENT);
        assert_eq!(seq_of(&s.recent[0]), 7);
        assert_eq!(a.head, "206:h206");
        assert_eq!(s.records, 206);
        assert_eq!(s.shipping_gap, 3);
        assert_eq!(
            s.last_checkpoint,
            Some(Checkpoint {
                seq: 206,
                signed: true
            })
        );
        let wire = serde_json::to_value(&a).unwrap();
        assert_eq!(wire["type"], "x-audit/recordAppended");
        assert_eq!(
            wire["record"]["signature"], "s",
            "the record whole, as JSON"
        );
    }

    #[test]
    fn a_line_that_is_not_a_json_object_is_no_record() {
        assert!(WrittenRecord::parse("{\"seq\": 1").is_none());
        assert!(WrittenRecord::parse("[1]").is_none());
    }

    #[test]
    fn the_tail_is_bounded_in_bytes_too() {
        let mut s = AuditLogState::default();
        let big = "x".repeat(AUDIT_RECENT_BYTES / 4);
        for seq in 1..=6u64 {
            s.append(
                written(json!({"seq": seq, "hash": "h", "contentAfter": big})),
                0,
            );
        }
        assert_eq!(s.recent.len(), 3, "the oldest went first");
        assert_eq!(seq_of(s.recent.back().unwrap()), 6);
        assert!(serde_json::to_string(&s).unwrap().len() <= AUDIT_RECENT_BYTES + 1024);
    }
}
