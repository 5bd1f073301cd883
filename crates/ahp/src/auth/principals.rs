//! Principals: who a connection is (from the token of its upgrade request)
//! and what it may do (its roles, its section allow-list, which sessions it
//! sees). The rules that use them are in [`super::access`].

use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::jwt::{IssuerStanding, Issuers, JwtRefused};
use super::principal::Principal;
use ahp_bridge_base::config::{CertIdentity, Reloadable, Role, TOKEN_PRINCIPAL};

/// Every principal a token or a client certificate can name, and the
/// issuers whose JWTs name principals of their own.
pub struct Principals {
    by_digest: Vec<([u8; 32], Arc<Principal>)>,
    by_cert: Vec<(CertIdentity, Arc<Principal>)>,
    issuers: Arc<Issuers>,
}

/// What a connection authenticated with. Tokens are kept as their SHA-256
/// only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// No authentication is configured (loopback only).
    Open,
    /// A `[[principals]]` token or `[server] token`, by its SHA-256.
    Token([u8; 32]),
    /// A verified client certificate, by the `cert_identity` it matched.
    Cert(CertIdentity),
    /// A JWT of a `[[jwt]]` issuer (by name), under that issuer's config
    /// as it was (its fingerprint), by the token's SHA-256.
    Jwt {
        issuer: String,
        fingerprint: u64,
        digest: [u8; 32],
    },
}

/// Who an upgrade request authenticated as, with what, and until when (a
/// JWT's `exp`: the connection is closed then).
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub principal: Arc<Principal>,
    pub credential: Credential,
    pub expires_at: Option<std::time::SystemTime>,
}

/// Whether a connection's credential still stands after a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Valid,
    /// Its token names no principal any more (removed, or rotated).
    Revoked,
    /// Its token names the principal still, but its roles, allow-list or
    /// visibility changed: the connection holds the old ones.
    Changed,
}

impl Standing {
    /// Why a connection closes: the reason of its WebSocket Close.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Valid => "",
            Self::Revoked => "credential revoked by reload",
            Self::Changed => "principal changed by reload; reconnect",
        }
    }
}

