//! URIs: the channels of AHP (the root, sessions with client-chosen ids,
//! chats) and the one conversion of a `file:` URI to a local path, used for
//! a session's working directory (the runtime's), file reads and completions.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

pub const ROOT_URI: &str = "ahp-root://";
/// The default chat of a session: `ahp-chat://default/<base64url(session URI)>`,
/// which a client can derive from the session URI (VS Code does).
const CHAT_PREFIX: &str = "ahp-chat://default/";
/// The chat URIs this host published before (`ahp-chat:/<id>` for
/// `ahp-session:/<id>`); sessions stored then still answer to them.
const LEGACY_CHAT_PREFIX: &str = "ahp-chat:/";
const LEGACY_SESSION_PREFIX: &str = "ahp-session:/";
/// The longest session URI a client may choose.
pub const MAX_SESSION_URI: usize = 512;

/// The kind of channel an URI names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    Root,
    Session,
    Chat,
    /// One of the host's own channels (the spec reserves `x-` schemes for them).
    HostChannel,
    /// Not a URI at all.
    Other,
}

/// A URI's scheme, if it has one (letters, digits, `+`, `-`, `.`, a letter first).
fn scheme(uri: &str) -> Option<&str> {
    let (scheme, _) = uri.split_once(':')?;
    let mut chars = scheme.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    ok.then_some(scheme)
}

/// Which channel `uri` names: session URIs are client-chosen and opaque, so
/// any absolute URI that is not the root, a chat or a host channel is one.
pub fn channel_kind(uri: &str) -> ChannelKind {
    if uri == ROOT_URI {
        return ChannelKind::Root;
    }
    match scheme(uri) {
        Some(s) if s.eq_ignore_ascii_case("ahp-chat") => ChannelKind::Chat,
        Some(s) if s.len() > 2 && s[..2].eq_ignore_ascii_case("x-") => ChannelKind::HostChannel,
        Some(_) => ChannelKind::Session,
        None => ChannelKind::Other,
    }
}

/// Why a client's session URI is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `channel` {0}")]
pub struct BadSessionUri(&'static str);

/// A session URI a client may choose: any absolute URI of at most
/// [`MAX_SESSION_URI`] bytes without control characters or white space,
/// whose scheme is not the root's, a chat's or a host channel's (`x-`).
pub fn check_session_uri(uri: &str) -> Result<(), BadSessionUri> {
    if uri.len() > MAX_SESSION_URI {
        return Err(BadSessionUri("is over 512 bytes"));
    }
    if uri.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(BadSessionUri("holds a control character or white space"));
    }
    let rest = uri.split_once(':').map(|(_, r)| r).unwrap_or_default();
    if scheme(uri).is_none() || rest.is_empty() {
        return Err(BadSessionUri(
            "must be an absolute URI (scheme:rest), e.g. `ahp-session:/<uuid>`",
        ));
    }
    match channel_kind(uri) {
        ChannelKind::Session if !uri.to_ascii_lowercase().starts_with("ahp-root:") => Ok(()),
        _ => Err(BadSessionUri(
            "uses a scheme reserved for the root, chats or host channels (`x-`)",
        )),
    }
}

/// The default chat of the session `session_uri`.
pub fn chat_uri_of(session_uri: &str) -> String {
    format!(
        "{CHAT_PREFIX}{}",
        data_encoding::BASE64URL_NOPAD.encode(session_uri.as_bytes())
    )
}

/// The chat URI an earlier version of this host gave `session_uri`, if it
/// gave it one of its own form (`ahp-chat:/<id>`).
pub fn legacy_chat_uri_of(session_uri: &str) -> Option<String> {
    let id = session_uri.strip_prefix(LEGACY_SESSION_PREFIX)?;
    Some(format!("{LEGACY_CHAT_PREFIX}{id}"))
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

/// A working directory: a local path (see [`local_path`]) that is also
/// UTF-8, since the runtime is handed it as JSON text: a path that text
/// cannot carry would be another directory there than the one files are
/// read from here.
pub fn working_directory(uri: &str) -> Result<PathBuf, NotLocalPath> {
    let path = local_path(uri)?;
    match path.to_str() {
        Some(_) => Ok(path),
        None => Err(NotLocalPath {
            why: "a path that is not UTF-8",
            uri: uri.to_owned(),
        }),
    }
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
    fn session_uris_are_opaque_and_chat_uris_derive_from_them() {
        for ok in [
            "ahp-session:/abc-1",
            "copilot:/3b7e1f0a-2c4d",
            "urn:x:y",
            "my+app.v2:/a/b?c",
        ] {
            assert_eq!(check_session_uri(ok), Ok(()), "{ok}");
            assert_eq!(channel_kind(ok), ChannelKind::Session, "{ok}");
        }
        for bad in [
            "nope",
            "ahp-session:",
            "copilot:/a b",
            "copilot:/a\u{7}",
            "ahp-chat:/x",
            "ahp-root://x",
            "x-audit://log",
            "1abc:/x",
        ] {
            assert!(check_session_uri(bad).is_err(), "{bad}");
        }
        assert!(check_session_uri(&format!("copilot:/{}", "a".repeat(600))).is_err());
        assert_eq!(channel_kind("ahp-chat://default/abc"), ChannelKind::Chat);
        assert_eq!(channel_kind("ahp-chat:/x"), ChannelKind::Chat);
        assert_eq!(channel_kind("x-audit://log"), ChannelKind::HostChannel);
        assert_eq!(channel_kind(ROOT_URI), ChannelKind::Root);
        assert_eq!(channel_kind("relative"), ChannelKind::Other);
        // As VS Code derives it: base64url of the session URI, no padding.
        assert_eq!(
            chat_uri_of("copilot:/3b7e1f0a-2c4d-4e5f-8a9b-0c1d2e3f4a5b"),
            "ahp-chat://default/Y29waWxvdDovM2I3ZTFmMGEtMmM0ZC00ZTVmLThhOWItMGMxZDJlM2Y0YTVi"
        );
        assert_eq!(
            legacy_chat_uri_of("ahp-session:/s1").as_deref(),
            Some("ahp-chat:/s1")
        );
        assert_eq!(legacy_chat_uri_of("copilot:/s1"), None);
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
        // A file may be named so; a working directory may not.
        assert!(local_path("file:///tmp/%FF").is_ok());
        let err = working_directory("file:///tmp/%FF").unwrap_err();
        assert_eq!(err.why, "a path that is not UTF-8");
        assert!(working_directory("file:///tmp/%C3%A9").is_ok());
    }
}
