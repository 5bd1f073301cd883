//! The per-principal rate limits: `[server]` holds the defaults, each
//! `[[principals]]` entry may override any of them under the same name.
//! What each one counts is said where it is enforced (`crates/ahp/src/auth/rate_limiter.rs`);
//! a principal's effective limits are `Config::rate_limits`.

use super::{bad, ConfigError, PrincipalConfig, ServerConfig};

/// The limits one principal is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    /// Sessions it may own at once (created and not disposed).
    pub max_sessions: u32,
    /// Turns it may start in a minute (`chat/turnStarted`, queued messages).
    pub turns_per_minute: u32,
    /// Actions it may dispatch per second, all its connections together...
    pub actions_per_second: u32,
    /// ...and in a burst above that rate.
    pub actions_burst: u32,
}

impl Default for RateLimits {
    /// Far above what a person at an IDE does; a loop that runs away meets them.
    fn default() -> Self {
        Self {
            max_sessions: 1000,
            turns_per_minute: 60,
            actions_per_second: 200,
            actions_burst: 400,
        }
    }
}

/// The largest value any of them may take.
const MAX_LIMIT: u32 = 1_000_000;

impl RateLimits {
    /// The `[server]` defaults and every principal's override: each at least 1.
    pub(super) fn validate_all(
        s: &ServerConfig,
        principals: &[PrincipalConfig],
    ) -> Result<(), ConfigError> {
        let server = [
            ("max_sessions", Some(s.max_sessions)),
            ("turns_per_minute", Some(s.turns_per_minute)),
            ("actions_per_second", Some(s.actions_per_second)),
            ("actions_burst", Some(s.actions_burst)),
        ];
        check(|k| format!("server.{k}"), server)?;
        for (i, p) in principals.iter().enumerate() {
            let own = [
                ("max_sessions", p.max_sessions),
                ("turns_per_minute", p.turns_per_minute),
                ("actions_per_second", p.actions_per_second),
                ("actions_burst", p.actions_burst),
            ];
            check(|k| format!("principals[{i}].{k}"), own)?;
        }
        Ok(())
    }
}

fn check(
    key: impl Fn(&str) -> String,
    values: [(&str, Option<u32>); 4],
) -> Result<(), ConfigError> {
    for (k, v) in values {
        if let Some(v) = v {
            if !(1..=MAX_LIMIT).contains(&v) {
                return Err(bad(&key(k), format!("must be 1 to {MAX_LIMIT}")));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, TOKEN_PRINCIPAL};

    #[test]
    fn a_principal_overrides_the_server_defaults_key_by_key() {
        let sha = "a".repeat(64);
        let text = format!(
            "[server]\nturns_per_minute = 5\ntoken = \"0123456789abcdef-server\"\n\
             [[principals]]\nname = \"ci\"\ntoken_sha256 = \"{sha}\"\nroles = [\"participate\"]\n\
             max_sessions = 3\nactions_burst = 9\n"
        );
        let c = Config::parse(&text).unwrap();
        c.validate().unwrap();
        let ci = c.rate_limits("ci");
        assert_eq!(
            ci,
            RateLimits {
                max_sessions: 3,
                turns_per_minute: 5,
                actions_per_second: 200,
                actions_burst: 9,
            }
        );
        assert_eq!(c.rate_limits(TOKEN_PRINCIPAL).max_sessions, 1000);
        let names: Vec<String> = c.all_rate_limits().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["ci", TOKEN_PRINCIPAL]);
        let open = Config::default();
        assert_eq!(
            open.all_rate_limits(),
            [("local".into(), RateLimits::default())]
        );
    }

    #[test]
    fn a_limit_of_zero_is_refused_naming_the_key() {
        let sha = "a".repeat(64);
        let e = Config::parse("[server]\nactions_per_second = 0")
            .unwrap()
            .validate()
            .unwrap_err();
        assert_eq!(e.key, "server.actions_per_second");
        let text = format!(
            "[[principals]]\nname = \"a\"\ntoken_sha256 = \"{sha}\"\nroles = [\"observe\"]\n\
             [[principals]]\nname = \"b\"\ntoken_sha256 = \"{sha}\"\nroles = [\"observe\"]\n\
             turns_per_minute = 0\n"
        );
        let e = Config::parse(&text).unwrap().validate().unwrap_err();
        assert_eq!(e.key, "principals[1].turns_per_minute");
        let e = Config::parse("[server]\nmax_sessions = -1").unwrap_err();
        assert!(e.0.contains("max_sessions"), "{e}");
    }
}
