//! Identities from an OIDC issuer: a bearer token that is a JWT signed by a
//! `[[jwt]]` issuer names the principal `NAME:CLAIM`, with the roles its
//! `[jwt.roles]` maps the token's groups to. The keys come from the issuer's
//! key set ([`super::jwks`]).
//!
//! What is refused, and why it is checked here rather than left to the
//! library: only RS256, ES256 and EdDSA are taken, and the header's `alg` is
//! checked before any key is looked up, so `alg: none` and the HMAC
//! algorithms never reach a key (a token "signed" HS256 with an issuer's
//! public key as the secret is refused for its algorithm); the key must be
//! for the token's algorithm too. The payload's `iss` is read unverified only
//! to pick the entry whose keys then verify everything: signature, `exp`
//! (required), `nbf`, `iss`, `aud`. A refusal says why without the token or
//! any claim value, so it can be logged and sent back.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use data_encoding::BASE64URL_NOPAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use rustls::ClientConfig;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::jwks::{FetchTls, KeySet, Lookup};
use super::principal::Principal;
use ahp_bridge_base::config::{JwtConfig, Reloadable, Role, Visibility};

/// The longest token verified; a longer one is malformed.
const MAX_TOKEN: usize = 16 * 1024;
/// The longest value of `principal_claim`.
const MAX_PRINCIPAL_CLAIM: usize = 256;

/// Every `[[jwt]]` issuer with its key set.
#[derive(Default)]
pub struct Issuers {
    entries: Vec<Issuer>,
}

struct Issuer {
    cfg: JwtConfig,
    fingerprint: u64,
    visibility: Visibility,
    keys: Arc<KeySet>,
}

/// Whether a connection authenticated by an issuer still stands after a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssuerStanding {
    Valid,
    /// The issuer is there by that name, with another config (roles,
    /// audiences, keys, visibility): the connection holds what the old one gave.
    Changed,
    /// No issuer has that name any more.
    Gone,
}

/// A token an issuer signed, and who it names.
#[derive(Debug, Clone)]
pub struct VerifiedToken {
    pub principal: Principal,
    /// The `[[jwt]]` name.
    pub issuer: String,
    /// That issuer's config, hashed: a reload that changes it is seen.
    pub fingerprint: u64,
    /// From `exp`.
    pub expires_at: SystemTime,
}

