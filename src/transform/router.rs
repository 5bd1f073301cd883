//! One runtime `systemMessage.transform` request: snapshot the owners, ask
//! each owner once (batched) under one shared deadline, validate, merge,
//! audit, and ALWAYS answer the runtime: the runtime has no timeout of its own.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tracing::{debug, info, warn};

use super::policy::{self, OptIn, Policy, Refusal};
use crate::ahp::host::{now_iso, Host};
use crate::audit::log::AuditLog;
use crate::audit::sha256_hex;
use crate::config::Config;
use crate::jsonrpc::CallError;

/// The method name clients answer (server -> client request).
pub const METHOD: &str = "systemMessageTransform";

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
    host: Weak<Host>,
    pub policy: Policy,
    timeout: Duration,
    audit: Option<Arc<AuditLog>>,
    include_content: bool,
}

struct OwnerResult {
    client_id: String,
    outcome: Outcome,
    replaced: BTreeMap<String, String>,
    ignored: Vec<String>,
}

impl Router {
    pub fn new(host: Weak<Host>, cfg: &Config, audit: Option<Arc<AuditLog>>) -> Self {
        Self {
            host,
            policy: Policy {
                restricted: cfg.policy.restricted.iter().cloned().collect(),
                overridden: cfg.policy.overrides.keys().cloned().collect(),
                max_sections: cfg.policy.max_sections,
                max_response_bytes: cfg.policy.max_response_bytes,
            },
            timeout: cfg.policy.transform_timeout,
            audit,
            include_content: cfg.audit.include_content,
        }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The answer for the runtime: `{sections: {ID: {content}}}` for every section asked.
    pub async fn handle(&self, ahp_session: &str, runtime_session: &str, params: &Value) -> Value {
        let original: BTreeMap<String, String> = params["sections"]
            .as_object()
            .map(|o| {
                o.iter()
                    .filter_map(|(k, v)| v["content"].as_str().map(|c| (k.clone(), c.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        let merged = self.route(ahp_session, runtime_session, &original).await;
        let sections: Map<String, Value> = merged
            .into_iter()
            .map(|(k, v)| (k, json!({"content": v})))
            .collect();
        json!({"sections": sections})
    }

    /// Routes one request; returns the content for each section.
    pub async fn route(
        &self,
        ahp_session: &str,
        runtime_session: &str,
        original: &BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + self.timeout;
        let Some(host) = self.host.upgrade() else {
            return original.clone();
        };
        // Snapshot: whoever owns a section now gets this request, nobody else.
        let clients: Vec<OptIn> = host
            .active_clients(ahp_session)
            .iter()
            .map(OptIn::from)
            .collect();
        let owners = policy::owners(&self.policy, &clients);
        let requested: BTreeSet<String> = original.keys().cloned().collect();
        let plan = policy::plan(&self.policy, &owners, &requested);

        let asks = plan.asks.iter().map(|(owner, ids)| {
            let peer = host.client_peer(owner);
            let sections: Map<String, Value> = ids.iter().map(|id| (id.clone(), json!({"content": original[id]}))).collect();
            let params = json!({"channel": ahp_session, "sections": sections});
            let policy = &self.policy;
            async move {
                let mut r = OwnerResult { client_id: owner.clone(), outcome: Outcome::Disconnected, replaced: BTreeMap::new(), ignored: vec![] };
                let Some(peer) = peer else { return r };
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                r.outcome = match peer.call(METHOD, params, left).await {
                    Err(CallError::Timeout(_)) => Outcome::Timeout,
                    Err(CallError::Closed) => Outcome::Disconnected,
                    Err(CallError::Rpc(e)) => {
                        debug!(client_id = %owner, "client answered the transform with an error: {e}");
                        Outcome::Error
                    }
                    Ok(result) => {
                        let bytes = result.to_string().len();
                        match policy::validate_answer(policy, ids, &result, bytes) {
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
        });
        // One shared deadline; the margin covers scheduling only.
        let results = tokio::time::timeout_at(deadline + Duration::from_millis(250), futures_util::future::join_all(asks))
            .await
            .unwrap_or_else(|_| {
                warn!(session = %ahp_session, "transform owners overran the deadline; answering with the originals");
                vec![]
            });

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
        let latency = started.elapsed();
        self.record(
            ahp_session,
            runtime_session,
            original,
            &merged,
            &plan.passthrough,
            &section_owner,
            &results,
            latency,
        );
        merged
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
    ) {
        let sections: Vec<Value> = original
            .iter()
            .map(|(id, before)| {
                let after = &merged[id];
                let decision = match (section_owner.get(id.as_str()), passthrough.get(id)) {
                    (Some(_), _) if before != after => "transformed".to_string(),
                    (Some((_, o)), _) => o.as_str().to_string(),
                    (None, Some(reason)) => format!("passthrough:{reason}"),
                    (None, None) => "passthrough:deadline".to_string(),
                };
                let mut s = json!({
                    "id": id, "decision": decision,
                    "owner": section_owner.get(id.as_str()).map(|(c, _)| *c),
                    "sha256Before": sha256_hex(before.as_bytes()), "sha256After": sha256_hex(after.as_bytes()),
                    "lenBefore": before.len(), "lenAfter": after.len(),
                });
                if self.include_content {
                    s["contentBefore"] = json!(before);
                    s["contentAfter"] = json!(after);
                }
                s
            })
            .collect();
        let owners: Vec<Value> = results
            .iter()
            .map(|r| json!({"clientId": r.client_id, "outcome": r.outcome.as_str(), "ignored": r.ignored}))
            .collect();
        for r in results {
            info!(session = %ahp_session, client_id = %r.client_id, outcome = r.outcome.as_str(),
                sections = ?section_owner.iter().filter(|(_, (c, _))| *c == r.client_id).map(|(id, _)| *id).collect::<Vec<_>>(),
                ignored = ?r.ignored, "transform");
        }
        debug!(session = %ahp_session, ?sections, "transform hashes");
        let Some(log) = &self.audit else { return };
        let record = json!({
            "time": now_iso(), "session": ahp_session, "runtimeSession": runtime_session,
            "owners": owners, "sections": sections, "latencyUs": latency.as_micros() as u64,
        });
        if let Err(e) = log.append(record) {
            warn!("audit record not written: {e}");
        }
    }
}
