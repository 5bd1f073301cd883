//! URIs: the channels of AHP (the root, sessions with client-chosen ids,
//! chats) and the one conversion of a `file:` URI to a local path, used for
//! a session's working directory (the runtime's), file reads and completions.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

pub const ROOT_URI: &str = "ahp-root://";
const SESSION_PREFIX: &str = "ahp-session:/";
const CHAT_PREFIX: &str = "ahp-chat:/";

/// The kind of channel an URI names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    Root,
    Session,
    Chat,
    Other,
}

pub fn channel_kind(uri: &str) -> ChannelKind {
    if uri == ROOT_URI {
        ChannelKind::Root
    } else if uri.starts_with(SESSION_PREFIX) {
        ChannelKind::Session
    } else if uri.starts_with(CHAT_PREFIX) {
        ChannelKind::Chat
    } else {
        ChannelKind::Other
    }
}

/// Session URIs are client-chosen: `ahp-session:/` and a non-empty id of safe
/// characters (they name files and appear in logs).
pub fn session_id_of(uri: &str) -> Option<&str> {
    let id = uri.strip_prefix(SESSION_PREFIX)?;
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    ok.then_some(id)
}

/// The default chat of the session with id `id`.
pub fn chat_uri_of(session_id: &str) -> String {
    format!("{CHAT_PREFIX}{session_id}")
}

/// A URI that does not name a local absolute path; says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why}: {uri:?}")]
pub struct NotLocalPath {
    pub why: &'static str,
    pub uri: String,
}

/// The local path a `file:` URI names (`file:///a/b`, `file://localhost/a/b`,
/// percent-escapes decoded), or a plain absolute path as it is. A host other
/// than localhost, a query or a fragment, a relative path or a NUL is not
/// a local absolute path.
pub fn local_path(uri: &str) -> Result<PathBuf, NotLocalPath> {
    let refuse = |why| NotLocalPath {
        why,
        uri: uri.to_owned(),
    };
    let escaped = match uri.strip_prefix("file://") {
        Some(rest) => match rest.strip_prefix("localhost") {
            Some(r) if r.starts_with('/') => r,
            _ => rest,
        },
        // A plain path: taken as it is, nothing to decode.
        None if uri.starts_with('/') => {
            return plain_path(uri.as_bytes()).ok_or(refuse("a NUL in a path"))
        }
        None => return Err(refuse("not a file: URI or an absolute path")),
    };
    if !escaped.starts_with('/') {
        return Err(refuse("a file: URI with a host other than localhost"));
    }
    if escaped.contains(['?', '#']) {
        return Err(refuse("a query or fragment in a file: URI"));
    }
    let bytes = percent_decode(escaped.as_bytes()).ok_or(refuse("a bad %-escape"))?;
    plain_path(&bytes).ok_or(refuse("a NUL in a path"))
}

fn plain_path(bytes: &[u8]) -> Option<PathBuf> {
    (!bytes.contains(&0)).then(|| PathBuf::from(OsString::from_vec(bytes.to_vec())))
}

/// `file://` and the path, escaped where a URI needs it.
pub fn file_uri_of(path: &Path) -> String {
    let mut out = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn percent_decode(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            let hex = std::str::from_utf8(s.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_uris() {
        assert_eq!(session_id_of("ahp-session:/abc-1"), Some("abc-1"));
        assert_eq!(session_id_of("ahp-session:/"), None);
        assert_eq!(session_id_of("ahp-session:/a/b"), None);
        assert_eq!(session_id_of("http://x"), None);
        assert_eq!(channel_kind("ahp-chat:/x"), ChannelKind::Chat);
        assert_eq!(channel_kind(ROOT_URI), ChannelKind::Root);
        assert_eq!(chat_uri_of("a"), "ahp-chat:/a");
    }

    #[test]
    fn file_uris_are_decoded_once_and_only_local_absolute_paths_pass() {
        let p = |u: &str| local_path(u).map(|p| p.display().to_string());
        assert_eq!(p("file:///tmp/a%20b").unwrap(), "/tmp/a b");
        assert_eq!(p("file://localhost/tmp/x").unwrap(), "/tmp/x");
        assert_eq!(
            p("/tmp/a%20b").unwrap(),
            "/tmp/a%20b",
            "a plain path is not a URI"
        );
        for bad in [
            "file://host/tmp",
            "file:///tmp?x",
            "file:///tmp/%zz",
            "file:///tmp/%00",
            "relative/dir",
            "https://example.com/x",
        ] {
            assert!(local_path(bad).is_err(), "{bad}");
        }
        let p = Path::new("/w d/é#%.rs");
        assert_eq!(file_uri_of(p), "file:///w%20d/%C3%A9%23%25.rs");
        assert_eq!(local_path(&file_uri_of(p)).unwrap(), p);
        assert_eq!(local_path("/srv/x").unwrap(), PathBuf::from("/srv/x"));
    }
}
