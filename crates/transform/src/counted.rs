//! What one transform request adds to the metrics, read off its record:
//! the request's outcome, each section's decision, each rule that refused
//! a rewrite. Every label is a fixed word or a catalogue id.

use ahp_bridge_audit::{SectionDecision, TransformRecord};
use ahp_bridge_telemetry::metrics;

/// The request as a whole: the first that holds of transformed, refused,
/// an owner's failure (timeout, error, ...), unchanged, passthrough.
fn outcome(record: &TransformRecord) -> &'static str {
    let any = |f: fn(&SectionDecision) -> bool| record.sections.iter().any(|s| f(&s.decision));
    if any(|d| matches!(d, SectionDecision::Transformed)) {
        return "transformed";
    }
    if any(|d| matches!(d, SectionDecision::Refused(_))) {
        return "refused";
    }
    let failed = record.sections.iter().find_map(|s| match s.decision {
        SectionDecision::Failed(o) => Some(o.as_str()),
        _ => None,
    });
    if let Some(owner_outcome) = failed {
        return owner_outcome;
    }
    if any(|d| matches!(d, SectionDecision::Unchanged)) {
        return "unchanged";
    }
    "passthrough"
}

fn decision(d: &SectionDecision) -> &'static str {
    match d {
        SectionDecision::Transformed => "transformed",
        SectionDecision::Unchanged => "unchanged",
        SectionDecision::Refused(_) => "refused",
        SectionDecision::Failed(_) => "failed",
        SectionDecision::Passthrough(_) => "passthrough",
    }
}

pub(crate) fn count(record: &TransformRecord) {
    let m = metrics();
    m.transform_request(outcome(record));
    for s in &record.sections {
        m.transform_section(&s.id, decision(&s.decision));
        if let SectionDecision::Refused(rule) = &s.decision {
            m.policy_refusal(&s.id, rule.to_string());
        }
    }
}
