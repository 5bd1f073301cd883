//! An OIDC issuer in the test: keys made here (ES256, Ed25519) or the RSA
//! key in `fixtures/jwt/`, the tokens it signs, and its key set (JWKS).

use std::path::{Path, PathBuf};

use data_encoding::BASE64URL_NOPAD;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivateKeyDer;
use serde_json::{json, Value};

/// The issuer the tests' configs trust.
pub const ISSUER: &str = "https://idp.test";

/// A signing key and its public JWK.
pub struct TokenSigner {
    pub alg: Algorithm,
    pub key: EncodingKey,
    pub jwk: Value,
}

fn b64(bytes: &[u8]) -> String {
    BASE64URL_NOPAD.encode(bytes)
}

/// A P-256 key made now, its JWK named `kid`.
pub fn es256(kid: &str) -> TokenSigner {
    let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let raw = kp.public_key_raw(); // 0x04 || x || y
    assert_eq!(raw.len(), 65);
    TokenSigner {
        alg: Algorithm::ES256,
        key: EncodingKey::from_ec_der(&kp.serialize_der()),
        jwk: json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
                    "x": b64(&raw[1..33]), "y": b64(&raw[33..])}),
    }
}

/// An Ed25519 key made now, its JWK named `kid`.
pub fn ed25519(kid: &str) -> TokenSigner {
    let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    TokenSigner {
        alg: Algorithm::EdDSA,
        key: EncodingKey::from_ed_der(&kp.serialize_der()),
        jwk: json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "alg": "EdDSA",
                    "x": b64(kp.public_key_raw())}),
    }
}

/// A file of the workspace's `fixtures/jwt/`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/jwt")
        .join(name)
}

/// The RSA key of `fixtures/jwt/` (kid `rsa-test`): generating one in a
/// test would take seconds.
pub fn rs256() -> TokenSigner {
    let PrivateKeyDer::Pkcs1(der) =
        PrivateKeyDer::from_pem_file(fixture("rsa-test-key.pem")).unwrap()
    else {
        panic!("the fixture is a PKCS#1 RSA key")
    };
    let set: Value =
        serde_json::from_slice(&std::fs::read(fixture("rsa-test-key.jwk.json")).unwrap()).unwrap();
    TokenSigner {
        alg: Algorithm::RS256,
        key: EncodingKey::from_rsa_der(der.secret_pkcs1_der()),
        jwk: set["keys"][0].clone(),
    }
}

/// Seconds since the epoch, as the claims count time.
pub fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// `claims` signed by `s`, the header naming `kid` (or no key).
pub fn sign_as(s: &TokenSigner, kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(s.alg);
    header.kid = kid.map(str::to_owned);
    encode(&header, claims, &s.key).unwrap()
}

/// `claims` signed by `s`, the header naming its JWK's `kid`.
pub fn sign(s: &TokenSigner, claims: &Value) -> String {
    sign_as(s, s.jwk["kid"].as_str(), claims)
}

/// A token of parts given as JSON, with any signature.
pub fn forged(header: &Value, claims: &Value, signature: &str) -> String {
    let part = |v: &Value| b64(&serde_json::to_vec(v).unwrap());
    format!("{}.{}.{signature}", part(header), part(claims))
}

/// The key set of `signers`' public keys.
pub fn jwks_json(signers: &[&TokenSigner]) -> Vec<u8> {
    let keys: Vec<&Value> = signers.iter().map(|s| &s.jwk).collect();
    serde_json::to_vec(&json!({ "keys": keys })).unwrap()
}

/// [`jwks_json`] written to `path`.
pub fn write_jwks(path: &Path, signers: &[&TokenSigner]) {
    std::fs::write(path, jwks_json(signers)).unwrap();
}
