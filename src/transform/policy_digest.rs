//! The effective policy as canonical JSON, and its SHA-256: every audit
//! record carries the hash, a `policy` record carries the policy itself.

use serde_json::{json, Value};

use crate::audit::sha256_hex;
use crate::config::PolicyConfig;

/// The policy as the audit states it (keys sorted, so the same policy always
/// hashes the same), and its SHA-256.
pub fn policy_snapshot(p: &PolicyConfig) -> (Value, String) {
    let mut restricted = p.restricted.clone();
    restricted.sort();
    restricted.dedup();
    let overrides: serde_json::Map<String, Value> = p
        .overrides
        .iter()
        .map(|(id, o)| {
            (
                id.clone(),
                json!({"action": o.action.as_str(), "content": o.content}),
            )
        })
        .collect();
    let v = json!({
        "restricted": restricted,
        "overrides": overrides,
        "transformTimeoutMs": p.transform_timeout.as_millis() as u64,
        "maxSections": p.max_sections,
        "maxResponseBytes": p.max_response_bytes,
    });
    let hash = sha256_hex(v.to_string().as_bytes());
    (v, hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_policy_hashes_the_same_and_any_change_shows() {
        let a = PolicyConfig::default();
        let mut b = PolicyConfig {
            restricted: vec!["safety".into(), "safety".into()],
            ..Default::default()
        };
        assert_eq!(policy_snapshot(&a).1, policy_snapshot(&b).1);
        b.max_sections += 1;
        assert_ne!(policy_snapshot(&a).1, policy_snapshot(&b).1);
        assert_eq!(policy_snapshot(&a).0["restricted"], json!(["safety"]));
    }
}
