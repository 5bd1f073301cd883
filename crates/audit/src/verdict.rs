//! What `audit verify` concludes: a chain that holds ([`Verified`], with
//! what a person should know) or the first record that breaks it
//! ([`Broken`]).

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("record {seq} ({}line {line}): {reason}", if file.is_empty() { String::new() } else { format!("{file} ") })]
pub struct Broken {
    /// The first sequence number at which the log is not what it should be.
    pub seq: u64,
    pub file: String,
    pub line: usize,
    pub reason: String,
}

/// A chain that holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verified {
    pub records: u64,
    /// The first and last record walked, and the last one's hash.
    pub first_seq: u64,
    pub last_seq: u64,
    pub head: String,
    /// Checkpoints whose signature was checked with the given key.
    pub checkpoints: u64,
    /// Checkpoints seen without a key to check them.
    pub unchecked_checkpoints: u64,
    /// With a key: records after the last checkpoint, which no signature covers.
    pub unsigned_tail: u64,
    /// What a person should know: recoveries, a series walked from its middle.
    pub notes: Vec<String>,
    pub(super) last_file: String,
    pub(super) last_line: usize,
}
