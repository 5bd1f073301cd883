//! What the audit log's operations fail with. Each variant says which file
//! and why, in the words an operator acts on.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// A file could not be opened or read (the log, a shipped copy, a key).
    #[error("cannot read {}: {reason}", path.display())]
    Read { path: PathBuf, reason: String },
    /// The log file could not be opened for appending.
    #[error("cannot open audit log {}: {reason}", path.display())]
    Open { path: PathBuf, reason: String },
    /// A file could not be written or created.
    #[error("{}: {reason}", path.display())]
    Write { path: PathBuf, reason: String },
    /// A write, sync, rename or listing failed on the log's own files.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A record could not be encoded as JSON.
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    /// A record read back is not the shape its kind has.
    #[error("record {seq}: {reason}")]
    Record { seq: String, reason: String },
    /// `[audit] signing_key` cannot be used.
    #[error("audit.signing_key {}: {reason}", path.display())]
    SigningKey {
        path: PathBuf,
        #[source]
        reason: KeyFault,
    },
    /// A public key file (`audit verify --pubkey`) cannot be used.
    #[error("{}: {reason}", path.display())]
    PublicKey {
        path: PathBuf,
        #[source]
        reason: KeyFault,
    },
    /// `audit keygen` refuses to overwrite a key.
    #[error("{} exists; not overwritten", .0.display())]
    Exists(PathBuf),
    /// The system gave no randomness for a key.
    #[error("no randomness: {0}")]
    NoRandomness(String),
    /// The log ends in more bytes that are no record than a torn write leaves.
    #[error("audit log {} ends in {bytes} bytes that are no record; inspect it (audit verify) before the bridge writes to it again", path.display())]
    JunkTail { path: PathBuf, bytes: u64 },
    /// Two files given to `verify` or `show` begin at the same record.
    #[error("{} and {} both start at record {seq}: more than one series (verify each on its own)", first.display(), second.display())]
    TwoSeries {
        first: PathBuf,
        second: PathBuf,
        seq: u64,
    },
    /// The chain breaks (`verify_file`: the first record that breaks it).
    #[error(transparent)]
    Broken(#[from] crate::verdict::Broken),
    /// A checkpoint was asked for with no signing key.
    #[error("no signing key")]
    NoSigningKey,
    /// What was to be appended is not a JSON object.
    #[error("an audit record must be a JSON object")]
    NotAnObject,
    /// `[audit.syslog]` cannot be used.
    #[error(transparent)]
    Config(#[from] ahp_bridge_base::config::ConfigError),
}

impl AuditError {
    pub(crate) fn read(path: &Path, reason: impl std::fmt::Display) -> Self {
        Self::Read {
            path: path.to_owned(),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn write(path: &Path, reason: impl std::fmt::Display) -> Self {
        Self::Write {
            path: path.to_owned(),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn record(seq: &str, reason: impl std::fmt::Display) -> Self {
        Self::Record {
            seq: seq.to_owned(),
            reason: reason.to_string(),
        }
    }
}

/// Why a key file (`[audit] signing_key`, `audit verify --pubkey`) cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyFault {
    #[error("{0}")]
    Unreadable(#[source] std::io::Error),
    #[error("readable by others (mode {0:o}); chmod 600 it")]
    Exposed(u32),
    #[error("not one line of hex")]
    NotHex,
    #[error("not 32 bytes of hex")]
    NotThirtyTwoBytes,
    #[error("not an Ed25519 public key: {0}")]
    NotEd25519(#[source] ed25519_dalek::SignatureError),
}
