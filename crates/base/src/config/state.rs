//! `[state]`: where sessions are kept across restarts.

use std::path::PathBuf;

use serde::Deserialize;

/// The file name of the state store when `[state] path` is not set: it sits
/// next to the audit log, with the rest of the bridge's files.
pub const DEFAULT_STATE_FILE: &str = "state.sqlite3";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StateConfig {
    /// Keep sessions across restarts; `false`: in memory only.
    pub enabled: bool,
    /// The SQLite file sessions are kept in. Unset: `state.sqlite3` next to
    /// the audit log; with no audit log either, sessions live in memory only.
    pub path: Option<PathBuf>,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            path: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn the_store_sits_next_to_the_audit_log_unless_named() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.state_path(), None);
        let c = Config::parse("[audit]\npath = \"/var/lib/bridge/audit.jsonl\"").unwrap();
        assert_eq!(
            c.state_path(),
            Some(PathBuf::from("/var/lib/bridge/state.sqlite3"))
        );
        let c = Config::parse("[audit]\npath = \"audit.jsonl\"").unwrap();
        assert_eq!(c.state_path(), Some(PathBuf::from("state.sqlite3")));
        let c =
            Config::parse("[audit]\npath = \"a/audit.jsonl\"\n[state]\npath = \"/s.db\"").unwrap();
        assert_eq!(c.state_path(), Some(PathBuf::from("/s.db")));
        let c =
            Config::parse("[audit]\npath = \"a/audit.jsonl\"\n[state]\nenabled = false").unwrap();
        assert_eq!(c.state_path(), None);
    }
}
