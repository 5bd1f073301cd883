//! One runtime `systemMessage.transform` request: snapshot the owners, ask
//! each owner once (batched) under ONE deadline, validate, merge, audit, and
//! ALWAYS answer: the runtime has no timeout of its own and would wait forever.
//!
//! The router owns the deadline (`[policy] transform_timeout`): every owner's
//! call is given the time left until that one instant, so the answer goes back
//! by then plus the audit write (audit before answer).
//!
//! The policy is one immutable snapshot per request: a reload swaps it whole
//! ([`Router::set_policy`]) and the next request sees the new one. Each owner
//! is shown its sections redacted, and each section of its answer is
//! restored and checked against the section's rules ([`super::rules`]); a
//! section that breaks one keeps its original text, the rest still applies.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use tracing::{debug, info, warn};

use super::policy::{self, OptIn, Policy, Refusal};
use super::rules::{self, Broken, RestoreError};
use crate::audit::log::AuditLog;
use crate::audit::record::{
    now_rfc3339, OwnerRecord, PolicyRecord, SectionRecord, TransformRecord,
};
use crate::config::{Config, ConfigError, OnFailure};
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
    /// Every section it changed broke a rule of the policy.
    Refused,
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
            Self::Refused => "refused",
        }
    }
}

pub struct Router {
    policy: RwLock<Arc<Policy>>,
    audit: Option<Arc<AuditLog>>,
    include_content: bool,
    on_failure: OnFailure,
}

struct OwnerResult {
    client_id: String,
    outcome: Outcome,
    replaced: BTreeMap<String, String>,
    /// Sections whose rewrite broke a rule, and the rule.
    refused: BTreeMap<String, Broken>,
    ignored: Vec<String>,
}

/// What one owner is sent: each section as it is shown (redacted), and what
/// each placeholder of a section stands for.
struct Ask {
    shown: BTreeMap<String, String>,
    hidden: BTreeMap<String, Vec<(u64, String)>>,
}

impl Router {
    /// A router with the policy of a validated config.
    pub fn new(cfg: &Config, audit: Option<Arc<AuditLog>>) -> Result<Self, ConfigError> {
        let policy = Policy::from_config(cfg)?;
        Ok(Self {
            policy: RwLock::new(Arc::new(policy)),
            audit,
            include_content: cfg.audit.include_content,
            on_failure: cfg.audit.on_failure,
        })
    }

