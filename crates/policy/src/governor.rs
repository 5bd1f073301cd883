//! The one decision path. Every governed action (an opt-in, a session from
//! an AHP client or an SDK app, a permission, a customization) is asked of
//! the [`Governor`]: it takes the policy in force, runs the operator's Rego
//! policy over the point's one input document ([`rego::Input`], built the
//! same whoever asked), counts the decision, and hands a decision worth a
//! record (anything but a plain allow) to the one [`Recorder`] the join
//! gave it, which logs it and appends it to the audit log. A section
//! rewrite is decided by [`rewrite`]: the section's built-in rules, then
//! Rego; its decision goes inside the transform's own record, which the
//! transform core writes.
//!
//! Adding a point is one new input type (a [`Body`] variant and its
//! [`rego::Point`]) and one call of [`Governor::decide`].

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::rego::{Body, Decision, Input, Subject};
use super::rules::BrokenRule;
use super::{Policy, PolicyReader};

/// A decision worth a record, with what the record names.
#[derive(Debug, Clone)]
pub struct Decided {
    pub decision: Decision,
    /// Who asked (its principal and client are named).
    pub subject: Subject,
    pub session: Option<String>,
    /// What was decided on (the sections of an opt-in, a session's model,
    /// a permission's kind, a customization's kind and name).
    pub about: String,
}

/// Where decisions worth a record go: the join's audit path. One for the
/// whole bridge, so every point's records are written the same way.
pub trait Recorder: Send + Sync {
    fn record(&self, decided: Decided);
}

/// Whether the governor records a decision itself, or hands it back for
/// the caller to record through [`Governor::record`] when it says (a
/// customization is recorded once per session, container and outcome).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recording {
    Now,
    Deferred,
}

/// One governed action, as the governor is asked about it.
pub struct Ask<'a> {
    pub subject: &'a Subject,
    /// The AHP session's URI (or an SDK app's session id), where there is one.
    pub session: Option<&'a str>,
    pub body: Body<'a>,
    /// What the record names the action by.
    pub about: &'a str,
    pub recording: Recording,
}

/// What a governed action came to: allowed, or refused with the reason the
/// requester is told; and the decision, when it is worth a record.
#[derive(Debug, Clone)]
pub struct Verdict {
    refused: Option<String>,
    decided: Option<Decided>,
}

impl Verdict {
    const ALLOWED: Verdict = Verdict {
        refused: None,
        decided: None,
    };

    /// The reason, when the action is refused.
    pub fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    /// The decision worth a record (a [`Recording::Deferred`] ask's, for
    /// [`Governor::record`]).
    pub fn decided(self) -> Option<Decided> {
        self.decided
    }
}

/// The owner every governed action goes through: the policy in force and
/// the one audit path.
pub struct Governor {
    policy: PolicyReader,
    recorder: OnceLock<Arc<dyn Recorder>>,
}

impl Governor {
    pub fn new(policy: PolicyReader) -> Self {
        Self {
            policy,
            recorder: OnceLock::new(),
        }
    }

    /// The audit path, given once by the join (no recorder: decisions are
    /// counted, not recorded: the host alone, in tests).
    pub fn set_recorder(&self, recorder: Arc<dyn Recorder>) {
        let _ = self.recorder.set(recorder);
    }

    /// Decides `ask` with the policy in force, within the policy's own
    /// deadline (`[policy.rego] timeout`); records a decision worth it
    /// unless the ask defers that.
    pub fn decide(&self, ask: Ask<'_>) -> Verdict {
        let policy = self.policy.current();
        let Some(rego) = policy.rego() else {
            return Verdict::ALLOWED;
        };
        let d = rego.decide(
            &Input::new(ask.subject, ask.session, ask.body),
            Duration::MAX,
        );
        if !d.recorded() {
            return Verdict::ALLOWED;
        }
        let refused = d.refuses().then(|| d.reason());
        let decided = Decided {
            decision: d,
            subject: ask.subject.clone(),
            session: ask.session.map(str::to_owned),
            about: ask.about.to_owned(),
        };
        if ask.recording == Recording::Now {
            self.record(decided);
            return Verdict {
                refused,
                decided: None,
            };
        }
        Verdict {
            refused,
            decided: Some(decided),
        }
    }

    /// The one audit path of a decision.
    pub fn record(&self, decided: Decided) {
        if let Some(r) = self.recorder.get() {
            r.record(decided);
        }
    }
}

/// One section an owner rewrote, as [`rewrite`] is asked about it.
pub struct Rewrite<'a> {
    pub subject: &'a Subject,
    pub session: &'a str,
    pub section: &'a str,
    pub owner: &'a str,
    /// The sections the owner's principal may transform (`None`: any).
    pub allowed: Option<&'a BTreeSet<String>>,
    pub before: &'a str,
    pub after: &'a str,
    /// The transform request's one deadline (read only when Rego decides).
    pub deadline: tokio::time::Instant,
}

/// A rewrite's decision: the section's built-in rules, then (if they pass
/// and the text changed) the operator's Rego policy within `budget`. The
/// Rego decision worth a record comes back for the transform's own record.
pub fn rewrite(policy: &Policy, w: &Rewrite<'_>) -> (Result<(), BrokenRule>, Option<Decision>) {
    let built_in = policy
        .rules(w.section)
        .check(w.section, w.allowed, w.before, w.after);
    if let Err(broken) = built_in {
        return (Err(broken), None);
    }
    let Some(rego) = policy.rego() else {
        return (Ok(()), None);
    };
    if w.before == w.after {
        return (Ok(()), None);
    }
    let body = Body::Transform {
        section: w.section,
        before: w.before,
        after: w.after,
        owner: w.owner,
    };
    let budget = w
        .deadline
        .saturating_duration_since(tokio::time::Instant::now());
    let d = rego.decide(&Input::new(w.subject, Some(w.session), body), budget);
    let verdict = if d.refuses() {
        Err(BrokenRule::Rego)
    } else {
        Ok(())
    };
    (verdict, d.recorded().then_some(d))
}
