//! `[[jwt]]`: identities from an OIDC issuer. A token the issuer signed names
//! a principal (`NAME:CLAIM`) and, through `[jwt.roles]`, its roles; so an
//! operator grants access by group membership at the identity provider
//! instead of handing out one static token per client.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{bad, ConfigError, PrincipalConfig, Role, Visibility, TOKEN_PRINCIPAL};

/// The shortest `jwks_refresh`: an issuer is not asked more often than this.
pub(super) const MIN_JWKS_REFRESH: Duration = Duration::from_secs(10);
/// The largest `leeway`: more lets long-expired tokens in.
pub(super) const MAX_LEEWAY: Duration = Duration::from_secs(300);

/// One `[[jwt]]` entry: an issuer whose signed tokens name principals.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    /// 1 to 64 of `[A-Za-z0-9-_.]`; the principals it makes are `NAME:CLAIM`.
    pub name: String,
    /// The exact `iss` of its tokens.
    pub issuer: String,
    /// A token's `aud` must contain one of them.
    pub audiences: Vec<String>,
    /// Its key set (JWKS): a file path, or an `https://` URL.
    pub jwks: String,
    /// How old a fetched key set may grow before it is fetched again.
    #[serde(default = "default_jwks_refresh", deserialize_with = "super::duration")]
    pub jwks_refresh: Duration,
    /// The claim naming the principal.
    #[serde(default = "default_principal_claim")]
    pub principal_claim: String,
    /// A claim holding a list of strings (or one string), mapped by `roles`.
    pub roles_claim: Option<String>,
    /// Roles every token of this issuer gets.
    #[serde(default)]
    pub default_roles: Vec<Role>,
    /// Clock skew allowed on `exp` and `nbf`.
    #[serde(default = "default_leeway", deserialize_with = "super::duration")]
    pub leeway: Duration,
    /// `[jwt.roles]`: a value of `roles_claim` -> the roles it grants.
    #[serde(default)]
    pub roles: BTreeMap<String, Vec<Role>>,
    /// Overrides `[server] session_visibility` for its principals.
    pub session_visibility: Option<Visibility>,
}

fn default_jwks_refresh() -> Duration {
    Duration::from_secs(300)
}

fn default_principal_claim() -> String {
    "sub".into()
}

fn default_leeway() -> Duration {
    Duration::from_secs(60)
}

/// Where a key set comes from, as `jwks` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    File(PathBuf),
    Https(HttpsUrl),
}

/// An `https://` URL taken apart for a plain HTTP/1.1 GET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpsUrl {
    /// A DNS name or an IP address (without brackets).
    pub host: String,
    pub port: u16,
    /// The path and query, starting with `/`.
    pub path: String,
}

impl HttpsUrl {
    /// The `Host` header: brackets around an IPv6 address, the port unless 443.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == 443 {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

impl std::fmt::Display for HttpsUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "https://{}{}", self.host_header(), self.path)
    }
}

/// Why `jwks` names no key set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadJwks(&'static str);

impl JwtConfig {
    /// Where its key set comes from; an error says why `jwks` is refused.
    pub fn jwks_source(&self) -> Result<JwksSource, BadJwks> {
        let s = self.jwks.trim();
        if s.is_empty() {
            return Err(BadJwks("must name a JWKS file or an https:// URL"));
        }
        let lower = s.to_ascii_lowercase();
        if lower.starts_with("http://") {
            return Err(BadJwks(
                "http:// is refused: keys fetched in plain text can be swapped; use https:// or a file",
            ));
        }
        if !lower.starts_with("https://") {
            if lower.contains("://") {
                return Err(BadJwks("only https:// URLs and file paths are accepted"));
            }
            return Ok(JwksSource::File(PathBuf::from(s)));
        }
        parse_https(&s["https://".len()..]).map(JwksSource::Https)
    }
}

fn parse_https(rest: &str) -> Result<HttpsUrl, BadJwks> {
    if rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(BadJwks("a URL has no spaces or control characters"));
    }
    let rest = rest.split('#').next().unwrap_or_default();
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest[i..].starts_with('?') => (&rest[..i], format!("/{}", &rest[i..])),
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    if authority.contains('@') {
        return Err(BadJwks("credentials in the URL are refused"));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or(BadJwks("unclosed `[` in the host"))?;
        if h.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(BadJwks("the host in `[]` is not an IPv6 address"));
        }
        match after {
            "" => (h, None),
            p => (h, Some(p.strip_prefix(':').ok_or(BadJwks("bad port"))?)),
        }
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let host_ok = !host.is_empty()
        && (host.contains(':')
            || host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.')));
    if !host_ok {
        return Err(BadJwks("the URL needs a host name or address"));
    }
    let port = match port {
        None => 443,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or(BadJwks("the port must be 1 to 65535"))?,
    };
    Ok(HttpsUrl {
        host: host.to_ascii_lowercase(),
        port,
        path,
    })
}

