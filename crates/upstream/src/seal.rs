//! The sealed GitHub token the Copilot host's `authenticate` takes:
//! `copilot-sealed.v1.<keyId>.<base64url(crypto_box_seal(plaintext))>`,
//! the plaintext binding the token to this connection's challenge, a fresh
//! nonce (128 bits, lowercase hex) and the time, so a sealed token seen once is worth nothing on
//! another connection or a second time.

use ahp_bridge_base::config::Secret;
use data_encoding::{BASE64, BASE64URL_NOPAD};
use serde::Serialize;

use crate::meta::{EncryptionKey, AUTH_TOKEN};
use crate::upstream_error::UpstreamError;

/// The prefix of every sealed token of this version.
const PREFIX: &str = "copilot-sealed.v1.";

/// What the token is sealed for: the protected resource and the
/// connection's challenge.
pub struct SealBinding<'a> {
    pub resource: &'a str,
    pub challenge: &'a str,
}

#[derive(Serialize)]
struct Plaintext<'a> {
    cty: &'static str,
    ctx: Context<'a>,
    value: &'a str,
}

#[derive(Serialize)]
struct Context<'a> {
    purpose: &'static str,
    resource: &'a str,
    connection: Connection<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Connection<'a> {
    challenge: &'a str,
    nonce: &'a str,
    issued_at: u64,
}

/// `github_token` sealed to `key` for `binding`, issued at `now` (Unix
/// seconds), with a fresh nonce.
pub fn sealed_token(
    key: &EncryptionKey,
    binding: &SealBinding<'_>,
    github_token: &Secret,
    now: u64,
) -> Result<Secret, UpstreamError> {
    let raw = BASE64
        .decode(key.public_key.as_bytes())
        .map_err(|e| UpstreamError::Seal(format!("key {}: not base64: {e}", key.key_id)))?;
    let raw: [u8; 32] = raw.try_into().map_err(|r: Vec<u8>| {
        UpstreamError::Seal(format!("key {}: {} bytes, not 32", key.key_id, r.len()))
    })?;
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).map_err(|e| UpstreamError::Seal(format!("no randomness: {e}")))?;
    // The host takes 128 random bits as 32 lowercase hex characters.
    let nonce = hex::encode(nonce);
    let plaintext = serde_json::to_vec(&Plaintext {
        cty: "text",
        ctx: Context {
            purpose: AUTH_TOKEN,
            resource: binding.resource,
            connection: Connection {
                challenge: binding.challenge,
                nonce: &nonce,
                issued_at: now,
            },
        },
        value: &github_token.0,
    })
    .map_err(|e| UpstreamError::Seal(e.to_string()))?;
    let sealed = crypto_box::PublicKey::from(raw)
        .seal(&mut crypto_box::aead::OsRng, &plaintext)
        .map_err(|_| UpstreamError::Seal(format!("key {}: sealing failed", key.key_id)))?;
    Ok(Secret(format!(
        "{PREFIX}{}.{}",
        key.key_id,
        BASE64URL_NOPAD.encode(&sealed)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_pair() -> (crypto_box::SecretKey, EncryptionKey) {
        let secret = crypto_box::SecretKey::generate(&mut crypto_box::aead::OsRng);
        let public = BASE64.encode(secret.public_key().as_bytes());
        let key = EncryptionKey {
            key_id: "k1".into(),
            public_key: public,
            purpose: AUTH_TOKEN.into(),
            algorithm: crate::meta::SEALED_BOX.into(),
        };
        (secret, key)
    }

    fn open(secret: &crypto_box::SecretKey, token: &Secret) -> serde_json::Value {
        let body = token
            .0
            .strip_prefix("copilot-sealed.v1.k1.")
            .expect(&token.0);
        let sealed = BASE64URL_NOPAD.decode(body.as_bytes()).unwrap();
        serde_json::from_slice(&secret.unseal(&sealed).unwrap()).unwrap()
    }

    #[test]
    fn the_host_opens_what_it_expects() {
        let (secret, key) = key_pair();
        let binding = SealBinding {
            resource: "https://api.github.com",
            challenge: "c-1",
        };
        let token = sealed_token(&key, &binding, &Secret("ghp_x".into()), 1_700_000_000).unwrap();
        let p = open(&secret, &token);
        assert_eq!(p["cty"], "text");
        assert_eq!(p["value"], "ghp_x");
        assert_eq!(p["ctx"]["purpose"], "auth-token");
        assert_eq!(p["ctx"]["resource"], "https://api.github.com");
        assert_eq!(p["ctx"]["connection"]["challenge"], "c-1");
        assert_eq!(p["ctx"]["connection"]["issuedAt"], 1_700_000_000u64);
        assert!(!token.0.contains("ghp_x"));
    }

    #[test]
    fn every_token_has_a_fresh_nonce() {
        let (secret, key) = key_pair();
        let binding = SealBinding {
            resource: "r",
            challenge: "c",
        };
        let t = Secret("ghp_x".into());
        let a = open(&secret, &sealed_token(&key, &binding, &t, 1).unwrap());
        let b = open(&secret, &sealed_token(&key, &binding, &t, 1).unwrap());
        let nonce =
            |p: &serde_json::Value| p["ctx"]["connection"]["nonce"].as_str().unwrap().to_owned();
        assert_eq!(nonce(&a).len(), 32);
        assert!(nonce(&a)
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert_ne!(nonce(&a), nonce(&b));
    }

    #[test]
    fn a_bad_key_is_named() {
        let (_, mut key) = key_pair();
        key.public_key = BASE64.encode(&[1u8; 31]);
        let e = sealed_token(
            &key,
            &SealBinding {
                resource: "r",
                challenge: "c",
            },
            &Secret("t".into()),
            1,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("key k1: 31 bytes, not 32"), "{e}");
    }
}
