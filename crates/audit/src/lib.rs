//! The tamper-evident audit log of transform traffic: typed records
//! ([`record`]), the hash-chained writer ([`log`], [`writer`], [`scan`],
//! [`rotation`]), signed checkpoints ([`checkpoint`]), `audit verify`
//! ([`verify`], [`against`]), shipping to syslog ([`syslog`]) and `audit show`
//! ([`show`], [`diff`]); the operator's Rego decisions ([`decision`]).
pub mod against;
mod audit_error;
pub mod checkpoint;
pub mod customization;
pub mod decision;
pub mod decision_entry;
pub mod diff;
pub mod log;
pub mod record;
pub mod rotation;
mod scan;
pub mod sdk_session;
pub mod session_sections;
pub mod show;
pub mod syslog;
pub mod verdict;
pub mod verify;
mod writer;

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