/// Why a JWT was refused; says nothing of the token or its claims' values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtRefused {
    #[error("malformed")]
    Malformed,
    #[error("alg none not accepted")]
    AlgNone,
    #[error("algorithm {0} not accepted (RS256, ES256, EdDSA only)")]
    AlgNotAccepted(&'static str),
    #[error("critical header parameters (crit) not understood")]
    Critical,
    #[error("no issuer accepts it")]
    NoIssuer,
    #[error("the key set of issuer {0} is not available")]
    KeysUnavailable(String),
    #[error("unknown key id")]
    UnknownKid,
    #[error("no {0} key")]
    NoKey(&'static str),
    #[error("its key id names a key for another algorithm")]
    KeyAlgMismatch,
    #[error("bad signature")]
    BadSignature,
    #[error("expired")]
    Expired,
    #[error("not yet valid (nbf)")]
    NotYetValid,
    #[error("wrong issuer")]
    WrongIssuer,
    #[error("wrong audience")]
    WrongAudience,
    #[error("claim `{0}` missing")]
    ClaimMissing(String),
    #[error("claim `{0}` malformed")]
    ClaimMalformed(String),
    #[error("claim `{0}` missing or not a string")]
    PrincipalClaim(String),
    #[error("claim `{0}` is not a string or a list of strings")]
    RolesClaim(String),
    #[error("no role: the token's roles claim maps to none and default_roles is empty")]
    NoRole,
}

impl Issuers {
    /// From `[[jwt]]`. Key set files are read now (one missing or bad is
    /// logged and read again at verify); URLs are fetched at first use.
    /// Spawns nothing. `previous`: the issuers in force before a reload; an
    /// entry whose key set source is unchanged keeps its loaded keys.
    pub fn from_config(cfg: Reloadable<'_>, previous: Option<&Issuers>) -> Self {
        Self::build(cfg, previous, FetchTls::Native)
    }

    /// As [`Self::from_config`], fetching https key sets with `tls` (a
    /// private CA's roots, say) instead of the system's CAs.
    pub fn with_tls(
        cfg: Reloadable<'_>,
        previous: Option<&Issuers>,
        tls: Arc<ClientConfig>,
    ) -> Self {
        Self::build(cfg, previous, FetchTls::Given(tls))
    }

    fn build(cfg: Reloadable<'_>, previous: Option<&Issuers>, tls: FetchTls) -> Self {
        let mut entries = Vec::new();
        for j in cfg.jwt() {
            let source = match j.jwks_source() {
                Ok(s) => s,
                Err(e) => {
                    // Validation refused this config already.
                    tracing::warn!(issuer = %j.name, "jwks: {e}; issuer skipped");
                    continue;
                }
            };
            let kept = previous
                .into_iter()
                .flat_map(|p| &p.entries)
                .find(|e| e.cfg.name == j.name && e.keys.same_source(&source, j.jwks_refresh))
                .map(|e| e.keys.clone());
            let keys =
                kept.unwrap_or_else(|| KeySet::new(&j.name, source, j.jwks_refresh, tls.clone()));
            let visibility = j.session_visibility.unwrap_or(cfg.session_visibility());
            entries.push(Issuer {
                fingerprint: fingerprint(j, visibility),
                cfg: j.clone(),
                visibility,
                keys,
            });
        }
        Self { entries }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The names of the issuers, for a log line.
    pub fn names(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.cfg.name.clone()).collect()
    }

    /// Whether a connection that authenticated with issuer `issuer` under
    /// config `fingerprint` would be let in the same way today.
    pub fn standing(&self, issuer: &str, fingerprint: u64) -> IssuerStanding {
        match self.entries.iter().find(|e| e.cfg.name == issuer) {
            None => IssuerStanding::Gone,
            Some(e) if e.fingerprint != fingerprint => IssuerStanding::Changed,
            Some(_) => IssuerStanding::Valid,
        }
    }

    /// Verifies a compact JWS. Async because a key set may be (re)fetched.
    pub async fn verify(&self, token: &str) -> Result<VerifiedToken, JwtRefused> {
        if token.len() > MAX_TOKEN {
            return Err(JwtRefused::Malformed);
        }
        let [header, payload, _signature] = parts(token).ok_or(JwtRefused::Malformed)?;
        let header = json_part(header).ok_or(JwtRefused::Malformed)?;
        let alg = header
            .get("alg")
            .and_then(Value::as_str)
            .ok_or(JwtRefused::Malformed)?;
        let alg = accepted(alg)?;
        if header.contains_key("crit") {
            return Err(JwtRefused::Critical);
        }
        let kid = match header.get("kid") {
            None => None,
            Some(Value::String(k)) => Some(k.as_str()),
            Some(_) => return Err(JwtRefused::Malformed),
        };
        // Unverified: only to pick the entry whose keys verify it all.
        let payload = json_part(payload).ok_or(JwtRefused::Malformed)?;
        let iss = payload
            .get("iss")
            .and_then(Value::as_str)
            .ok_or(JwtRefused::NoIssuer)?;
        let mut first = None;
        for entry in self.entries.iter().filter(|e| e.cfg.issuer == iss) {
            match entry.verify(token, alg, kid).await {
                Ok(v) => return Ok(v),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        Err(first.unwrap_or(JwtRefused::NoIssuer))
    }
}

impl std::fmt::Debug for Issuers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Issuer {
    async fn verify(
        &self,
        token: &str,
        alg: Algorithm,
        kid: Option<&str>,
    ) -> Result<VerifiedToken, JwtRefused> {
        let keys = match self.keys.lookup(alg, kid).await {
            Lookup::Keys(k) => k,
            Lookup::UnknownKid => return Err(JwtRefused::UnknownKid),
            Lookup::NoKeyForAlg => return Err(JwtRefused::NoKey(alg_name(alg))),
            Lookup::KidOtherAlg => return Err(JwtRefused::KeyAlgMismatch),
            Lookup::Unavailable => return Err(JwtRefused::KeysUnavailable(self.cfg.name.clone())),
        };
        let mut validation = Validation::new(alg);
        validation.leeway = self.cfg.leeway.as_secs();
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.set_issuer(&[&self.cfg.issuer]);
        validation.set_audience(&self.cfg.audiences);
        let mut refused = JwtRefused::BadSignature;
        for key in &keys {
            match jsonwebtoken::decode::<Map<String, Value>>(token, key, &validation) {
                Ok(data) => return self.admit(&data.claims),
                Err(e) => refused = refusal(e.kind()),
            }
            if refused != JwtRefused::BadSignature {
                break; // the signature held: the claims are what is wrong
            }
        }
        Err(refused)
    }

    /// The principal a verified token names.
    fn admit(&self, claims: &Map<String, Value>) -> Result<VerifiedToken, JwtRefused> {
        let exp = claims
            .get("exp")
            .and_then(|v| {
                v.as_u64()
                    .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f.round() as u64))
            })
            .ok_or_else(|| JwtRefused::ClaimMalformed("exp".into()))?;
        let expires_at = UNIX_EPOCH
            .checked_add(Duration::from_secs(exp))
            .ok_or_else(|| JwtRefused::ClaimMalformed("exp".into()))?;
        let claim = &self.cfg.principal_claim;
        let who = claims
            .get(claim)
            .and_then(Value::as_str)
            .filter(|s| {
                !s.is_empty()
                    && s.chars().count() <= MAX_PRINCIPAL_CLAIM
                    && !s.chars().any(char::is_control)
            })
            .ok_or_else(|| JwtRefused::PrincipalClaim(claim.clone()))?;
        let roles = self.roles(claims)?;
        let name = format!("{}:{who}", self.cfg.name);
        tracing::debug!(issuer = %self.cfg.name, principal = %name, "a JWT names a principal");
        Ok(VerifiedToken {
            principal: Principal::new(&name, &roles, None, self.visibility)
                .with_claims(claims.clone()),
            issuer: self.cfg.name.clone(),
            fingerprint: self.fingerprint,
            expires_at,
        })
    }

    /// `default_roles`, and the roles `[jwt.roles]` maps each value of
    /// `roles_claim` to; none at all is a refusal.
    fn roles(&self, claims: &Map<String, Value>) -> Result<Vec<Role>, JwtRefused> {
        let mut roles: BTreeSet<Role> = self.cfg.default_roles.iter().copied().collect();
        if let Some(claim) = &self.cfg.roles_claim {
            let not_strings = || JwtRefused::RolesClaim(claim.clone());
            let values: Vec<&str> = match claims.get(claim) {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::String(s)) => vec![s.as_str()],
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| v.as_str().ok_or_else(not_strings))
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(not_strings()),
            };
            for v in values {
                roles.extend(self.cfg.roles.get(v).into_iter().flatten().copied());
            }
        }
        if roles.is_empty() {
            return Err(JwtRefused::NoRole);
        }
        Ok(roles.into_iter().collect())
    }
}

