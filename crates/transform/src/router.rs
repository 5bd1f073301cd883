//! One runtime `systemMessage.transform` request: snapshot the owners, ask
//! each owner once (batched) under ONE deadline, validate, merge, audit, and
//! ALWAYS answer: the runtime has no timeout of its own and would wait forever.
//!
//! The router owns the deadline (`[policy] transform_timeout`): every owner's
//! call is given the time left until that one instant, so the answer goes back
//! by then plus the audit write (audit before answer).
//!
//! The policy is one snapshot per request (a reload replaces it whole and
//! the next request sees the new one). Each owner is shown its sections
//! redacted, and each section of its answer is restored and checked against
//! the section's rules; a section that breaks one keeps its original text,
//! the rest still applies. The router decides; the record it builds goes to
//! the [`AuditPort`] the bridge gives it.

use ahp_bridge_telemetry::Escaped;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, info, warn, Span};

use super::counted;
use super::plan::{self, Oversize};
use super::{AskError, AuditPort, ClientAnswer, Sections, TransformClients};
use ahp_bridge_audit::DecisionEntry;
use ahp_bridge_audit::{
    now_rfc3339, OwnerOutcome, OwnerRecord, SectionDecision, SectionRecord, TransformRecord,
};
use ahp_bridge_base::config::{AuditConfig, OnFailure};
use ahp_bridge_policy::BrokenRule;
use ahp_bridge_policy::{owners, OptIn, Policy, PolicyReader};
use ahp_bridge_policy::{redact, restore_redacted, RestoreError};
use ahp_bridge_policy::{rewrite, Rewrite};
use ahp_bridge_policy::{Decision, Subject};

/// What the router does with records besides writing them.
#[derive(Debug, Clone, Copy)]
pub struct RecordOptions {
    /// Keep each section's text in its record (`[audit] include_content`).
    pub include_content: bool,
    /// What a record that cannot be written means (`[audit] on_failure`).
    pub on_failure: OnFailure,
}

impl RecordOptions {
    pub fn from_config(cfg: &AuditConfig) -> Self {
        Self {
            include_content: cfg.include_content,
            on_failure: cfg.on_failure,
        }
    }
}

pub struct Router {
    policy: PolicyReader,
    audit: Option<Arc<dyn AuditPort>>,
    options: RecordOptions,
}

/// How one owner's answer was judged.
struct Judged {
    client_id: String,
    principal: Option<String>,
    outcome: OwnerOutcome,
    replaced: Sections,
    /// Sections whose rewrite broke a rule, and the rule.
    refused: BTreeMap<String, BrokenRule>,
    /// The Rego decisions worth a record (deny, would deny, warn, error).
    rego: BTreeMap<String, Decision>,
    ignored: Vec<String>,
}

/// What one owner's answer is judged against beyond the policy: the owner
/// as the session's opt-ins have it (its allow-list, who it is to the Rego
/// policy), the session, and the request's one deadline.
struct OwnerContext<'a> {
    opt_in: Option<&'a OptIn>,
    session: &'a str,
    deadline: tokio::time::Instant,
}

impl OwnerContext<'_> {
    /// The sections its principal may transform (`None`: any).
    fn allowed(&self) -> Option<&BTreeSet<String>> {
        self.opt_in.and_then(|o| o.allowed.as_ref())
    }
}

/// What one owner is sent: each section as it is shown (redacted), and what
/// each placeholder of a section stands for.
struct RouterAsk {
    shown: Sections,
    hidden: BTreeMap<String, Vec<(u64, String)>>,
}

impl Router {
    pub fn new(
        policy: PolicyReader,
        audit: Option<Arc<dyn AuditPort>>,
        options: RecordOptions,
    ) -> Self {
        Self {
            policy,
            audit,
            options,
        }
    }

    /// The policy now (each request takes its own snapshot).
    pub fn policy(&self) -> Arc<Policy> {
        self.policy.current()
    }