pub(crate) fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Compares two digests in constant time.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Principals {
    /// From `[[principals]]`, `[server] token` (one principal, every role)
    /// and `[[jwt]]`. Tokens from the environment are read now.
    pub fn from_config(cfg: Reloadable<'_>) -> Self {
        Self::built(cfg, Issuers::from_config(cfg, None))
    }

    /// As [`Self::from_config`] for a reload: issuers whose key set source
    /// is unchanged keep the keys `previous` loaded.
    pub fn reloaded(cfg: Reloadable<'_>, previous: &Principals) -> Self {
        Self::built(cfg, Issuers::from_config(cfg, Some(&previous.issuers)))
    }

    fn built(cfg: Reloadable<'_>, issuers: Issuers) -> Self {
        let server_visibility = cfg.session_visibility();
        let mut by_digest = Vec::new();
        let mut by_cert = Vec::new();
        if let Some(t) = cfg.token() {
            let p = Principal::new(TOKEN_PRINCIPAL, &Role::ALL, None, server_visibility);
            by_digest.push((digest(t), Arc::new(p)));
        }
        for p in cfg.principals() {
            let principal = Arc::new(Principal::from_config(p, server_visibility));
            if let Some(id) = p.cert_identity.as_deref().and_then(CertIdentity::parse) {
                by_cert.push((id, principal.clone()));
            }
            let d = match (&p.token_env, &p.token_sha256) {
                (Some(var), _) => match std::env::var(var) {
                    Ok(t) => digest(&t),
                    Err(_) => continue, // validation refused this config already
                },
                (None, Some(hex_digest)) => {
                    let mut d = [0u8; 32];
                    if hex::decode_to_slice(hex_digest, &mut d).is_err() {
                        continue;
                    }
                    d
                }
                (None, None) => continue,
            };
            by_digest.push((d, principal));
        }
        Self {
            by_digest,
            by_cert,
            issuers: Arc::new(issuers),
        }
    }

    /// The `[[jwt]]` issuers.
    pub fn issuers(&self) -> &Issuers {
        &self.issuers
    }

    /// The principal a JWT names, or why it is refused.
    pub async fn authenticate_jwt(&self, token: &str) -> Result<Authenticated, JwtRefused> {
        let v = self.issuers.verify(token).await?;
        Ok(Authenticated {
            principal: Arc::new(v.principal),
            credential: Credential::Jwt {
                issuer: v.issuer,
                fingerprint: v.fingerprint,
                digest: digest(token),
            },
            expires_at: Some(v.expires_at),
        })
    }

    pub fn auth_required(&self) -> bool {
        !self.by_digest.is_empty() || !self.by_cert.is_empty() || !self.issuers.is_empty()
    }

    /// How many principals a token or certificate can name.
    pub fn len(&self) -> usize {
        self.by_digest.len() + self.by_cert.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The principal a token names, and the credential it names it by.
    /// Digests are compared in constant time, each against every
    /// principal, so timing tells nothing.
    pub fn authenticate(&self, token: Option<&str>) -> Option<Authenticated> {
        if !self.auth_required() {
            return Some(Authenticated {
                principal: Arc::new(Principal::local()),
                credential: Credential::Open,
                expires_at: None,
            });
        }
        let given = digest(token?);
        let principal = self.named_by(&given)?;
        Some(Authenticated {
            principal,
            credential: Credential::Token(given),
            expires_at: None,
        })
    }

    /// The principal a verified client certificate names: the first
    /// `cert_identity` among its identities.
    pub fn authenticate_cert(&self, identities: &[CertIdentity]) -> Option<Authenticated> {
        let (id, principal) = self
            .by_cert
            .iter()
            .find(|(id, _)| identities.contains(id))?;
        Some(Authenticated {
            principal: principal.clone(),
            credential: Credential::Cert(id.clone()),
            expires_at: None,
        })
    }

    fn named_by_cert(&self, id: &CertIdentity) -> Option<Arc<Principal>> {
        self.by_cert
            .iter()
            .find(|(c, _)| c == id)
            .map(|(_, p)| p.clone())
    }

    fn named_by(&self, given: &[u8; 32]) -> Option<Arc<Principal>> {
        let mut found = None;
        for (d, p) in &self.by_digest {
            if same(d, given) {
                found = Some(p.clone());
            }
        }
        found
    }

    /// Whether a connection authenticated as `a` would be let in as the
    /// same principal today.
    pub fn standing(&self, a: &Authenticated) -> Standing {
        let now = match &a.credential {
            Credential::Open if !self.auth_required() => Some(Arc::new(Principal::local())),
            Credential::Open => None,
            Credential::Token(d) => self.named_by(d),
            Credential::Cert(id) => self.named_by_cert(id),
            Credential::Jwt {
                issuer,
                fingerprint,
                ..
            } => {
                return match self.issuers.standing(issuer, *fingerprint) {
                    IssuerStanding::Valid => Standing::Valid,
                    IssuerStanding::Changed => Standing::Changed,
                    IssuerStanding::Gone => Standing::Revoked,
                }
            }
        };
        match now {
            None => Standing::Revoked,
            Some(p) if p.name != a.principal.name => Standing::Revoked,
            Some(p) if *p != *a.principal => Standing::Changed,
            Some(_) => Standing::Valid,
        }
    }

    /// The names of every principal a token or certificate can name.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = (self.by_digest.iter().map(|(_, p)| &p.name))
            .chain(self.by_cert.iter().map(|(_, p)| &p.name))
            .cloned()
            .chain(self.issuers.names().into_iter().map(|n| format!("{n}:*")))
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_bridge_base::config::Config;
    use ahp_bridge_base::config::{PrincipalConfig, Visibility};

    #[test]
    fn tokens_name_principals_and_roles_limit_them() {
        let mut cfg = Config::default();
        cfg.server.token = Some("0123456789abcdef-server".into());
        cfg.principals.push(policy_principal(&["tone"]));
        let ps = Principals::from_config(cfg.reloadable());
        assert!(ps.auth_required());
        assert!(ps.authenticate(None).is_none());
        assert!(ps.authenticate(Some("wrong-token-0123456")).is_none());
        let server = ps
            .authenticate(Some("0123456789abcdef-server"))
            .unwrap()
            .principal;
        assert_eq!(server.name, TOKEN_PRINCIPAL);
        assert!(Role::ALL.iter().all(|r| server.has(*r)));
        assert!(server.sees("someone"), "every role, admin included");
        let policy = ps
            .authenticate(Some("0123456789abcdef-policy"))
            .unwrap()
            .principal;
        assert!(policy.sees("someone"));
        let e = policy
            .require(Role::Participate, "start a turn")
            .unwrap_err()
            .0;
        assert!(
            e.contains("`participate`") && e.contains("\"policy\""),
            "{e}"
        );
        assert_eq!(
            policy.transform_sections(),
            Some(["tone".to_string()].into())
        );
        // No credentials configured: one local principal that may do everything.
        let open = Principals::from_config(Config::default().reloadable());
        assert_eq!(open.authenticate(None).unwrap().principal.name, "local");
    }

    fn policy_principal(sections: &[&str]) -> PrincipalConfig {
        PrincipalConfig {
            name: "policy".into(),
            token_sha256: Some(hex::encode(digest("0123456789abcdef-policy"))),
            roles: vec![Role::Transform],
            sections: Some(sections.iter().map(|s| s.to_string()).collect()),
            session_visibility: Some(Visibility::All),
            ..Default::default()
        }
    }

    #[test]
    fn a_reload_keeps_revokes_or_changes_a_credential() {
        let mut cfg = Config::default();
        cfg.server.token = Some("0123456789abcdef-server".into());
        cfg.principals.push(policy_principal(&["tone"]));
        let before = Principals::from_config(cfg.reloadable());
        let server = before
            .authenticate(Some("0123456789abcdef-server"))
            .unwrap();
        let policy = before
            .authenticate(Some("0123456789abcdef-policy"))
            .unwrap();
        assert_eq!(before.standing(&server), Standing::Valid);
        // The server token rotated, the policy service's allow-list widened.
        cfg.server.token = Some("0123456789abcdef-rotated".into());
        cfg.principals[0] = policy_principal(&["tone", "custom_instructions"]);
        let after = Principals::from_config(cfg.reloadable());
        assert_eq!(after.standing(&server), Standing::Revoked);
        assert_eq!(after.standing(&policy), Standing::Changed);
        assert!(after
            .authenticate(Some("0123456789abcdef-server"))
            .is_none());
        let again = after.authenticate(Some("0123456789abcdef-policy")).unwrap();
        assert_eq!(after.standing(&again), Standing::Valid);
        // The same token now naming another principal is not the same credential.
        cfg.principals[0].name = "renamed".into();
        assert_eq!(
            Principals::from_config(cfg.reloadable()).standing(&again),
            Standing::Revoked
        );
        // From no credentials to some: the local connections lose their standing.
        let open = Principals::from_config(Config::default().reloadable());
        let local = open.authenticate(None).unwrap();
        assert_eq!(open.standing(&local), Standing::Valid);
        assert_eq!(after.standing(&local), Standing::Revoked);
    }
}
