//! `[audit]` and `[audit.syslog]`: where the evidence goes, how it is signed,
//! rotated and shipped, and what happens to a rewrite that cannot be audited.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{bad, duration, ConfigError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// JSON Lines file; no audit log when unset.
    pub path: Option<PathBuf>,
    /// Store section content too, not only hashes.
    pub include_content: bool,
    pub fsync: FsyncPolicy,
    /// What a rewrite that could not be audited becomes.
    pub on_failure: OnFailure,
    /// Ed25519 private key (`audit keygen`); with it, signed checkpoints are written.
    pub signing_key: Option<PathBuf>,
    /// A checkpoint after this many records (256 keeps a checkpoint under
    /// rsyslog's default 8 KiB message size).
    pub checkpoint_every: u64,
    /// And after this long, when records were written since the last one.
    #[serde(deserialize_with = "duration")]
    pub checkpoint_interval: Duration,
    /// Rotate the file before it grows past this many bytes; 0: never.
    pub max_bytes: u64,
    /// Rotate the file once its first record is this old; "0s": never.
    #[serde(deserialize_with = "duration")]
    pub max_age: Duration,
    /// Ship every record to a syslog daemon as well.
    pub syslog: Option<SyslogConfig>,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            path: None,
            include_content: false,
            fsync: FsyncPolicy::Batch,
            on_failure: OnFailure::KeepOriginal,
            signing_key: None,
            checkpoint_every: 256,
            checkpoint_interval: Duration::from_secs(60),
            max_bytes: 0,
            max_age: Duration::ZERO,
            syslog: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsyncPolicy {
    /// fsync after every record.
    Always,
    /// fsync at most every 100 ms, from a background flusher.
    Batch,
    /// Leave it to the OS.
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    /// Fail closed: a rewrite that could not be audited is not applied.
    KeepOriginal,
    /// Apply the rewrite anyway; the failure is logged and counted in the
    /// next `recovered` record.
    Continue,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SyslogConfig {
    /// `tcp:HOST:PORT` (RFC 6587 octet counting) or `unix:/PATH` (a stream
    /// socket, octet counting: rsyslog's imptcp with `path=`).
    pub address: String,
    /// RFC 5424 APP-NAME.
    pub app_name: String,
    /// Syslog facility name: `user`, `auth`, `authpriv`, `daemon`, `local0`..`local7`.
    pub facility: String,
    /// Messages waiting to be sent; past it a record is counted as a gap.
    pub queue: usize,
    /// The same bound in bytes.
    pub queue_bytes: usize,
}

impl Default for SyslogConfig {
    fn default() -> Self {
        Self {
            address: String::new(),
            app_name: "ahp-copilot-bridge".into(),
            facility: "local0".into(),
            queue: 10_000,
            queue_bytes: 16 * 1024 * 1024,
        }
    }
}

/// Where `[audit.syslog] address` points, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyslogTarget {
    Tcp(String),
    Unix(PathBuf),
}

const FACILITIES: &[(&str, u8)] = &[
    ("kern", 0),
    ("user", 1),
    ("mail", 2),
    ("daemon", 3),
    ("auth", 4),
    ("syslog", 5),
    ("lpr", 6),
    ("news", 7),
    ("uucp", 8),
    ("cron", 9),
    ("authpriv", 10),
    ("ftp", 11),
    ("local0", 16),
    ("local1", 17),
    ("local2", 18),
    ("local3", 19),
    ("local4", 20),
    ("local5", 21),
    ("local6", 22),
    ("local7", 23),
];

impl SyslogConfig {
    pub fn target(&self) -> Result<SyslogTarget, ConfigError> {
        let a = &self.address;
        if let Some(hp) = a.strip_prefix("tcp:") {
            match hp.rsplit_once(':') {
                Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => {
                    Ok(SyslogTarget::Tcp(hp.to_owned()))
                }
                _ => Err(bad(
                    "audit.syslog.address",
                    format!("{a:?}: expected tcp:HOST:PORT"),
                )),
            }
        } else if let Some(p) = a.strip_prefix("unix:").filter(|p| p.starts_with('/')) {
            Ok(SyslogTarget::Unix(PathBuf::from(p)))
        } else {
            Err(bad(
                "audit.syslog.address",
                format!("{a:?}: expected \"tcp:HOST:PORT\" or \"unix:/PATH\""),
            ))
        }
    }