    /// Routes one request outside any trace; see [`Router::route_under`].
    pub async fn route(
        &self,
        clients: &dyn TransformClients,
        ahp_session: &str,
        runtime_session: &str,
        original: &Sections,
    ) -> Sections {
        let none = Span::none();
        self.route_under(&none, clients, ahp_session, runtime_session, original)
            .await
    }

    /// Routes one request; returns the content for every section asked.
    /// Each owner asked gets a `systemMessageTransform` span under `parent`
    /// (the turn's), naming the sections, the owner and the outcome.
    pub async fn route_under(
        &self,
        parent: &Span,
        clients: &dyn TransformClients,
        ahp_session: &str,
        runtime_session: &str,
        original: &Sections,
    ) -> Sections {
        let started = Instant::now();
        let policy = self.policy.current();
        let deadline = tokio::time::Instant::now() + policy.timeout();
        // Snapshot: whoever owns a section now gets this request, nobody else.
        let opt_ins = clients.opt_ins(ahp_session);
        let owners = owners(&policy, &opt_ins);
        let requested: BTreeSet<String> = original.keys().cloned().collect();
        let plan = plan::plan(&policy, &owners, &requested);

        let asks = plan.asks.iter().map(|(owner, ids)| {
            let ask = redacted(&policy, ids, original);
            let context = OwnerContext {
                opt_in: opt_ins.iter().find(|o| &o.client_id == owner),
                session: ahp_session,
                deadline,
            };
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let call = clients.ask(owner, ahp_session, &ask.shown, left);
            let policy = &*policy;
            let span = ask_span(parent, owner, ids);
            async move {
                let answer = call.await;
                let judged = judge(policy, owner, ids, original, &ask, answer, &context);
                let failed = !judged.outcome.answered();
                span.record("ahp.transform.outcome", judged.outcome.as_str());
                span.record("otel.status_code", if failed { "ERROR" } else { "OK" });
                judged
            }
        });
        let judged = futures_util::future::join_all(asks).await;

        let merged = merge(original, &judged);
        let record = RouterRecord {
            policy: &policy,
            plan: &plan,
            judged: &judged,
            include_content: self.options.include_content,
        }
        .build(
            ahp_session,
            runtime_session,
            original,
            &merged,
            started.elapsed(),
        );
        log_outcomes(ahp_session, &plan, &judged);
        counted::count(&record);
        // Audit before answer.
        let Some(audit) = &self.audit else {
            return merged;
        };
        if let Err(e) = audit.append(record).await {
            if self.options.on_failure == OnFailure::KeepOriginal && merged != *original {
                warn!(session = %ahp_session, "audit record not written ({e}); on_failure = keep-original: the runtime gets the original sections");
                return original.clone();
            }
            warn!(session = %ahp_session, "audit record not written: {e}");
        }
        merged
    }
}

/// The span of one `systemMessageTransform` request to `owner`: open until
/// its answer is judged. Section ids and the client id, never section text.
fn ask_span(parent: &Span, owner: &str, ids: &BTreeSet<String>) -> Span {
    let sections = ids.iter().map(String::as_str).collect::<Vec<_>>().join(",");
    tracing::info_span!(
        parent: parent,
        "systemMessageTransform",
        otel.status_code = tracing::field::Empty,
        ahp.transform.owner = owner,
        ahp.transform.sections = sections.as_str(),
        ahp.transform.outcome = tracing::field::Empty,
    )
}

/// The original sections with every accepted rewrite in place.
fn merge(original: &Sections, judged: &[Judged]) -> Sections {
    let mut merged = original.clone();
    for j in judged {
        for (id, c) in &j.replaced {
            merged.insert(id.clone(), c.clone());
        }
    }
    merged
}

/// One request's record, from the decisions made.
struct RouterRecord<'a> {
    policy: &'a Policy,
    plan: &'a plan::Plan,
    judged: &'a [Judged],
    include_content: bool,
}

