//! The tamper-evident audit log of transform traffic: typed records
//! ([`record`]), the hash-chained writer ([`log`], [`writer`], [`scan`],
//! [`rotation`]), signed checkpoints ([`checkpoint`]), `audit verify`
//! ([`verify`], [`against`]), shipping to syslog ([`syslog`]) and `audit show`
//! ([`show`], [`diff`]); the operator's Rego decisions ([`decision`]).
mod against;
mod audit_error;
mod checkpoint;
mod customization;
mod decision;
mod decision_entry;
mod diff;
mod log;
mod record;
mod rotation;
mod scan;
mod sdk_session;
mod session_sections;
mod show;
mod syslog;
mod verdict;
mod verify;
mod writer;
pub use against::parse_head;
pub use checkpoint::{keygen, load_public_key, KeyPair, Signer};
pub use customization::{
    ChildDigest, CustomizationDecision, CustomizationRecord, McpServerDigest, Source,
};
pub use decision::DecisionRecord;
pub use decision_entry::DecisionEntry;
pub use log::{AuditLog, Options, Ship};
pub use record::{
    now_rfc3339, OwnerOutcome, OwnerRecord, Passthrough, PolicyRecord, SectionDecision,
    SectionRecord, TransformRecord,
};
pub use rotation::{series, Series};
pub use sdk_session::{SdkDecision, SdkFinding, SdkSessionRecord};
pub use session_sections::{AddedSectionRecord, SectionOrigin, SessionSectionsRecord};
pub use show::{parse_since, show, Filter};
pub use syslog::Shipper;
pub use verify::{verify_file, verify_files, verify_text, Check, Verified};

use sha2::{Digest, Sha256};

pub use audit_error::{AuditError, KeyFault};

/// A command-line value `audit` cannot use (`--expect-head`, `--since`); says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadArgument(pub String);

/// The `prev` of the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// A record's hash: SHA-256 over the previous hash and the record's canonical
/// JSON (sorted keys, no whitespace), the `hash` field left out.
pub fn record_hash(prev: &str, record_without_hash: &serde_json::Value) -> String {
    // serde_json's Map is a BTreeMap here (no preserve_order): keys come out sorted.
    chain_hash(prev, &record_without_hash.to_string())
}

/// [`record_hash`] of a record already in its canonical JSON.
pub fn chain_hash(prev: &str, canonical: &str) -> String {
    let mut h = Sha256::new();
    h.update(prev.as_bytes());
    h.update(canonical.as_bytes());
    hex::encode(h.finalize())
}
