//! SDK apps governed too: a listener (`[sdk] listen`) speaking the
//! runtime's own JSON-RPC to apps built on the official Copilot SDKs, each
//! connection passed to a runtime of the pool ([`conn`]) under the
//! operator's prompt policy ([`app_vet`]), its transform callbacks routed like
//! an AHP client's ([`app_clients`]), every decision in the audit log.
//!
//! The imports go one way: `conn.rs` (the listener and each connection's
//! tasks) uses the gate here; the gate uses `app_conn.rs` (a connection as
//! the gate, its tasks and the router's view of the app hold it),
//! `conns.rs`, `mirror.rs` and `vet.rs`; none of these uses `conn.rs`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use tracing::{debug, error, info};

use self::app_conn::{AppConn, DISPOSED};
use self::app_vet::{vet, Rules, Vetted, Violation};
use super::customizing::Customizing;
use super::pool::{Pool, ReachError, Starts};
use crate::ahp::uri::file_uri_of;
use crate::ahp::Principal;
use crate::audit::sha256_hex;
use crate::audit::AuditLog;
use crate::audit::{SdkDecision, SdkFinding, SdkSessionRecord};
use crate::bridge::turn::SHUTTING_DOWN;
use crate::config::OnViolation;
use crate::policy::PolicyReader;
use crate::policy::{lexical, session_config, Body, ClientKind};
use crate::policy::{Ask, Governor, Recording};
use crate::runtime::AppSessionParams;
use crate::runtime::Reach;
use crate::telemetry::Escaped;
use crate::transform::Router;

mod app_clients;
mod app_conn;
pub(crate) mod app_vet;
mod conn;
mod conns;
mod gate_error;
pub(crate) mod mirror;
mod sdk_settings;

// The listener is with the connections it serves: they use the gate, the
// gate does not use them.
pub(crate) use conn::listen;
pub(crate) use gate_error::SdkListenError;
pub(crate) use sdk_settings::SdkSettings;

/// What SDK connections share: the settings, who they act as, the way to
/// a runtime, the router and the audit log.
pub struct SdkGate {
    /// `[sdk]`, its principal and its connections' bounds, as at start.
    settings: SdkSettings,
    token_sha256: Option<[u8; 32]>,
    /// Where `[policy.customizations] client_mcp_servers` is read (a
    /// reload changes it).
    customizing: Arc<Customizing>,
    /// The SDK sessions as the AHP side shows them.
    mirror: mirror::Mirror,
    /// The open connections, by number.
    conns: conns::Conns,
    router: Arc<Router>,
    policy: PolicyReader,
    /// The one decision path: an app's session is decided as a client's is.
    governor: Arc<Governor>,
    audit: Option<Arc<AuditLog>>,
    pool: Arc<Pool>,
    owner: Weak<dyn Starts>,
    next_slot: AtomicUsize,
    next_conn: AtomicU64,
}

/// The parts of the bridge an SDK gate works with.
pub(super) struct Parts {
    pub host: Weak<crate::ahp::Host>,
    pub pool: Arc<Pool>,
    pub owner: Weak<dyn Starts>,
    pub router: Arc<Router>,
    pub policy: PolicyReader,
    pub customizing: Arc<Customizing>,
    /// The one decision path (the host's).
    pub governor: Arc<Governor>,
}