impl RouterRecord<'_> {
    fn build(
        &self,
        ahp_session: &str,
        runtime_session: &str,
        original: &Sections,
        merged: &Sections,
        latency: Duration,
    ) -> TransformRecord {
        let sections = original
            .iter()
            .map(|(id, before)| {
                let after = &merged[id];
                let owner = self.owner_of(id);
                let decision = self.decision(id, owner.map(|j| j.outcome), before != after);
                let rego = owner.and_then(|j| {
                    let d = j.rego.get(id)?;
                    Some(DecisionEntry::of(d, j.principal.as_deref()))
                });
                let owner = owner.map(|j| j.client_id.as_str());
                let mut s =
                    SectionRecord::new(id, decision, owner, before, after, self.include_content);
                s.rego_decision = rego;
                s
            })
            .collect();
        TransformRecord {
            time: now_rfc3339(),
            session: ahp_session.to_owned(),
            runtime_session: runtime_session.to_owned(),
            owners: self
                .judged
                .iter()
                .map(|j| OwnerRecord {
                    client_id: j.client_id.clone(),
                    principal: j.principal.clone(),
                    outcome: j.outcome,
                    ignored: j.ignored.clone(),
                })
                .collect(),
            sections,
            latency_us: latency.as_micros() as u64,
            policy_sha256: self.policy.policy_sha256(),
        }
    }

    /// The owner asked for `id`, with how its answer was judged.
    fn owner_of(&self, id: &str) -> Option<&Judged> {
        let (owner, _) = self.plan.asks.iter().find(|(_, ids)| ids.contains(id))?;
        self.judged.iter().find(|j| &j.client_id == owner)
    }

    /// What happened to section `id`: asked of an owner whose answer came
    /// out as `outcome`, or passed through as the plan says.
    fn decision(&self, id: &str, outcome: Option<OwnerOutcome>, changed: bool) -> SectionDecision {
        let Some(outcome) = outcome else {
            // Not asked of anyone: the plan put it aside, with its reason.
            return SectionDecision::Passthrough(self.plan.passthrough[id]);
        };
        let refused = self.judged.iter().find_map(|j| j.refused.get(id));
        match (changed, refused) {
            (true, _) => SectionDecision::Transformed,
            (false, Some(rule)) => SectionDecision::Refused(*rule),
            // The owner answered, but not this section (or with its own text).
            (false, None) if outcome.answered() => SectionDecision::Unchanged,
            (false, None) => SectionDecision::Failed(outcome),
        }
    }
}

/// One line per owner and per refused section, at info (no section text).
fn log_outcomes(ahp_session: &str, plan: &plan::Plan, judged: &[Judged]) {
    for j in judged {
        let sections = plan.asks.get(&j.client_id);
        info!(session = %ahp_session, client = %Escaped(&j.client_id), outcome = j.outcome.as_str(),
            sections = ?sections, ignored = ?j.ignored, "transform");
        for (id, rule) in &j.refused {
            info!(session = %ahp_session, client = %Escaped(&j.client_id), section = %id, rule = %rule,
                "rewrite refused by policy; the original text is kept");
        }
        for (id, d) in &j.rego {
            info!(session = %ahp_session, client = %Escaped(&j.client_id), section = %id,
                outcome = d.outcome.as_str(), messages = %Escaped(&d.reason()), "rego decision on a rewrite");
        }
    }
}

/// What `owner` is sent of `ids`: each section redacted by its own rules,
/// placeholders numbered across the whole request.
fn redacted(policy: &Policy, ids: &BTreeSet<String>, original: &Sections) -> RouterAsk {
    let mut next = 1;
    let mut ask = RouterAsk {
        shown: BTreeMap::new(),
        hidden: BTreeMap::new(),
    };
    for id in ids {
        let r = redact(&original[id], &policy.rules(id).redact, &mut next);
        ask.shown.insert(id.clone(), r.shown);
        if !r.hidden.is_empty() {
            ask.hidden.insert(id.clone(), r.hidden);
        }
    }
    ask
}

