//! One runtime `systemMessage.transform` request: snapshot the owners, ask
//! each owner once (batched) under ONE deadline, validate, merge, audit, and
//! ALWAYS answer: the runtime has no timeout of its own and would wait forever.
//!
//! The router owns the deadline (`[policy] transform_timeout`): every owner's
//! call is given the time left until that one instant, so the answer goes back
//! by then plus the audit write (audit before answer).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tracing::{debug, info, warn};

use super::policy::{self, OptIn, Policy, Refusal};
use crate::audit::log::AuditLog;
use crate::audit::record::{
    now_rfc3339, OwnerRecord, PolicyRecord, SectionRecord, TransformRecord,
};
use crate::config::{Config, OnFailure};
use crate::jsonrpc::CallError;

pub type AskFuture = Pin<Box<dyn Future<Output = Result<Value, CallError>> + Send>>;

/// The clients a transform is routed to: the bridge implements this over
/// the AHP host, a test over an in-process peer.
pub trait TransformClients: Send + Sync {
    /// The session's active clients with their opt-ins, in active-client order.
    fn opt_ins(&self, session: &str) -> Vec<OptIn>;
    /// Asks `client_id` to rewrite `sections` of `session`, waiting at most
    /// `timeout`; fails at once (`Closed`) when the client is not connected.
    fn ask(
        &self,
        client_id: &str,
        session: &str,
        sections: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> AskFuture;
}

/// How one owner's part of a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Transformed,
    Unchanged,
    Timeout,
    Error,
    Malformed,
    Oversize,
    Disconnected,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transformed => "transformed",
            Self::Unchanged => "unchanged",
            Self::Timeout => "timeout",
            Self::Error => "error",
            Self::Malformed => "malformed",
            Self::Oversize => "oversize",
            Self::Disconnected => "disconnected",
        }
    }
}

pub struct Router {
    pub policy: Policy,
    timeout: Duration,
    audit: Option<Arc<AuditLog>>,
    include_content: bool,
    on_failure: OnFailure,
    /// The policy as audited, and its SHA-256 (in every record).
    policy_json: Value,
    policy_sha256: String,
}

struct OwnerResult {
    client_id: String,
    outcome: Outcome,
    replaced: BTreeMap<String, String>,
    ignored: Vec<String>,
}

impl Router {
    pub fn new(cfg: &Config, audit: Option<Arc<AuditLog>>) -> Self {
        let (policy_json, policy_sha256) = super::policy_digest::policy_snapshot(&cfg.policy);
        Self {
            policy: Policy {
                restricted: cfg.policy.restricted.iter().cloned().collect(),
                overridden: cfg.policy.overrides.keys().cloned().collect(),
                max_sections: cfg.policy.max_sections,
                max_response_bytes: cfg.policy.max_response_bytes,
            },
            timeout: cfg.policy.transform_timeout,
            audit,
            include_content: cfg.audit.include_content,
            on_failure: cfg.audit.on_failure,
            policy_json,
            policy_sha256,
        }
    }

    /// The `policy` record of the policy in force.
    pub fn policy_record(&self) -> PolicyRecord {
        PolicyRecord {
            time: now_rfc3339(),
            policy: self.policy_json.clone(),
            policy_sha256: self.policy_sha256.clone(),
        }
    }

    /// Writes the `policy` record (at startup, and after a reload).
    pub fn audit_policy(&self) -> anyhow::Result<()> {
        if let Some(log) = &self.audit {
            log.append(&self.policy_record())?;
        }
        Ok(())
    }