fn name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn text_ok(s: &str) -> bool {
    !s.trim().is_empty() && !s.chars().any(char::is_control)
}

impl JwtConfig {
    /// `[[jwt]]`, against the static principals' names (`token_set`:
    /// `[server] token` names the principal `token` already).
    pub(super) fn validate_all(
        jwt: &[Self],
        principals: &[PrincipalConfig],
        token_set: bool,
    ) -> Result<(), ConfigError> {
        let mut names = std::collections::BTreeSet::new();
        for (i, j) in jwt.iter().enumerate() {
            let key = |k: &str| format!("jwt[{i}].{k}");
            if !name_ok(&j.name) {
                return Err(bad(
                    &key("name"),
                    "must be 1 to 64 letters, digits, `-`, `_` or `.`",
                ));
            }
            if !names.insert(j.name.as_str()) {
                return Err(bad(&key("name"), format!("{:?} is used twice", j.name)));
            }
            let static_name = principals.iter().any(|p| p.name == j.name)
                || j.name == TOKEN_PRINCIPAL && token_set;
            if static_name {
                return Err(bad(
                    &key("name"),
                    format!("{:?} is already a [[principals]] name", j.name),
                ));
            }
            if !text_ok(&j.issuer) {
                return Err(bad(&key("issuer"), "must be the exact `iss` of its tokens"));
            }
            if j.audiences.is_empty() || !j.audiences.iter().all(|a| text_ok(a)) {
                return Err(bad(
                    &key("audiences"),
                    "must list at least one audience (a token's `aud` must contain one)",
                ));
            }
            if let Err(e) = j.jwks_source() {
                return Err(bad(&key("jwks"), e.to_string()));
            }
            if j.jwks_refresh < MIN_JWKS_REFRESH {
                return Err(bad(&key("jwks_refresh"), "must be at least 10s"));
            }
            if j.leeway > MAX_LEEWAY {
                return Err(bad(
                    &key("leeway"),
                    "must be at most 5m: more lets expired tokens in",
                ));
            }
            if !text_ok(&j.principal_claim) {
                return Err(bad(&key("principal_claim"), "must name a claim"));
            }
            j.validate_roles(&key)?;
        }
        Ok(())
    }

