//! `[[principals]]`: who may connect, with which roles; and their validation.

use serde::Deserialize;

use super::{bad, ConfigError};
use crate::sections::SECTION_CATALOGUE;

/// Who sees a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    Owner,
    All,
}

/// What a principal may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Subscribe, list sessions, read snapshots.
    Observe,
    /// Create sessions, start and cancel turns, run tools, answer permissions and questions.
    Participate,
    /// Opt in to system-prompt section transforms (limited by `sections`).
    Transform,
    /// See and dispose every session.
    Admin,
    /// Publish plugins (skills, agents, rules, MCP servers) to its sessions,
    /// as `[policy.customizations]` allows.
    Customize,
}

impl Role {
    pub const ALL: [Role; 5] = [
        Role::Observe,
        Role::Participate,
        Role::Transform,
        Role::Admin,
        Role::Customize,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Observe => "observe",
            Self::Participate => "participate",
            Self::Transform => "transform",
            Self::Admin => "admin",
            Self::Customize => "customize",
        }
    }
}

/// One `[[principals]]` entry: a name, a credential, roles, and its own
/// rate limits where they differ from `[server]`'s.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrincipalConfig {
    pub name: String,
    /// An environment variable holding the principal's token.
    pub token_env: Option<String>,
    /// The SHA-256 (hex) of the principal's token; the token itself stays out of the file.
    pub token_sha256: Option<String>,
    /// A verified client certificate naming this principal: `CN=alice`
    /// (its subject's common name), `URI:spiffe://...` or `DNS:host` (a SAN).
    pub cert_identity: Option<String>,
    pub roles: Vec<Role>,
    /// With `transform`: the sections it may transform (default: every section policy allows).
    pub sections: Option<Vec<String>>,
    /// Overrides `[server] session_visibility` for this principal.
    pub session_visibility: Option<Visibility>,
    /// Override the `[server]` keys of the same names (see `super::rate_limits`).
    pub max_sessions: Option<u32>,
    pub turns_per_minute: Option<u32>,
    pub actions_per_second: Option<u32>,
    pub actions_burst: Option<u32>,
}

