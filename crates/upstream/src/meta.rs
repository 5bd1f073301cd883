//! What the Copilot host announces under `_meta.copilot` about
//! authenticating: the connection's challenge (in `initialize`'s answer) and
//! the keys a credential is sealed to (in its root state). Typed here so a
//! host that changes them fails with a sentence, not a default.

use serde::Deserialize;

use crate::error::UpstreamError;

/// The algorithm this side seals with: libsodium's `crypto_box_seal`.
pub const SEALED_BOX: &str = "x25519-sealedbox";
/// The use a GitHub token is sealed for.
pub const AUTH_TOKEN: &str = "auth-token";

/// `_meta.copilot` as the host fills it; each part may be absent from one
/// of the two places it appears.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CopilotMeta {
    #[serde(default)]
    pub auth_challenge: Option<AuthChallenge>,
    #[serde(default)]
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
    #[serde(default)]
    pub uses: Vec<String>,
    pub algorithm: String,
}

impl CopilotMeta {
    /// `_meta.copilot` of a `_meta` object; an absent `copilot` is empty,
    /// a malformed one an error that names the field.
    pub fn of(
        meta: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Result<Self, UpstreamError> {
        let Some(copilot) = meta.and_then(|m| m.get("copilot")) else {
            return Ok(Self::default());
        };
        CopilotMeta::deserialize(copilot)
            .map_err(|e| UpstreamError::Announcement(format!("_meta.copilot: {e}")))
    }

    /// The key a GitHub token is sealed to: an `auth-token` key this side
    /// can seal for.
    pub fn auth_key(&self) -> Result<&EncryptionKey, UpstreamError> {
        self.encryption_keys
            .iter()
            .find(|k| k.algorithm == SEALED_BOX && k.uses.iter().any(|u| u == AUTH_TOKEN))
            .ok_or_else(|| {
                let offered: Vec<String> = self
                    .encryption_keys
                    .iter()
                    .map(|k| format!("{} for {}", k.algorithm, k.uses.join("+")))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn picks_the_sealed_box_key_for_auth_tokens() {
        let m = meta(json!({"copilot": {"encryptionKeys": [
            {"keyId": "h", "publicKey": "AAAA", "uses": ["auth-token"], "algorithm": "hpke-x25519-hkdf-sha256-aes256gcm"},
            {"keyId": "m", "publicKey": "AAAA", "uses": ["mcp-auth-token"], "algorithm": "x25519-sealedbox"},
            {"keyId": "a", "publicKey": "AAAA", "uses": ["mcp-auth-token", "auth-token"], "algorithm": "x25519-sealedbox"}
        ]}}));
        let c = CopilotMeta::of(Some(&m)).unwrap();
        assert_eq!(c.auth_key().unwrap().key_id, "a");
    }

    #[test]
    fn no_usable_key_names_what_was_offered() {
        let m = meta(json!({"copilot": {"encryptionKeys": [
            {"keyId": "h", "publicKey": "AAAA", "uses": ["auth-token"], "algorithm": "hpke-x25519-hkdf-sha256-aes256gcm"}
        ]}}));
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
        let m = meta(json!({"copilot": {"authChallenge": {"challenge": 7}}}));
        let e = CopilotMeta::of(Some(&m)).unwrap_err().to_string();
        assert!(e.contains("_meta.copilot"), "{e}");
    }
}
