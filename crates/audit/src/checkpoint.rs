//! Signed checkpoints: the operator's Ed25519 key vouches for the chain head
//! and for each record's hash since the previous checkpoint. Plain SHA-256
//! can be recomputed by anyone who can write the file; a signature cannot.
//!
//! Key files are one line of hex: `PREFIX.key` the 32-byte private seed (mode
//! 0600), `PREFIX.pub` the 32-byte public key. The key id is the first 16 hex
//! digits of SHA-256(public key).

use crate::audit_error::{AuditError, KeyFault};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};
use serde_json::Value;

use super::sha256_hex;

/// What a signature is over: a fixed label, then the checkpoint's canonical
/// JSON without `prev`, `hash` and `signature` (`head` carries the chain head).
const DOMAIN: &[u8] = b"ahp-copilot-bridge checkpoint v1\n";

/// How many hex digits of each covered record's hash a checkpoint lists: enough
/// to name the first altered record; the full head carries the security.
pub(crate) const HASH_PREFIX: usize = 16;

pub(crate) fn key_id(key: &VerifyingKey) -> String {
    sha256_hex(key.as_bytes())[..16].to_string()
}

/// The bridge's signing key, loaded from `[audit] signing_key`.
pub struct Signer {
    key: SigningKey,
    key_id: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Signer({})", self.key_id)
    }
}

impl Signer {
    /// Reads a private key file; refuses one that others may read.
    pub fn load(path: &Path) -> Result<Self, AuditError> {
        let bad = |reason: KeyFault| AuditError::SigningKey {
            path: path.to_owned(),
            reason,
        };
        let meta = std::fs::metadata(path).map_err(|e| bad(KeyFault::Unreadable(e)))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(bad(KeyFault::Exposed(meta.permissions().mode() & 0o777)));
        }
        let seed: [u8; 32] = read_hex32(path).map_err(bad)?;
        Ok(Self::from_seed(seed))
    }

    pub fn from_seed(seed: [u8; 32]) -> Self {
        let key = SigningKey::from_bytes(&seed);
        let key_id = key_id(&key.verifying_key());
        Self { key, key_id }
    }

    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    pub fn verifying_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    /// The hex signature of a checkpoint record (its `prev`, `hash` and
    /// `signature`, if present, are left out).
    pub fn sign(&self, checkpoint: &Value) -> String {
        hex::encode(self.key.sign(&message(checkpoint)).to_bytes())
    }
}

fn message(checkpoint: &Value) -> Vec<u8> {
    let mut body = checkpoint.clone();
    if let Some(o) = body.as_object_mut() {
        for k in ["prev", "hash", "signature"] {
            o.remove(k);
        }
    }
    let mut m = DOMAIN.to_vec();
    m.extend_from_slice(body.to_string().as_bytes());
    m
}

/// Whether `checkpoint`'s `signature` is `key`'s over its signed fields.
pub(crate) fn signature_holds(key: &VerifyingKey, checkpoint: &Value) -> bool {
    let Some(sig) = checkpoint["signature"]
        .as_str()
        .and_then(|s| hex::decode(s).ok())
        .and_then(|b| <[u8; 64]>::try_from(b).ok())
    else {
        return false;
    };
    key.verify(&message(checkpoint), &Signature::from_bytes(&sig))
        .is_ok()
}

pub fn load_public_key(path: &Path) -> Result<VerifyingKey, AuditError> {
    let bad = |reason: KeyFault| AuditError::PublicKey {
        path: path.to_owned(),
        reason,
    };
    let bytes = read_hex32(path).map_err(bad)?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| bad(KeyFault::NotEd25519(e)))
}

/// A key file's 32 bytes, or why not (the caller names the file).
fn read_hex32(path: &Path) -> Result<[u8; 32], KeyFault> {
    let text = std::fs::read_to_string(path).map_err(KeyFault::Unreadable)?;
    let bytes = hex::decode(text.trim()).map_err(|_| KeyFault::NotHex)?;
    <[u8; 32]>::try_from(bytes).map_err(|_| KeyFault::NotThirtyTwoBytes)
}

/// The files `audit keygen --out PREFIX` wrote, and the key id.
#[derive(Debug)]
pub struct KeyPair {
    pub private: PathBuf,
    pub public: PathBuf,
    pub key_id: String,
}

/// Writes a fresh key pair to `PREFIX.key` (mode 0600) and `PREFIX.pub`;
/// refuses to overwrite either.
pub fn keygen(prefix: &Path) -> Result<KeyPair, AuditError> {
    let with = |ext: &str| {
        let mut p = prefix.as_os_str().to_owned();
        p.push(ext);
        PathBuf::from(p)
    };
    let (private, public) = (with(".key"), with(".pub"));
    for p in [&private, &public] {
        if p.exists() {
            return Err(AuditError::Exists(p.to_owned()));
        }
    }
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| AuditError::NoRandomness(e.to_string()))?;
    let signer = Signer::from_seed(seed);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&private)
        .map_err(|e| AuditError::write(&private, e))?;
    f.write_all(format!("{}\n", hex::encode(seed)).as_bytes())?;
    f.sync_all()?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&public)
        .map_err(|e| AuditError::write(&public, e))?;
    f.write_all(format!("{}\n", hex::encode(signer.verifying_key().as_bytes())).as_bytes())?;
    f.sync_all()?;
    Ok(KeyPair {
        private,
        public,
        key_id: signer.key_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keygen_writes_a_private_file_only_the_owner_reads_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("audit");
        let kp = keygen(&prefix).unwrap();
        let mode = std::fs::metadata(&kp.private).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let signer = Signer::load(&kp.private).unwrap();
        let public = load_public_key(&kp.public).unwrap();
        assert_eq!(public, signer.verifying_key());
        assert_eq!(key_id(&public), kp.key_id);
        let e = keygen(&prefix).unwrap_err().to_string();
        assert!(e.contains("not overwritten"), "{e}");
        std::fs::set_permissions(&kp.private, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Signer::load(&kp.private).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
    }

    #[test]
    fn a_signature_covers_everything_but_prev_and_hash() {
        let s = Signer::from_seed([7; 32]);
        let mut cp =
            json!({"kind": "checkpoint", "seq": 5, "head": "ab", "hashes": ["ab"], "prev": "x"});
        cp["signature"] = s.sign(&cp).into();
        assert!(signature_holds(&s.verifying_key(), &cp));
        let mut moved = cp.clone();
        moved["prev"] = "y".into();
        moved["hash"] = "z".into();
        assert!(signature_holds(&s.verifying_key(), &moved));
        for (k, v) in [
            ("seq", json!(6)),
            ("head", json!("ac")),
            ("hashes", json!([])),
        ] {
            let mut bad = cp.clone();
            bad[k] = v;
            assert!(!signature_holds(&s.verifying_key(), &bad), "{k}");
        }
        let other = Signer::from_seed([8; 32]);
        assert!(!signature_holds(&other.verifying_key(), &cp));
    }
}