    /// The policy now: one snapshot, for one request or one binding.
    pub fn policy(&self) -> Arc<Policy> {
        self.policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Swaps the policy; requests already routing keep the one they took.
    pub fn set_policy(&self, policy: Arc<Policy>) {
        *self.policy.write().unwrap_or_else(|e| e.into_inner()) = policy;
    }

    /// The `policy` record of the policy in force.
    fn policy_record(&self) -> PolicyRecord {
        let policy = self.policy();
        PolicyRecord {
            time: now_rfc3339(),
            policy: policy.policy_document(),
            policy_sha256: policy.policy_sha256(),
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
        let policy = self.policy();
        let policy = &*policy;
        let deadline = tokio::time::Instant::now() + policy.timeout;
        // Snapshot: whoever owns a section now gets this request, nobody else.
        let opt_ins = clients.opt_ins(ahp_session);
        let owners = policy::owners(policy, &opt_ins);
        let requested: BTreeSet<String> = original.keys().cloned().collect();
        let plan = policy::plan(policy, &owners, &requested);

        let asks = plan.asks.iter().map(|(owner, ids)| {
            let ask = redacted(policy, ids, original);
            let allowed = opt_ins
                .iter()
                .find(|o| &o.client_id == owner)
                .and_then(|o| o.allowed.as_ref());
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let call = clients.ask(owner, ahp_session, &ask.shown, left);
            async move {
                let answer = call.await;
                judge(policy, owner, allowed, ids, original, &ask, answer)
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
            policy,
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

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        policy: &Policy,
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
                let refused = results.iter().find_map(|r| r.refused.get(id));
                let decision = match (owned, passthrough.get(id)) {
                    (Some(_), _) if before != after => "transformed".to_string(),
                    (Some(_), _) if refused.is_some() => {
                        format!("refused:{}", refused.map(|b| b.rule()).unwrap_or_default())
                    }
                    // The owner answered, but not this section (or with its own text).
                    (Some((_, Outcome::Transformed | Outcome::Refused)), _) => {
                        "unchanged".to_string()
                    }
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
            for (id, broken) in &r.refused {
                info!(session = %ahp_session, client_id = ?r.client_id, section = %id, rule = %broken.rule(),
                    "rewrite refused by policy; the original text is kept");
            }
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
            policy_sha256: policy.policy_sha256(),
        }
    }
}

/// What `owner` is sent of `ids`: each section redacted by its own rules,
/// placeholders numbered across the whole request.
fn redacted(policy: &Policy, ids: &BTreeSet<String>, original: &BTreeMap<String, String>) -> Ask {
    let mut next = 1;
    let mut ask = Ask {
        shown: BTreeMap::new(),
        hidden: BTreeMap::new(),
    };
    for id in ids {
        let r = rules::redact(&original[id], &policy.rules(id).redact, &mut next);
        ask.shown.insert(id.clone(), r.shown);
        if !r.hidden.is_empty() {
            ask.hidden.insert(id.clone(), r.hidden);
        }
    }
    ask
}

/// What one owner's answer is worth: the answer as a whole first (error,
/// malformed, oversize), then each section restored and checked by its rules.
fn judge(
    policy: &Policy,
    owner: &str,
    allowed: Option<&BTreeSet<String>>,
    asked: &BTreeSet<String>,
    original: &BTreeMap<String, String>,
    ask: &Ask,
    answer: Result<Value, CallError>,
) -> OwnerResult {
    let mut r = OwnerResult {
        client_id: owner.to_owned(),
        outcome: Outcome::Disconnected,
        replaced: BTreeMap::new(),
        refused: BTreeMap::new(),
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
            match policy::validate_answer(policy, asked, &result, bytes) {
                Err(Refusal::Malformed) => Outcome::Malformed,
                Err(Refusal::Oversize) => Outcome::Oversize,
                Ok(acc) => {
                    r.ignored = acc.ignored;
                    apply_rules(policy, allowed, original, ask, acc.replaced, &mut r)
                }
            }
        }
    };
    if !matches!(
        r.outcome,
        Outcome::Transformed | Outcome::Unchanged | Outcome::Refused
    ) {
        r.replaced.clear();
        r.refused.clear();
    }
    r
}

/// Restores and checks each answered section; fills `r.replaced` with what
/// passes and `r.refused` with what breaks a rule.
fn apply_rules(
    policy: &Policy,
    allowed: Option<&BTreeSet<String>>,
    original: &BTreeMap<String, String>,
    ask: &Ask,
    answered: BTreeMap<String, String>,
    r: &mut OwnerResult,
) -> Outcome {
    let none = Vec::new();
    for (id, text) in answered {
        let hidden = ask.hidden.get(&id).unwrap_or(&none);
        let restored = match rules::restore(&text, hidden, policy.max_response_bytes) {
            Ok(t) => t,
            // A placeholder never sent: the answer as a whole is malformed.
            Err(RestoreError::UnknownPlaceholder) => return Outcome::Malformed,
            Err(RestoreError::TooLarge) => return Outcome::Oversize,
        };
        match policy
            .rules(&id)
            .check(&id, allowed, &original[&id], &restored)
        {
            Ok(()) => {
                r.replaced.insert(id, restored);
            }
            Err(broken) => {
                r.refused.insert(id, broken);
            }
        }
    }
    if r.replaced.iter().any(|(id, c)| original.get(id) != Some(c)) {
        Outcome::Transformed
    } else if !r.refused.is_empty() {
        Outcome::Refused
    } else {
        Outcome::Unchanged
    }
}

#[cfg(test)]
#[path = "router_tests.rs"]
mod tests;
