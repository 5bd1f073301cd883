//! What the Copilot host announces in `_meta` about authenticating, under
//! dotted keys: `copilot.authChallenge`, the connection's challenge (in
//! `initialize`'s answer), and `copilot.encryptionKeys`, the keys a
//! credential is sealed to (in its root state). Typed here so a host that
//! changes them fails with a sentence, not a default.

use serde::Deserialize;

use crate::upstream_error::UpstreamError;

/// The algorithm this side seals with: libsodium's `crypto_box_seal`.
pub(crate) const SEALED_BOX: &str = "x25519-sealedbox";
/// The use a GitHub token is sealed for.
pub(crate) const AUTH_TOKEN: &str = "auth-token";

/// The host's `_meta` keys this side reads; each is absent from one of the
/// two places the host fills.
#[derive(Debug, Default)]
pub struct CopilotMeta {
    pub auth_challenge: Option<AuthChallenge>,
    pub encryption_keys: Vec<EncryptionKey>,
}

/// The challenge a sealed token is bound to, fresh per connection.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthChallenge {
    pub challenge: String,
    #[serde(default)]
    pub response_max_age_seconds: Option<u64>,
    #[serde(default)]
    pub required: bool,
}

/// One public key the host takes sealed credentials for.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EncryptionKey {
    pub key_id: String,
    /// Standard base64 of the raw 32-byte key.
    pub public_key: String,
    /// What it is for: `auth-token` or `mcp-auth-token`.
    #[serde(rename = "use")]
    pub purpose: String,
    pub algorithm: String,
}

impl CopilotMeta {
    /// What a `_meta` object says; absent keys are empty, a malformed one
    /// an error that names it.
    pub fn of(
        meta: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Result<Self, UpstreamError> {
        let Some(meta) = meta else {
            return Ok(Self::default());
        };
        let mut read = Self::default();
        if let Some(v) = meta.get("copilot.authChallenge") {
            read.auth_challenge = Some(field(v, "copilot.authChallenge")?);
        }
        if let Some(v) = meta.get("copilot.encryptionKeys") {
            read.encryption_keys = field(v, "copilot.encryptionKeys")?;
        }
        Ok(read)
    }

    /// The key a GitHub token is sealed to: an `auth-token` key this side
    /// can seal for.
    pub fn auth_key(&self) -> Result<&EncryptionKey, UpstreamError> {
        self.encryption_keys
            .iter()
            .find(|k| k.algorithm == SEALED_BOX && k.purpose == AUTH_TOKEN)
            .ok_or_else(|| {
                let offered: Vec<String> = self
                    .encryption_keys
                    .iter()
                    .map(|k| format!("{} for {}", k.algorithm, k.purpose))
                    .collect();
                UpstreamError::Announcement(format!(
                    "no {SEALED_BOX} key for {AUTH_TOKEN} (offered: {})",
                    if offered.is_empty() {
                        "none".to_owned()
                    } else {
                        offered.join(", ")
                    }
                ))
            })
    }
}

fn field<T: serde::de::DeserializeOwned>(
    v: &serde_json::Value,
    key: &str,
) -> Result<T, UpstreamError> {
    T::deserialize(v).map_err(|e| UpstreamError::Announcement(format!("_meta.{key}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn picks_the_sealed_box_key_for_auth_tokens() {
        // As CLI 1.0.102's root state carries them.
        let m = meta(json!({"copilot.encryptionKeys": [
            {"keyId": "h", "publicKey": "AAAA", "use": "auth-token", "algorithm": "hpke-x25519-hkdf-sha256-aes256gcm"},
            {"keyId": "m", "publicKey": "AAAA", "use": "mcp-auth-token", "algorithm": "x25519-sealedbox"},
            {"keyId": "a", "publicKey": "AAAA", "use": "auth-token", "algorithm": "x25519-sealedbox"}
        ], "copilot.projectManagement": {"available": true}}));
        let c = CopilotMeta::of(Some(&m)).unwrap();
        assert_eq!(c.auth_key().unwrap().key_id, "a");
    }

    #[test]
    fn no_usable_key_names_what_was_offered() {
        let m = meta(json!({"copilot.encryptionKeys": [
            {"keyId": "h", "publicKey": "AAAA", "use": "auth-token", "algorithm": "hpke-x25519-hkdf-sha256-aes256gcm"}
        ]}));
        let e = CopilotMeta::of(Some(&m))
            .unwrap()
            .auth_key()
            .unwrap_err()
            .to_string();
        assert!(e.contains("no x25519-sealedbox key for auth-token"), "{e}");
        assert!(
            e.contains("hpke-x25519-hkdf-sha256-aes256gcm for auth-token"),
            "{e}"
        );
        let none = CopilotMeta::of(None)
            .unwrap()
            .auth_key()
            .unwrap_err()
            .to_string();
        assert!(none.contains("offered: none"), "{none}");
    }

    #[test]
    fn a_malformed_challenge_names_its_field() {
        let m = meta(json!({"copilot.authChallenge": {"challenge": 7}}));
        let e = CopilotMeta::of(Some(&m)).unwrap_err().to_string();
        assert!(e.contains("_meta.copilot.authChallenge"), "{e}");
        let m = meta(
            json!({"copilot.authChallenge": {"challenge": "c", "responseMaxAgeSeconds": 300, "required": true}}),
        );
        assert_eq!(
            CopilotMeta::of(Some(&m))
                .unwrap()
                .auth_challenge
                .unwrap()
                .challenge,
            "c"
        );
    }
}