/// A hash of an issuer's config and the visibility its principals get.
fn fingerprint(cfg: &JwtConfig, visibility: Visibility) -> u64 {
    let digest = Sha256::digest(format!("{cfg:?}\n{visibility:?}").as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The three parts of a compact JWS: header and payload not empty, every
/// part base64url (the signature may be empty: `alg: none`).
fn parts(token: &str) -> Option<[&str; 3]> {
    let mut it = token.split('.');
    let p = [it.next()?, it.next()?, it.next()?];
    let b64url = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let ok =
        it.next().is_none() && !p[0].is_empty() && !p[1].is_empty() && p.iter().all(|s| b64url(s));
    ok.then_some(p)
}

/// A base64url part decoded as a JSON object.
fn json_part(part: &str) -> Option<Map<String, Value>> {
    let bytes = BASE64URL_NOPAD.decode(part.as_bytes()).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Whether a presented bearer token is a JWT (three base64url parts, a
/// header that is JSON with `alg`), so the caller tries issuers before
/// static tokens.
pub(crate) fn looks_like_jwt(token: &str) -> bool {
    token.len() <= 4 * MAX_TOKEN
        && parts(token)
            .and_then(|[header, _, _]| json_part(header))
            .is_some_and(|h| h.get("alg").is_some_and(Value::is_string))
}

/// The algorithms taken; every other one refused, named only if it is a
/// registered one (the header is the sender's text).
fn accepted(alg: &str) -> Result<Algorithm, JwtRefused> {
    const OTHERS: [&str; 12] = [
        "HS256", "HS384", "HS512", "RS384", "RS512", "PS256", "PS384", "PS512", "ES384", "ES512",
        "ES256K", "Ed25519",
    ];
    match alg {
        "RS256" => Ok(Algorithm::RS256),
        "ES256" => Ok(Algorithm::ES256),
        "EdDSA" => Ok(Algorithm::EdDSA),
        a if a.eq_ignore_ascii_case("none") => Err(JwtRefused::AlgNone),
        a => Err(JwtRefused::AlgNotAccepted(
            OTHERS
                .into_iter()
                .find(|o| *o == a)
                .unwrap_or("(unregistered)"),
        )),
    }
}

fn alg_name(alg: Algorithm) -> &'static str {
    match alg {
        Algorithm::RS256 => "RS256",
        Algorithm::ES256 => "ES256",
        Algorithm::EdDSA => "EdDSA",
        _ => "other",
    }
}

/// What a library error means for the sender.
fn refusal(kind: &ErrorKind) -> JwtRefused {
    match kind {
        ErrorKind::ExpiredSignature => JwtRefused::Expired,
        ErrorKind::ImmatureSignature => JwtRefused::NotYetValid,
        ErrorKind::InvalidIssuer => JwtRefused::WrongIssuer,
        ErrorKind::InvalidAudience => JwtRefused::WrongAudience,
        ErrorKind::MissingRequiredClaim(c) => JwtRefused::ClaimMissing(c.clone()),
        ErrorKind::InvalidClaimFormat(c) => JwtRefused::ClaimMalformed(c.clone()),
        ErrorKind::InvalidSignature
        | ErrorKind::InvalidAlgorithm
        | ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidEddsaKey
        | ErrorKind::InvalidRsaKey(_)
        | ErrorKind::InvalidKeyFormat
        | ErrorKind::Signing(_) => JwtRefused::BadSignature,
        _ => JwtRefused::Malformed,
    }
}

#[cfg(test)]
#[path = "jwt_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "jwt_https_tests.rs"]
mod https_tests;
