//! The host's own channels ([`crate::channels`]): their state,
//! owned here ([`HostChannels`], behind the host's lock), and who may watch
//! them. A change is published by the host (`Core::publish_host_channel`):
//! sequenced, kept for replay and queued to each subscriber like every
//! action, so the same replay, byte bounds and back-pressure apply.

use serde_json::Value;

use crate::auth::Principal;
use crate::channels::{
    required_role, AuditLogState, HostStatus, PolicyLoaded, RuntimeStatus, WrittenRecord,
    AUDIT_LOG, HOST_STATUS, POLICY,
};
use crate::protocol::errors::AhpError;
use ahp_bridge_jsonrpc::RpcError;
use ahp_bridge_policy::Policy;
use ahp_bridge_telemetry::metrics;

/// The state of every host channel (the policy's document is read
/// from the policy in force; only when it was loaded is kept here).
pub(super) struct HostChannels {
    audit: AuditLogState,
    policy_loaded_at: String,
    started_at: String,
    /// The status last sent, to send a change only.
    status_sent: Option<HostStatus>,
}

impl Default for HostChannels {
    fn default() -> Self {
        let now = jiff::Timestamp::now().to_string();
        Self {
            audit: AuditLogState::default(),
            policy_loaded_at: now.clone(),
            started_at: now,
            status_sent: None,
        }
    }
}

/// What the host status is counted from, read under the host's lock.
pub(super) struct StatusInputs {
    pub pool_size: usize,
    pub clients: usize,
    pub sessions: usize,
}

impl HostChannels {
    /// The host channel's state, if `uri` is one of them.
    pub(super) fn state(&self, uri: &str, policy: &Policy, now: &StatusInputs) -> Option<Value> {
        let state = match uri {
            AUDIT_LOG => serde_json::to_value(&self.audit),
            POLICY => serde_json::to_value(self.policy_loaded("", policy)),
            HOST_STATUS => serde_json::to_value(self.status("", now)),
            _ => return None,
        };
        Some(state.unwrap_or(Value::Null))
    }

    fn policy_loaded(&self, kind: &'static str, policy: &Policy) -> PolicyLoaded {
        PolicyLoaded {
            kind,
            policy: policy.policy_document(),
            sha256: policy.policy_sha256(),
            loaded_at: self.policy_loaded_at.clone(),
        }
    }

    fn status(&self, kind: &'static str, now: &StatusInputs) -> HostStatus {
        let runtimes = (0..now.pool_size.max(1))
            .map(|runtime| {
                let (up, restarts) = metrics().runtime_state(runtime);
                RuntimeStatus {
                    runtime,
                    up,
                    restarts,
                }
            })
            .collect();
        HostStatus {
            kind,
            version: env!("CARGO_PKG_VERSION"),
            protocol: ahp_types::PROTOCOL_VERSION,
            runtimes,
            clients: now.clients,
            sessions: now.sessions,
            started_at: self.started_at.clone(),
        }
    }

    /// The `x-host://status` action when the status differs from the one
    /// last sent (what it reports changes in many places, so it is compared).
    pub(super) fn status_changed(&mut self, now: &StatusInputs) -> Option<String> {
        let status = self.status(HostStatus::TYPE, now);
        if self.status_sent.as_ref() == Some(&status) {
            return None;
        }
        self.status_sent = Some(status.clone());
        Some(serde_json::to_string(&status).unwrap_or_else(|_| "null".into()))
    }

    /// A new policy in force: the `x-policy://effective` action.
    pub(super) fn policy_reloaded(&mut self, policy: &Policy) -> String {
        self.policy_loaded_at = jiff::Timestamp::now().to_string();
        let action = self.policy_loaded(PolicyLoaded::TYPE, policy);
        serde_json::to_string(&action).unwrap_or_else(|_| "null".into())
    }

    /// A record written to the audit log: kept in the tail; its
    /// `x-audit://log` action.
    pub(super) fn audit_appended(&mut self, record: WrittenRecord, shipping_gap: u64) -> String {
        let action = self.audit.append(record, shipping_gap);
        serde_json::to_string(&action).unwrap_or_else(|_| "null".into())
    }

    /// The records the log held before this run, as the tail (nothing sent).
    pub(super) fn seed_audit_tail(&mut self, records: Vec<WrittenRecord>) {
        for record in records {
            self.audit.append(record, 0);
        }
    }
}

/// Whether `p` may subscribe to the host channel `uri`: `None` when
/// `uri` is none of them, else refused naming the role it needs.
pub(super) fn may_watch(p: &Principal, uri: &str) -> Option<Result<(), RpcError>> {
    let role = required_role(uri)?;
    Some(if p.has(role) {
        Ok(())
    } else {
        Err(RpcError::new(
            AhpError::PermissionDenied,
            format!(
                "principal {:?} lacks the `{}` role needed to watch {uri}",
                p.name,
                role.as_str()
            ),
        ))
    })
}
