//! Opaque paging cursors. A cursor names where a page ended (a position in
//! the list's order, never an index, so pages stay right while sessions come,
//! go and change), sealed with a key of this host instance and bound to the
//! principal it was handed to: it cannot be forged or altered, and another
//! principal presenting it gets the same InvalidParams as for garbage, so it
//! learns nothing. The key is made at start: cursors do not outlive the
//! process (the spec says clients must not persist them).

use std::cmp::Ordering;

use sha2::{Digest, Sha256};

/// Bytes of the MAC kept in a cursor.
const MAC_BYTES: usize = 16;
/// The cursor format; a cursor of another format is unrecognised.
const FORMAT: u8 = 1;
const PAYLOAD_BYTES: usize = 1 + 16 + 8;

/// Where a session lies in `listSessions` order: most recently modified
/// first, ties broken by a keyed hash of the URI (stable for the process,
/// and it says nothing about the URI when it travels in a cursor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SessionPosition {
    pub modified_ns: i128,
    pub tie: u64,
}

impl Ord for SessionPosition {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .modified_ns
            .cmp(&self.modified_ns)
            .then(self.tie.cmp(&other.tie))
    }
}

impl PartialOrd for SessionPosition {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The secret behind this instance's cursors.
pub(crate) struct CursorKey([u8; 32]);

impl CursorKey {
    /// A fresh random key (from the OS, through `uuid`'s v4 generator).
    pub(crate) fn random() -> Self {
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        Self(key)
    }

    /// The position of session `uri`, last modified at `modified_ns`.
    pub(crate) fn position(&self, modified_ns: i128, uri: &str) -> SessionPosition {
        let h = self.mac(&[b"tie\0", uri.as_bytes()]);
        let mut tie = [0u8; 8];
        tie.copy_from_slice(&h[..8]);
        SessionPosition {
            modified_ns,
            tie: u64::from_be_bytes(tie),
        }
    }

    /// The cursor that resumes after `pos`, for `principal` only.
    pub(crate) fn seal(&self, principal: &str, pos: SessionPosition) -> String {
        let payload = payload(pos);
        let mac = self.mac(&[b"cursor\0", principal.as_bytes(), b"\0", &payload]);
        let mut out = payload.to_vec();
        out.extend_from_slice(&mac[..MAC_BYTES]);
        hex::encode(out)
    }

    /// The position in a cursor this instance sealed for `principal`; `None`
    /// for anything else (garbage, altered, another principal's, another
    /// instance's).
    pub(crate) fn open(&self, principal: &str, cursor: &str) -> Option<SessionPosition> {
        let bytes = hex::decode(cursor).ok()?;
        if bytes.len() != PAYLOAD_BYTES + MAC_BYTES || bytes[0] != FORMAT {
            return None;
        }
        let (payload, mac) = bytes.split_at(PAYLOAD_BYTES);
        let want = self.mac(&[b"cursor\0", principal.as_bytes(), b"\0", payload]);
        // Compared in constant time: a timing must not leak the MAC.
        let diff = want[..MAC_BYTES]
            .iter()
            .zip(mac)
            .fold(0u8, |d, (a, b)| d | (a ^ b));
        if diff != 0 {
            return None;
        }
        let mut ns = [0u8; 16];
        ns.copy_from_slice(&payload[1..17]);
        let mut tie = [0u8; 8];
        tie.copy_from_slice(&payload[17..25]);
        Some(SessionPosition {
            modified_ns: i128::from_be_bytes(ns),
            tie: u64::from_be_bytes(tie),
        })
    }

    /// HMAC-SHA-256 (RFC 2104) of the concatenated parts.
    fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut block = [0u8; 64];
        block[..32].copy_from_slice(&self.0);
        let mut inner = Sha256::new();
        inner.update(block.map(|b| b ^ 0x36));
        for p in parts {
            inner.update(p);
        }
        let mut outer = Sha256::new();
        outer.update(block.map(|b| b ^ 0x5c));
        outer.update(inner.finalize());
        outer.finalize().into()
    }
}

fn payload(pos: SessionPosition) -> [u8; PAYLOAD_BYTES] {
    let mut p = [0u8; PAYLOAD_BYTES];
    p[0] = FORMAT;
    p[1..17].copy_from_slice(&pos.modified_ns.to_be_bytes());
    p[17..25].copy_from_slice(&pos.tie.to_be_bytes());
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_opens_only_for_its_principal_and_key() {
        let key = CursorKey::random();
        let pos = key.position(1_700_000_000_000_000_000, "ahp-session:/a");
        let c = key.seal("ide", pos);
        assert_eq!(key.open("ide", &c), Some(pos));
        assert_eq!(key.open("dashboard", &c), None, "another principal's");
        assert_eq!(
            CursorKey::random().open("ide", &c),
            None,
            "another instance's"
        );
        let mut altered = c.clone().into_bytes();
        altered[10] = if altered[10] == b'0' { b'1' } else { b'0' };
        assert_eq!(key.open("ide", &String::from_utf8(altered).unwrap()), None);
        for junk in ["", "zz", "00", &c[..c.len() - 2]] {
            assert_eq!(key.open("ide", junk), None, "{junk:?}");
        }
        assert!(!c.contains("session"), "opaque: {c}");
    }

    #[test]
    fn order_is_newest_first_then_by_tie() {
        let key = CursorKey::random();
        let old = key.position(1, "ahp-session:/x");
        let new = key.position(2, "ahp-session:/x");
        assert!(new < old);
        let (a, b) = (
            key.position(5, "ahp-session:/a"),
            key.position(5, "ahp-session:/b"),
        );
        assert_ne!(a.tie, b.tie);
        assert_eq!(a < b, a.tie < b.tie);
    }

    #[test]
    fn hmac_matches_rfc_4231_case_2_shape() {
        // RFC 4231 test case 2 uses a 4-byte key ("Jefe"), padded with zeros
        // to the block; the padding makes it the same as this 32-byte key.
        let mut k = [0u8; 32];
        k[..4].copy_from_slice(b"Jefe");
        let mac = CursorKey(k).mac(&[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
