//! Tokens an issuer signs in the test: an ES256 key made here, the RSA key
//! in `fixtures/jwt/`, a key set file the bridge reads.

use std::path::{Path, PathBuf};

use data_encoding::BASE64URL_NOPAD;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivateKeyDer;
use serde_json::{json, Value};

pub const ISSUER: &str = "https://idp.test";

/// A signing key and its public JWK.
pub struct Signer {
    pub alg: Algorithm,
    pub key: EncodingKey,
    pub jwk: Value,
}

pub fn es256(kid: &str) -> Signer {
    let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let raw = kp.public_key_raw(); // 0x04 || x || y
    Signer {
        alg: Algorithm::ES256,
        key: EncodingKey::from_ec_der(&kp.serialize_der()),
        jwk: json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
                    "x": BASE64URL_NOPAD.encode(&raw[1..33]), "y": BASE64URL_NOPAD.encode(&raw[33..])}),
    }
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/jwt")
        .join(name)
}

/// The RSA key of `fixtures/jwt/` (kid `rsa-test`).
pub fn rs256() -> Signer {
    let PrivateKeyDer::Pkcs1(der) =
        PrivateKeyDer::from_pem_file(fixture("rsa-test-key.pem")).unwrap()
    else {
        panic!("the fixture is a PKCS#1 RSA key")
    };
    let set: Value =
        serde_json::from_slice(&std::fs::read(fixture("rsa-test-key.jwk.json")).unwrap()).unwrap();
    Signer {
        alg: Algorithm::RS256,
        key: EncodingKey::from_rsa_der(der.secret_pkcs1_der()),
        jwk: set["keys"][0].clone(),
    }
}

pub fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// `sub` for ten minutes, in `groups`.
pub fn claims(sub: &str, groups: &[&str]) -> Value {
    json!({"iss": ISSUER, "aud": "ahp", "sub": sub, "exp": now() + 600, "groups": groups})
}

pub fn sign(s: &Signer, claims: &Value) -> String {
    let mut header = Header::new(s.alg);
    header.kid = s.jwk["kid"].as_str().map(String::from);
    encode(&header, claims, &s.key).unwrap()
}

/// A token of parts given as JSON, with any signature.
pub fn forged(header: &Value, claims: &Value, signature: &str) -> String {
    let part = |v: &Value| BASE64URL_NOPAD.encode(&serde_json::to_vec(v).unwrap());
    format!("{}.{}.{signature}", part(header), part(claims))
}

pub fn write_jwks(path: &Path, signers: &[&Signer]) {
    let keys: Vec<&Value> = signers.iter().map(|s| &s.jwk).collect();
    std::fs::write(path, serde_json::to_vec(&json!({ "keys": keys })).unwrap()).unwrap();
}

/// `[[jwt]] corp` reading the key set at `jwks`: `copilot-users` participate
/// and transform, `copilot-admins` administer, everyone observes.
pub fn jwt_toml(jwks: &Path) -> String {
    format!(
        "[[jwt]]\nname = \"corp\"\nissuer = \"{ISSUER}\"\naudiences = [\"ahp\"]\njwks = {:?}\n\
         roles_claim = \"groups\"\ndefault_roles = [\"observe\"]\n[jwt.roles]\n\
         \"copilot-admins\" = [\"admin\"]\n\"copilot-users\" = [\"participate\", \"transform\"]\n",
        jwks.display().to_string()
    )
}
