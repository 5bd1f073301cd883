//! The host's extension channels (the spec reserves `x-` names for them),
//! as AHP data: their URIs, the role a subscription needs, their state and
//! the actions that change it. `x-audit://log` is the audit log's live
//! tail: its head, its last checkpoint, the records not shipped, and the
//! newest records; one action per record appended.

use std::collections::VecDeque;

use serde::Serialize;
use serde_json::{json, Value};

use crate::config::Role;

/// The audit log's channel.
pub const AUDIT_LOG: &str = "x-audit://log";

/// How many records the audit channel's snapshot holds.
pub const AUDIT_RECENT: usize = 200;

/// The role subscribing to `uri` needs, if it is one of the host's channels.
pub fn required_role(uri: &str) -> Option<Role> {
    (uri == AUDIT_LOG).then_some(Role::Admin)
}

/// Their entries in `InitializeResult._meta`, beside the transform extension's.
pub fn advertisement() -> Value {
    json!({
        AUDIT_LOG: {
            "role": "admin",
            "snapshot": "head (SEQ:HASH), records, lastCheckpoint {seq, signed}, shippingGap, recent (the newest 200 records, oldest first)",
            "actions": [AuditRecordAppended::TYPE],
        }
    })
}

/// The last checkpoint record seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    pub seq: u64,
    pub signed: bool,
}

/// `x-audit://log`'s state.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditLogState {
    /// `SEQ:HASH` of the newest record, once one was written in this run.
    pub head: Option<String>,
    /// Records in the chain (the head's `seq`).
    pub records: u64,
    pub last_checkpoint: Option<Checkpoint>,
    /// Records the syslog shipper could not queue so far.
    pub shipping_gap: u64,
    /// The newest records written in this run, oldest first.
    pub recent: VecDeque<Value>,
}

impl AuditLogState {
    /// Takes in one written record; the action that says so.
    pub fn append(&mut self, record: Value, shipping_gap: u64) -> AuditRecordAppended {
        let seq = record["seq"].as_u64().unwrap_or(self.records + 1);
        let hash = record["hash"].as_str().unwrap_or_default();
        self.head = Some(format!("{seq}:{hash}"));
        self.records = seq;
        self.shipping_gap = shipping_gap;
        if record["kind"] == "checkpoint" {
            self.last_checkpoint = Some(Checkpoint {
                seq,
                signed: record.get("signature").is_some(),
            });
        }
        self.recent.push_back(record.clone());
        while self.recent.len() > AUDIT_RECENT {
            self.recent.pop_front();
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
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecordAppended {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub record: Value,
    pub head: String,
    pub shipping_gap: u64,
}

impl AuditRecordAppended {
    pub const TYPE: &'static str = "x-audit/recordAppended";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_newest_and_the_head() {
        let mut s = AuditLogState::default();
        for seq in 1..=(AUDIT_RECENT as u64 + 5) {
            s.append(
                json!({"seq": seq, "hash": format!("h{seq}"), "kind": "transform"}),
                0,
            );
        }
        let a = s.append(
            json!({"seq": 206, "hash": "h206", "kind": "checkpoint", "signature": "s"}),
            3,
        );
        assert_eq!(s.recent.len(), AUDIT_RECENT);
        assert_eq!(s.recent[0]["seq"], 7);
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
    }
}