    fn validate_roles(&self, key: &dyn Fn(&str) -> String) -> Result<(), ConfigError> {
        let j = self;
        match &j.roles_claim {
            Some(c) if !text_ok(c) => {
                return Err(bad(&key("roles_claim"), "must name a claim"));
            }
            None if !j.roles.is_empty() => {
                return Err(bad(
                    &key("roles"),
                    "maps values of roles_claim, which is not set",
                ));
            }
            _ => {}
        }
        for (value, roles) in &j.roles {
            if roles.is_empty() {
                return Err(bad(
                    &key(&format!("roles.{value}")),
                    "must name at least one role",
                ));
            }
        }
        if j.default_roles.is_empty() && j.roles.is_empty() {
            return Err(bad(
                &key("default_roles"),
                "no token could have a role: set default_roles, or roles_claim with [jwt.roles]",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    const OK: &str = "[[jwt]]\nname = \"corp\"\nissuer = \"https://login.example.com\"\naudiences = [\"ahp\"]\njwks = \"https://login.example.com/keys\"\nroles_claim = \"groups\"\n[jwt.roles]\n\"copilot-admins\" = [\"admin\"]\n";

    #[test]
    fn a_jwt_entry_parses_with_its_defaults() {
        let c = Config::parse(OK).unwrap();
        c.validate().unwrap();
        let j = &c.jwt[0];
        assert_eq!(j.jwks_refresh, Duration::from_secs(300));
        assert_eq!(j.leeway, Duration::from_secs(60));
        assert_eq!(j.principal_claim, "sub");
        assert_eq!(j.roles["copilot-admins"], vec![Role::Admin]);
        assert_eq!(j.session_visibility, None);
        let JwksSource::Https(url) = j.jwks_source().unwrap() else {
            panic!("an https URL")
        };
        assert_eq!(
            (url.host.as_str(), url.port, url.path.as_str()),
            ("login.example.com", 443, "/keys")
        );
        let c = Config::parse(&format!(
            "{OK}[[jwt]]\nname = \"k8s\"\nissuer = \"https://kubernetes.default.svc\"\naudiences = [\"a\", \"b\"]\njwks = \"/var/run/jwks.json\"\njwks_refresh = \"30s\"\nleeway = \"5s\"\ndefault_roles = [\"observe\"]\nsession_visibility = \"all\""
        ))
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.jwt[1].jwks_refresh, Duration::from_secs(30));
        assert_eq!(c.jwt[1].leeway, Duration::from_secs(5));
        assert_eq!(c.jwt[1].session_visibility, Some(Visibility::All));
        assert_eq!(
            c.jwt[1].jwks_source().unwrap(),
            JwksSource::File("/var/run/jwks.json".into())
        );
    }

    #[test]
    fn urls_are_taken_apart() {
        let src = |u: &str| {
            let j = JwtConfig {
                jwks: u.into(),
                ..Config::parse(OK).unwrap().jwt[0].clone()
            };
            j.jwks_source()
        };
        let JwksSource::Https(u) = src("https://[::1]:8443?x=1").unwrap() else {
            panic!()
        };
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("::1", 8443, "/?x=1")
        );
        assert_eq!(u.host_header(), "[::1]:8443");
        assert_eq!(u.to_string(), "https://[::1]:8443/?x=1");
        let JwksSource::Https(u) = src("HTTPS://127.0.0.1:9/a/b").unwrap() else {
            panic!()
        };
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 9, "/a/b")
        );
        for bad in [
            "http://x/keys",
            "ftp://x/keys",
            "https://",
            "https://user:pw@x/",
            "https://x:0/",
            "https://x:99999/",
            "https://[::1/",
            "https://x y/",
            "",
        ] {
            assert!(src(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bad_jwt_keys_are_named() {
        let sha = "a".repeat(64);
        let with = |from: &str, to: &str| {
            assert!(OK.contains(from), "{from}");
            OK.replace(from, to)
        };
        let cases = [
            (with("\"corp\"", "\"a b\""), "jwt[0].name"),
            (with("\"corp\"", "\"\""), "jwt[0].name"),
            (format!("{OK}{OK}"), "jwt[1].name"),
            (
                format!("[[principals]]\nname = \"corp\"\ntoken_sha256 = \"{sha}\"\nroles = [\"observe\"]\n{OK}"),
                "jwt[0].name",
            ),
            (
                format!("[server]\ntoken = \"0123456789abcdef-x\"\n{}", with("\"corp\"", "\"default\"")),
                "jwt[0].name",
            ),
            (with("issuer = \"https://login.example.com\"", "issuer = \" \""), "jwt[0].issuer"),
            (with("[\"ahp\"]", "[]"), "jwt[0].audiences"),
            (with("[\"ahp\"]", "[\"\"]"), "jwt[0].audiences"),
            (with("https://login.example.com/keys", "http://login.example.com/keys"), "jwt[0].jwks"),
            (with("https://login.example.com/keys", ""), "jwt[0].jwks"),
            (with("roles_claim", "jwks_refresh = \"9s\"\nroles_claim"), "jwt[0].jwks_refresh"),
            (with("roles_claim", "leeway = \"6m\"\nroles_claim"), "jwt[0].leeway"),
            (with("roles_claim", "principal_claim = \"\"\nroles_claim"), "jwt[0].principal_claim"),
            (with("roles_claim = \"groups\"", "roles_claim = \"\""), "jwt[0].roles_claim"),
            (with("roles_claim = \"groups\"", ""), "jwt[0].roles"),
            (with("[\"admin\"]", "[]"), "jwt[0].roles.copilot-admins"),
            (with("[jwt.roles]\n\"copilot-admins\" = [\"admin\"]\n", ""), "jwt[0].default_roles"),
        ];
        for (text, key) in cases {
            let e = Config::parse(&text).unwrap().validate().unwrap_err();
            assert_eq!(e.key, key, "{text}");
        }
        let e = Config::parse(&with("roles_claim", "bogus = 1\nroles_claim")).unwrap_err();
        assert!(e.0.contains("bogus"), "{e}");
        let e = Config::parse(&with("[\"admin\"]", "[\"boss\"]")).unwrap_err();
        assert!(e.0.contains("boss"), "{e}");
        let e = Config::parse(&with("roles_claim", "leeway = \"soon\"\nroles_claim")).unwrap_err();
        assert!(e.0.contains("soon"), "{e}");
    }
}
