//! The per-principal rate limits: `[server]` holds the defaults, each
//! `[[principals]]` entry may override any of them under the same name.
//! What each one counts is said where it is enforced (`crates/ahp/src/auth/limits.rs`).

use super::{bad, Config, ConfigError, TOKEN_PRINCIPAL};

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

impl Config {
    /// The limits of the principal named `name`: its own overrides over the
    /// `[server]` defaults (the token principal and `local` have the defaults).
    pub fn rate_limits(&self, name: &str) -> RateLimits {
        let defaults = self.default_rate_limits();
        let own = self
            .principals
            .iter()
            .find(|p| p.name == name && name != TOKEN_PRINCIPAL);
        let Some(p) = own else { return defaults };
        RateLimits {
            max_sessions: p.max_sessions.unwrap_or(defaults.max_sessions),
            turns_per_minute: p.turns_per_minute.unwrap_or(defaults.turns_per_minute),
            actions_per_second: p.actions_per_second.unwrap_or(defaults.actions_per_second),
            actions_burst: p.actions_burst.unwrap_or(defaults.actions_burst),
        }
    }

    /// The `[server]` defaults.
    pub fn default_rate_limits(&self) -> RateLimits {
        let s = &self.server;
        RateLimits {
            max_sessions: s.max_sessions,
            turns_per_minute: s.turns_per_minute,
            actions_per_second: s.actions_per_second,
            actions_burst: s.actions_burst,
        }
    }

    /// Every principal's limits, keyed by its name: each `[[principals]]`
    /// entry, the token principal with `[server] token`, and `local` when
    /// there are no credentials at all.
    pub fn all_rate_limits(&self) -> Vec<(String, RateLimits)> {
        let mut out: Vec<(String, RateLimits)> = self
            .principals
            .iter()
            .map(|p| (p.name.clone(), self.rate_limits(&p.name)))
            .collect();
        if self.server.token.is_some() {
            out.push((TOKEN_PRINCIPAL.into(), self.rate_limits(TOKEN_PRINCIPAL)));
        }
        if out.is_empty() {
            out.push(("local".into(), self.rate_limits("local")));
        }
        out
    }

    /// The `[server]` defaults and every override: each at least 1.
    pub(super) fn validate_rate_limits(&self) -> Result<(), ConfigError> {
        let s = &self.server;
        let server = [
            ("max_sessions", Some(s.max_sessions)),
            ("turns_per_minute", Some(s.turns_per_minute)),
            ("actions_per_second", Some(s.actions_per_second)),
            ("actions_burst", Some(s.actions_burst)),
        ];
        check(|k| format!("server.{k}"), server)?;
        for (i, p) in self.principals.iter().enumerate() {
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