impl PrincipalConfig {
    /// `[[principals]]`; `token_set`: `[server] token` names the principal
    /// `token` already.
    pub(super) fn validate_all(principals: &[Self], token_set: bool) -> Result<(), ConfigError> {
        let mut names = std::collections::BTreeSet::new();
        let mut certs = std::collections::BTreeSet::new();
        for (i, p) in principals.iter().enumerate() {
            let key = |k: &str| format!("principals[{i}].{k}");
            let name_ok = !p.name.is_empty()
                && p.name.len() <= 64
                && p.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !name_ok {
                return Err(bad(
                    &key("name"),
                    "must be 1 to 64 letters, digits, `-`, `_` or `.`",
                ));
            }
            if !names.insert(p.name.as_str()) || p.name == TOKEN_PRINCIPAL && token_set {
                return Err(bad(&key("name"), format!("{:?} is used twice", p.name)));
            }
            match (&p.token_env, &p.token_sha256) {
                (Some(_), Some(_)) => {
                    return Err(bad(
                        &key("token_env"),
                        "set one of token_env and token_sha256, not both",
                    ))
                }
                (None, None) if p.cert_identity.is_none() => {
                    return Err(bad(
                        &key("token_env"),
                        "set one of token_env, token_sha256 or cert_identity",
                    ))
                }
                (None, None) => {}
                (Some(var), None) => match std::env::var(var) {
                    Ok(t) if t.len() >= 16 => {}
                    Ok(_) => {
                        return Err(bad(
                            &key("token_env"),
                            format!("the token in ${var} must be at least 16 characters"),
                        ))
                    }
                    Err(_) => {
                        return Err(bad(
                            &key("token_env"),
                            format!("environment variable {var} is not set"),
                        ))
                    }
                },
                (None, Some(h)) => {
                    if h.len() != 64 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
                        return Err(bad(
                            &key("token_sha256"),
                            "must be 64 hex digits (sha256sum of the token)",
                        ));
                    }
                }
            }
            if let Some(id) = &p.cert_identity {
                if CertIdentity::parse(id).is_none() {
                    return Err(bad(
                        &key("cert_identity"),
                        format!("{id:?} is not CN=NAME, URI:URI or DNS:NAME"),
                    ));
                }
                if !certs.insert(id.as_str()) {
                    return Err(bad(
                        &key("cert_identity"),
                        format!("{id:?} names two principals"),
                    ));
                }
            }
            if p.roles.is_empty() {
                return Err(bad(
                    &key("roles"),
                    "must name at least one of observe, participate, transform, admin",
                ));
            }
            if let Some(sections) = &p.sections {
                if !p.roles.contains(&Role::Transform) {
                    return Err(bad(
                        &key("sections"),
                        "only means something with the transform role",
                    ));
                }
                for id in sections {
                    if !SECTION_CATALOGUE.iter().any(|s| s.id == id) {
                        return Err(bad(
                            &key("sections"),
                            format!("{id:?} is not a known section id"),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// What a `cert_identity` matches in a verified client certificate.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CertIdentity {
    /// The subject's common name.
    CommonName(String),
    /// A URI subject alternative name (a SPIFFE ID, say).
    Uri(String),
    /// A DNS subject alternative name.
    Dns(String),
}

impl CertIdentity {
    /// `CN=alice`, `URI:spiffe://example.org/ns/ci/sa/bot`, `DNS:build.example.org`.
    pub fn parse(s: &str) -> Option<Self> {
        let (make, value): (fn(String) -> Self, &str) = if let Some(v) = s.strip_prefix("CN=") {
            (Self::CommonName, v)
        } else if let Some(v) = s.strip_prefix("URI:") {
            (Self::Uri, v)
        } else if let Some(v) = s.strip_prefix("DNS:") {
            (Self::Dns, v)
        } else {
            return None;
        };
        let ok = !value.is_empty() && value.len() <= 1024 && !value.chars().any(char::is_control);
        ok.then(|| make(value.to_owned()))
    }
}

impl std::fmt::Display for CertIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::CommonName(v) => write!(f, "CN={v}"),
            Self::Uri(v) => write!(f, "URI:{v}"),
            Self::Dns(v) => write!(f, "DNS:{v}"),
        }
    }
}

/// The name of the principal `[server] token` stands for.
pub const TOKEN_PRINCIPAL: &str = "default";

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn principals_are_checked() {
        let sha = "a".repeat(64);
        let ok = format!(
            "[[principals]]\nname = \"ide\"\ntoken_sha256 = \"{sha}\"\nroles = [\"participate\"]"
        );
        Config::parse(&ok).unwrap().validate().unwrap();
        let cases = [
            ("[[principals]]\nname = \"ide\"\nroles = [\"observe\"]".to_string(), "principals[0].token_env"),
            (format!("[[principals]]\nname = \"a b\"\ntoken_sha256 = \"{sha}\"\nroles = [\"observe\"]"), "principals[0].name"),
            ("[[principals]]\nname = \"a\"\ntoken_sha256 = \"xyz\"\nroles = [\"observe\"]".to_string(), "principals[0].token_sha256"),
            (format!("[[principals]]\nname = \"a\"\ntoken_sha256 = \"{sha}\"\nroles = []"), "principals[0].roles"),
            (format!("[[principals]]\nname = \"a\"\ntoken_sha256 = \"{sha}\"\nroles = [\"observe\"]\nsections = [\"tone\"]"), "principals[0].sections"),
            (format!("[[principals]]\nname = \"a\"\ntoken_sha256 = \"{sha}\"\nroles = [\"transform\"]\nsections = [\"nope\"]"), "principals[0].sections"),
            ("[[principals]]\nname = \"a\"\ntoken_env = \"AHP_BRIDGE_TEST_UNSET_VAR\"\nroles = [\"observe\"]".to_string(), "principals[0].token_env"),
            (format!("[[principals]]\nname = \"a\"\ntoken_sha256 = \"{sha}\"\nroles = [\"observe\"]\n[[principals]]\nname = \"a\"\ntoken_sha256 = \"{sha}\"\nroles = [\"observe\"]"), "principals[1].name"),
        ];
        for (text, key) in cases {
            let e = Config::parse(&text).unwrap().validate().unwrap_err();
            assert_eq!(e.key, key, "{text}");
        }
        let e = Config::parse("[[principals]]\nname = \"a\"\nroles = [\"boss\"]").unwrap_err();
        assert!(e.0.contains("boss"), "{e}");
    }
}