    /// The facility's number (RFC 5424 PRI = facility * 8 + severity).
    pub fn facility_code(&self) -> Result<u8, ConfigError> {
        FACILITIES
            .iter()
            .find(|(n, _)| *n == self.facility)
            .map(|(_, c)| *c)
            .ok_or_else(|| {
                bad(
                    "audit.syslog.facility",
                    format!(
                        "{:?} is not a syslog facility (e.g. \"local0\")",
                        self.facility
                    ),
                )
            })
    }
}

impl AuditConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=100_000).contains(&self.checkpoint_every) {
            return Err(bad("audit.checkpoint_every", "must be 1 to 100000"));
        }
        if self.checkpoint_interval.is_zero() {
            return Err(bad("audit.checkpoint_interval", "must be more than 0s"));
        }
        if self.max_bytes != 0 && self.max_bytes < 4096 {
            return Err(bad(
                "audit.max_bytes",
                "must be 0 (no rotation) or at least 4096",
            ));
        }
        let needs_path = [
            ("audit.signing_key", self.signing_key.is_some()),
            ("audit.syslog", self.syslog.is_some()),
            ("audit.max_bytes", self.max_bytes != 0),
            ("audit.max_age", !self.max_age.is_zero()),
        ];
        for (key, set) in needs_path {
            if set && self.path.is_none() {
                return Err(bad(key, "needs audit.path (there is no audit log)"));
            }
        }
        if let Some(s) = &self.syslog {
            s.target()?;
            s.facility_code()?;
            let name_ok = (1..=48).contains(&s.app_name.len())
                && s.app_name.bytes().all(|b| (33..=126).contains(&b));
            if !name_ok {
                return Err(bad(
                    "audit.syslog.app_name",
                    "must be 1 to 48 printable ASCII characters without spaces (RFC 5424)",
                ));
            }
            if s.queue == 0 || s.queue_bytes < 64 * 1024 {
                return Err(bad(
                    "audit.syslog.queue",
                    "queue must be at least 1 and queue_bytes at least 65536",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    use super::*;

    fn err(toml: &str) -> ConfigError {
        Config::parse(toml).unwrap().validate().unwrap_err()
    }

    #[test]
    fn defaults_fail_closed_and_rotate_never() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.audit.on_failure, OnFailure::KeepOriginal);
        assert_eq!((c.audit.max_bytes, c.audit.max_age), (0, Duration::ZERO));
        let c = Config::parse("[audit]\non_failure = \"continue\"\nmax_age = \"1day\"").unwrap();
        assert_eq!(c.audit.on_failure, OnFailure::Continue);
        assert_eq!(c.audit.max_age, Duration::from_secs(86400));
    }

    #[test]
    fn bad_audit_keys_are_named() {
        assert_eq!(err("[audit]\nsigning_key = \"k\"").key, "audit.signing_key");
        assert_eq!(
            err("[audit]\npath = \"a\"\ncheckpoint_every = 0").key,
            "audit.checkpoint_every"
        );
        assert_eq!(
            err("[audit]\npath = \"a\"\nmax_bytes = 10").key,
            "audit.max_bytes"
        );
        let e = err("[audit]\npath = \"a\"\n[audit.syslog]\naddress = \"udp:x:1\"");
        assert_eq!(e.key, "audit.syslog.address");
        let e =
            err("[audit]\npath = \"a\"\n[audit.syslog]\naddress = \"tcp:h:1\"\nfacility = \"x\"");
        assert_eq!(e.key, "audit.syslog.facility");
        let e =
            err("[audit]\npath = \"a\"\n[audit.syslog]\naddress = \"tcp:h:1\"\napp_name = \"a b\"");
        assert_eq!(e.key, "audit.syslog.app_name");
        assert!(Config::parse("[audit]\non_failure = \"drop\"").is_err());
    }

    #[test]
    fn syslog_targets_parse() {
        let s = |a: &str| SyslogConfig {
            address: a.into(),
            ..Default::default()
        };
        assert_eq!(
            s("tcp:127.0.0.1:514").target().unwrap(),
            SyslogTarget::Tcp("127.0.0.1:514".into())
        );
        assert_eq!(
            s("unix:/run/x.sock").target().unwrap(),
            SyslogTarget::Unix("/run/x.sock".into())
        );
        assert!(s("unix:rel").target().is_err());
        assert_eq!(s("tcp:h:1").facility_code().unwrap(), 16);
    }
}