    /// Routes one request; returns the content for every section asked.
    pub async fn route(
        &self,
        clients: &dyn TransformClients,
        ahp_session: &str,
        runtime_session: &str,
        original: &BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + self.timeout;
        // Snapshot: whoever owns a section now gets this request, nobody else.
        let owners = policy::owners(&self.policy, &clients.opt_ins(ahp_session));
        let requested: BTreeSet<String> = original.keys().cloned().collect();
        let plan = policy::plan(&self.policy, &owners, &requested);

        let asks = plan.asks.iter().map(|(owner, ids)| {
            let sections: BTreeMap<String, String> = ids
                .iter()
                .map(|id| (id.clone(), original[id].clone()))
                .collect();
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let call = clients.ask(owner, ahp_session, &sections, left);
            async move {
                let answer = call.await;
                self.judge(owner, ids, original, answer)
            }
        });
        let results = futures_util::future::join_all(asks).await;

        let mut merged = original.clone();
        let mut section_owner: BTreeMap<&str, (&str, Outcome)> = BTreeMap::new();
        for r in &results {
            for (id, c) in &r.replaced {
                merged.insert(id.clone(), c.clone());
            }
            for id in plan.asks.get(&r.client_id).into_iter().flatten() {
                section_owner.insert(id, (&r.client_id, r.outcome));
            }
        }
        let record = self.record(
            ahp_session,
            runtime_session,
            original,
            &merged,
            &plan.passthrough,
            &section_owner,
            &results,
            started.elapsed(),
        );
        // Audit before answer; the file I/O off the async threads.
        if let Some(log) = self.audit.clone() {
            let written = tokio::task::spawn_blocking(move || log.append(&record))
                .await
                .unwrap_or_else(|e| Err(anyhow::anyhow!("audit writer panicked: {e}")));
            if let Err(e) = written {
                if self.on_failure == OnFailure::KeepOriginal && merged != *original {
                    warn!(session = %ahp_session, "audit record not written ({e}); on_failure = keep-original: the runtime gets the original sections");
                    return original.clone();
                }
                warn!(session = %ahp_session, "audit record not written: {e}");
            }
        }
        merged
    }

    /// What one owner's answer is worth.
    fn judge(
        &self,
        owner: &str,
        asked: &BTreeSet<String>,
        original: &BTreeMap<String, String>,
        answer: Result<Value, CallError>,
    ) -> OwnerResult {
        let mut r = OwnerResult {
            client_id: owner.to_owned(),
            outcome: Outcome::Disconnected,
            replaced: BTreeMap::new(),
            ignored: vec![],
        };
        r.outcome = match answer {
            Err(CallError::Timeout(_)) => Outcome::Timeout,
            Err(CallError::Closed) => Outcome::Disconnected,
            Err(CallError::Rpc(e)) => {
                debug!(client_id = ?owner, error = ?e, "client answered the transform with an error");
                Outcome::Error
            }
            Ok(result) => {
                // Measured as the client's answer serialized: what it sent, near enough.
                let bytes = result.to_string().len();
                match policy::validate_answer(&self.policy, asked, &result, bytes) {
                    Err(Refusal::Malformed) => Outcome::Malformed,
                    Err(Refusal::Oversize) => Outcome::Oversize,
                    Ok(acc) => {
                        r.ignored = acc.ignored;
                        r.replaced = acc.replaced;
                        if r.replaced.iter().any(|(id, c)| original.get(id) != Some(c)) {
                            Outcome::Transformed
                        } else {
                            Outcome::Unchanged
                        }
                    }
                }
            }
        };
        if !matches!(r.outcome, Outcome::Transformed | Outcome::Unchanged) {
            r.replaced.clear();
        }
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        ahp_session: &str,
        runtime_session: &str,
        original: &BTreeMap<String, String>,
        merged: &BTreeMap<String, String>,
        passthrough: &BTreeMap<String, &'static str>,
        section_owner: &BTreeMap<&str, (&str, Outcome)>,
        results: &[OwnerResult],
        latency: Duration,
    ) -> TransformRecord {
        let sections: Vec<SectionRecord> = original
            .iter()
            .map(|(id, before)| {
                let after = &merged[id];
                let owned = section_owner.get(id.as_str());
                let decision = match (owned, passthrough.get(id)) {
                    (Some(_), _) if before != after => "transformed".to_string(),
                    (Some((_, o)), _) => o.as_str().to_string(),
                    (None, Some(reason)) => format!("passthrough:{reason}"),
                    (None, None) => "passthrough:deadline".to_string(),
                };
                let owner = owned.map(|(c, _)| *c);
                SectionRecord::new(id, decision, owner, before, after, self.include_content)
            })
            .collect();
        for r in results {
            info!(session = %ahp_session, client_id = ?r.client_id, outcome = r.outcome.as_str(),
                sections = ?section_owner.iter().filter(|(_, (c, _))| *c == r.client_id).map(|(id, _)| *id).collect::<Vec<_>>(),
                ignored = ?r.ignored, "transform");
        }
        TransformRecord {
            time: now_rfc3339(),
            session: ahp_session.to_owned(),
            runtime_session: runtime_session.to_owned(),
            owners: results
                .iter()
                .map(|r| OwnerRecord {
                    client_id: r.client_id.clone(),
                    outcome: r.outcome.as_str(),
                    ignored: r.ignored.clone(),
                })
                .collect(),
            sections,
            latency_us: latency.as_micros() as u64,
            policy_sha256: self.policy_sha256.clone(),
        }
    }
}

#[cfg(test)]
#[path = "router_tests.rs"]
mod tests;