/// What one owner's answer is worth: the answer as a whole first (missing,
/// malformed, oversize), then each section restored and checked by its rules.
fn judge(
    policy: &Policy,
    owner: &str,
    asked: &BTreeSet<String>,
    original: &Sections,
    ask: &RouterAsk,
    answer: Result<ClientAnswer, AskError>,
    context: &OwnerContext<'_>,
) -> Judged {
    let mut j = Judged {
        client_id: owner.to_owned(),
        principal: context.opt_in.and_then(|o| o.subject.principal.clone()),
        outcome: OwnerOutcome::Disconnected,
        replaced: BTreeMap::new(),
        refused: BTreeMap::new(),
        rego: BTreeMap::new(),
        ignored: vec![],
    };
    j.outcome = match answer {
        Err(AskError::Timeout) => OwnerOutcome::Timeout,
        Err(AskError::Disconnected) => OwnerOutcome::Disconnected,
        Err(AskError::Failed) => {
            debug!(client = %Escaped(owner), "client answered the transform with an error");
            OwnerOutcome::Error
        }
        // A huge answer is oversize whatever its shape.
        Err(AskError::Malformed { bytes }) if bytes > policy.max_response_bytes() => {
            OwnerOutcome::Oversize
        }
        Err(AskError::Malformed { .. }) => OwnerOutcome::Malformed,
        Ok(answer) => match plan::validate_answer(policy, asked, answer) {
            Err(Oversize) => OwnerOutcome::Oversize,
            Ok(accepted) => {
                j.ignored = accepted.ignored;
                apply_rules(policy, original, ask, accepted.replaced, context, &mut j)
            }
        },
    };
    if !j.outcome.answered() {
        j.replaced.clear();
        j.refused.clear();
        j.rego.clear();
    }
    j
}

/// Restores and checks each answered section; fills `j.replaced` with what
/// passes and `j.refused` with what breaks a rule. The built-in rules
/// first; a rewrite that passes them goes to the operator's Rego policy.
fn apply_rules(
    policy: &Policy,
    original: &Sections,
    ask: &RouterAsk,
    answered: Sections,
    context: &OwnerContext<'_>,
    j: &mut Judged,
) -> OwnerOutcome {
    let none = Vec::new();
    let nobody = Subject::nobody();
    for (id, text) in answered {
        let hidden = ask.hidden.get(&id).unwrap_or(&none);
        let restored = match restore_redacted(&text, hidden, policy.max_response_bytes()) {
            Ok(t) => t,
            // A placeholder never sent: the answer as a whole is malformed.
            Err(RestoreError::UnknownPlaceholder) => return OwnerOutcome::Malformed,
            Err(RestoreError::TooLarge) => return OwnerOutcome::Oversize,
        };
        let asked = Rewrite {
            subject: context.opt_in.map_or(&nobody, |o| &o.subject),
            session: context.session,
            section: &id,
            owner: &j.client_id,
            allowed: context.allowed(),
            before: &original[&id],
            after: &restored,
            deadline: context.deadline,
        };
        let (checked, decision) = rewrite(policy, &asked);
        if let Some(d) = decision {
            j.rego.insert(id.clone(), d);
        }
        match checked {
            Ok(()) => {
                j.replaced.insert(id, restored);
            }
            Err(broken) => {
                j.refused.insert(id, broken);
            }
        }
    }
    if j.replaced.iter().any(|(id, c)| original.get(id) != Some(c)) {
        OwnerOutcome::Transformed
    } else if !j.refused.is_empty() {
        OwnerOutcome::Refused
    } else {
        OwnerOutcome::Unchanged
    }
}

#[cfg(test)]
#[path = "router_tests.rs"]
mod tests;
