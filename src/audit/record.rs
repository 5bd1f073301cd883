//! The audit record of one `systemMessage.transform` request, typed: what
//! each owner did, and for every section the hashes of its text before and
//! after (its content too only when the operator asks for it).

use serde::Serialize;

use super::sha256_hex;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TransformRecord {
    pub time: String,
    /// The AHP session URI.
    pub session: String,
    pub runtime_session: String,
    pub owners: Vec<OwnerRecord>,
    pub sections: Vec<SectionRecord>,
    /// From the runtime's request to our answer, in microseconds.
    pub latency_us: u64,
    /// SHA-256 of the effective policy's canonical serialization, as the
    /// transform core computed it for this request.
    pub policy_sha256: String,
}

/// How one owner's part of the request ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerRecord {
    pub client_id: String,
    /// `transformed`, `unchanged`, `refused` (every change broke a rule),
    /// `timeout`, `error`, `malformed`, `oversize`, `disconnected`.
    pub outcome: &'static str,
    /// Section ids the owner answered without being asked for them.
    pub ignored: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SectionRecord {
    pub id: String,
    /// `transformed`, `unchanged`, `refused:RULE` (e.g. `refused:append-only`,
    /// `refused:deny[0]`), an owner's outcome, or `passthrough:REASON`.
    pub decision: String,
    pub owner: Option<String>,
    pub sha256_before: String,
    pub sha256_after: String,
    pub len_before: usize,
    pub len_after: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_after: Option<String>,
}

impl SectionRecord {
    /// Hashes both texts; keeps them only with `include_content`.
    pub fn new(
        id: &str,
        decision: String,
        owner: Option<&str>,
        before: &str,
        after: &str,
        include_content: bool,
    ) -> Self {
        Self {
            id: id.to_owned(),
            decision,
            owner: owner.map(String::from),
            sha256_before: sha256_hex(before.as_bytes()),
            sha256_after: sha256_hex(after.as_bytes()),
            len_before: before.len(),
            len_after: after.len(),
            content_before: include_content.then(|| before.to_owned()),
            content_after: include_content.then(|| after.to_owned()),
        }
    }
}

/// Now, as the record's `time`.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_and_content_only_on_request() {
        let s = SectionRecord::new("tone", "transformed".into(), Some("a"), "x", "yy", false);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["sha256Before"], sha256_hex(b"x"));
        assert_eq!(v["lenAfter"], 2);
        assert!(v.get("contentBefore").is_none());
        let s = SectionRecord::new("tone", "unchanged".into(), None, "x", "x", true);
        assert_eq!(serde_json::to_value(&s).unwrap()["contentAfter"], "x");
    }
}