impl SdkGate {
    /// The gate: its start-only `settings`, and the bridge's `parts` it
    /// shares (the pool, the router, the policy and customizations that a
    /// reload replaces).
    pub(super) fn new(
        settings: SdkSettings,
        parts: Parts,
        audit: Option<Arc<AuditLog>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            mirror: mirror::Mirror::new(parts.host, settings.principal.clone()),
            conns: conns::Conns::default(),
            token_sha256: settings
                .sdk
                .token()
                .map(|t| Sha256::digest(t.as_bytes()).into()),
            customizing: parts.customizing,
            governor: parts.governor,
            router: parts.router,
            policy: parts.policy,
            audit,
            pool: parts.pool,
            owner: parts.owner,
            next_slot: AtomicUsize::new(0),
            next_conn: AtomicU64::new(1),
            settings,
        })
    }

    /// Whether `given` is the connection token apps must give (compared as
    /// digests, so the time taken says nothing of the token).
    fn token_matches(&self, given: Option<&str>) -> bool {
        match (&self.token_sha256, given) {
            (None, _) => true,
            (Some(want), Some(g)) => {
                let got: [u8; 32] = Sha256::digest(g.as_bytes()).into();
                got.iter().zip(want).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
            }
            (Some(_), None) => false,
        }
    }

    fn conns(&self) -> &conns::Conns {
        &self.conns
    }

    /// The bridge stops: every open connection ends (its running turns
    /// ended "shutting down" on both sides, its queues written, then
    /// closed), no new one is served. See [`Self::all_closed`].
    pub fn stop(&self) {
        for c in self.conns.stop() {
            // The mirrored turns end now, before the stop closes the AHP
            // side's connections, so observers see the end; the app is told
            // by its connection's task, which then closes (see `AppConn::finish`).
            let running = c
                .session_ids()
                .into_iter()
                .filter(|s| self.mirror.end(s, "shutdown", SHUTTING_DOWN))
                .collect();
            c.stopped(running);
        }
    }

    /// Waits until every SDK connection has closed.
    pub async fn all_closed(&self) {
        self.conns.all_closed().await;
    }

    /// An admin disposed the AHP session `uri`: when it shows an SDK
    /// session, its running turn ends, and the app that owns it is told and
    /// no longer owns it (see `AppConn::disposed`). Whether `uri` was one.
    pub async fn disposed(&self, uri: &str) -> bool {
        let Some(id) = mirror::session_of(uri) else {
            return false;
        };
        let running = self.mirror.end(id, "disposed", DISPOSED);
        match self.conns.owner_of(id) {
            Some(c) => c.disposed(id, running).await,
            None => debug!(session = %Escaped(id), "a disposed SDK session's app is gone"),
        }
        true
    }

    /// A runtime for connection `conn`: the pool's, in turn.
    async fn reach(&self, _conn: u64) -> Result<Reach, ReachError> {
        let slot = self.next_slot.fetch_add(1, Ordering::Relaxed) % self.pool.size();
        self.pool.reach(slot, self.owner.clone()).await
    }

    fn principal(&self) -> Arc<Principal> {
        self.settings.principal.clone()
    }

    fn mirror(&self) -> &mirror::Mirror {
        &self.mirror
    }

    fn router(&self) -> &Router {
        &self.router
    }

    /// `session.create` / `session.resume` held to the policy: `Ok(None)`
    /// to send on as it came, `Ok(Some)` the params to send instead, `Err`
    /// the refusal (message, data). Either way an `sdk_session` record.
    async fn vet_session(
        &self,
        shared: &AppConn,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Option<Map<String, Value>>, (String, Value)> {
        let bad =
            |e: serde_json::Error| (format!("{method}: params: {e}"), json!({"rule": "params"}));
        let raw = params.map_or("{}", RawValue::get);
        let object: Map<String, Value> = serde_json::from_str(raw).map_err(bad)?;
        let typed: AppSessionParams = serde_json::from_str(raw).map_err(bad)?;
        let policy = self.policy.current();
        let strip = self.settings.sdk.on_violation == OnViolation::Strip;
        let customization_policy = self.customizing.customization_policy();
        let rules = Rules {
            policy: &policy,
            servers: &customization_policy.client_mcp_servers,
        };
        let mut v: Vetted = vet(&rules, &typed, &object);
        let session = typed.session_id.clone().unwrap_or_default();
        // The built-in rules first; a Rego deny refuses whatever on_violation says.
        let mut refused = !v.violations.is_empty() && !strip;
        if method == "session.create" && !refused {
            if let Some(why) = self.decide_session(shared, &session, &object) {
                v.violations.insert(
                    0,
                    Violation {
                        what: "session".into(),
                        rule: "rego".into(),
                        message: why,
                    },
                );
                refused = true;
            }
        }
        let on_violation = self.settings.sdk.on_violation.as_str();
        let decision = match (refused, v.violations.is_empty()) {
            (true, _) => SdkDecision::Refused,
            (false, true) => SdkDecision::Allowed,
            (false, false) => SdkDecision::Stripped,
        };
        let sent = v.rewritten.clone().map(Value::Object);
        let record = SdkSessionRecord {
            time: jiff::Timestamp::now().to_string(),
            session: session.clone(),
            method: method.to_owned(),
            client: shared.client.clone(),
            principal: self.settings.principal.name.clone(),
            decision,
            findings: v
                .violations
                .iter()
                .map(|f| SdkFinding {
                    what: f.what.clone(),
                    rule: f.rule.clone(),
                    // A Rego deny is always a refusal.
                    action: if f.rule == "rego" {
                        "refuse"
                    } else {
                        on_violation
                    }
                    .into(),
                })
                .collect(),
            redacted: v.redacted.clone(),
            transform_sections: v.transform_sections.clone(),
            mcp_servers: v.mcp_servers.clone(),
            params_sha256: (!refused).then(|| match &sent {
                Some(p) => sha256_hex(p.to_string().as_bytes()),
                None => sha256_hex(raw.as_bytes()),
            }),
            policy_sha256: policy.policy_sha256(),
        };
        self.write(record).await;
        if refused {
            let first = &v.violations[0];
            info!(client = %shared.client, session = %crate::telemetry::Escaped(&session), rule = %first.rule, "SDK session refused by policy");
            return Err((
                first.message.clone(),
                json!({"rule": first.rule, "what": first.what}),
            ));
        }
        if !session.is_empty() {
            self.mirror.session(&session);
            shared
                .sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(session, v.transform_sections);
        }
        Ok(v.rewritten)
    }

    /// `ahp.session`: the operator's Rego policy over the app's
    /// `session.create` as it sent it (with `workingDirectories` added, as
    /// an AHP client's has them); the reason when it refuses.
    fn decide_session(
        &self,
        shared: &AppConn,
        session: &str,
        params: &Map<String, Value>,
    ) -> Option<String> {
        // Every folder the session may work in, as paths with `..` resolved
        // and as `file:` URIs: the document an AHP client's session has.
        let extra = params
            .get("additionalDirectories")
            .and_then(Value::as_array);
        let sent: Vec<&str> = params
            .get("workingDirectory")
            .into_iter()
            .chain(extra.into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        let paths: Vec<String> = sent.iter().map(|d| lexical(d)).collect();
        let uris: Vec<String> = sent
            .iter()
            .map(|d| file_uri_of(std::path::Path::new(d)))
            .collect();
        let model = params.get("model").and_then(Value::as_str);
        let provider = params
            .get("provider")
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str);
        let sent = Value::Object(params.clone());
        let config = session_config(provider, &paths, &uris, model, Some(&sent));
        let subject = self
            .settings
            .principal
            .subject(Some(&shared.client), ClientKind::Sdk);
        let at = (!session.is_empty()).then_some(session);
        let body = Body::Session { config: &config };
        let verdict = self.governor.decide(Ask {
            subject: &subject,
            session: at,
            body,
            about: model.unwrap_or("(default model)"),
            recording: Recording::Now,
        });
        verdict.refused().map(str::to_owned)
    }

    /// Appends a record before the request goes on (audit before effect).
    async fn write(&self, record: SdkSessionRecord) {
        let Some(log) = self.audit.clone() else {
            return;
        };
        let written = tokio::task::spawn_blocking(move || log.append(&record)).await;
        match written {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => error!("sdk_session record not written: {e}"),
            Err(e) => error!("sdk_session record not written: {e}"),
        }
    }
}
