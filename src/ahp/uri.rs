//! The channel URIs of AHP: the root, sessions (client-chosen ids) and chats.

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
}
