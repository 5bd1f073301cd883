//! The host's extension channels ([`crate::ahp::channels`]): their state,
//! owned here, who may watch them, and how a change is published: sequenced,
//! kept for replay and queued to each subscriber like every action, under
//! the one lock, so the same replay, byte bounds and back-pressure apply.

use serde_json::{json, Value};

use super::{Host, State};
use crate::ahp::auth::Principal;
use crate::ahp::channels::{
    required_role, AuditLogState, HostStatus, PolicyLoaded, RuntimeStatus, AUDIT_LOG, HOST_STATUS,
    POLICY,
};
use crate::ahp::protocol::errors::AhpError;
use crate::jsonrpc::{self, RpcError};
use crate::telemetry::metrics;

/// The state of every extension channel (the policy's document is read
/// from the policy in force; only when it was loaded is kept here).
pub(super) struct Extensions {
    audit: AuditLogState,
    policy_loaded_at: String,
    started_at: String,
    /// The status last sent, to send a change only.
    status_sent: Option<HostStatus>,
}

impl Default for Extensions {
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

impl Host {
    /// The extension channel's state, if `uri` is one of them.
    pub(super) fn extension_state(&self, st: &State, uri: &str) -> Option<Value> {
        let state = match uri {
            AUDIT_LOG => serde_json::to_value(&st.extensions.audit),
            POLICY => serde_json::to_value(self.policy_loaded("", &st.extensions)),
            HOST_STATUS => serde_json::to_value(self.status("", st)),
            _ => return None,
        };
        Some(state.unwrap_or(Value::Null))
    }

    fn policy_loaded(&self, kind: &'static str, ext: &Extensions) -> PolicyLoaded {
        let policy = self.policy.current();
        PolicyLoaded {
            kind,
            policy: policy.policy_document(),
            sha256: policy.policy_sha256(),
            loaded_at: ext.policy_loaded_at.clone(),
        }
    }

    fn status(&self, kind: &'static str, st: &State) -> HostStatus {
        let runtimes = (0..self.cfg.runtime.pool_size().max(1))
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
            clients: st.clients.initialized(),
            sessions: st.sessions.len(),
            started_at: st.extensions.started_at.clone(),
        }
    }

    /// Sends `x-host://status` a change, if anything changed since the last
    /// one; called on a tick (what it reports changes in many places).
    pub fn publish_status_if_changed(&self) {
        let mut st = self.lock();
        // Nobody watching: nothing to number, keep or send (a subscriber
        // gets the status as it is then in its snapshot).
        if st.clients.subscribers(HOST_STATUS).next().is_none() {
            return;
        }
        let now = self.status(HostStatus::TYPE, &st);
        if st.extensions.status_sent.as_ref() == Some(&now) {
            return;
        }
        st.extensions.status_sent = Some(now.clone());
        let action = serde_json::to_value(&now).unwrap_or(Value::Null);
        self.publish(&mut st, HOST_STATUS, action);
    }

    /// A reload put a new policy in force: `x-policy://effective` says so.
    pub fn publish_policy_loaded(&self) {
        let mut st = self.lock();
        st.extensions.policy_loaded_at = jiff::Timestamp::now().to_string();
        let action = self.policy_loaded(PolicyLoaded::TYPE, &st.extensions);
        let action = serde_json::to_value(&action).unwrap_or(Value::Null);
        self.publish(&mut st, POLICY, action);
    }
}

/// Whether `p` may subscribe to the extension channel `uri`: `None` when
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

impl Host {
    /// One record written to the audit log: into `x-audit://log`'s state
    /// and out to its subscribers.
    pub fn publish_audit_record(&self, record: Value, shipping_gap: u64) {
        let mut st = self.lock();
        let action = st.extensions.audit.append(record, shipping_gap);
        let action = serde_json::to_value(&action).unwrap_or(Value::Null);
        self.publish(&mut st, AUDIT_LOG, action);
    }

    /// The records the log held before this run, as the channel's tail;
    /// nothing is sent (nobody is subscribed yet).
    pub fn seed_audit_tail(&self, records: Vec<Value>) {
        let mut st = self.lock();
        for record in records {
            st.extensions.audit.append(record, 0);
        }
    }

    fn publish(&self, st: &mut State, channel: &str, action: Value) {
        let seq = self.durable.next_seq(&mut st.log);
        let env = json!({"channel": channel, "action": action, "serverSeq": seq});
        let notification = jsonrpc::notification("action", &env);
        let text = notification.to_string();
        for sub in st.clients.subscribers(channel) {
            sub.out.send_action(&notification, &text, None);
        }
        let server = &self.cfg.server;
        st.log.keep(
            seq,
            channel,
            env.to_string(),
            server.replay_buffer,
            server.replay_buffer_bytes,
        );
    }
}
