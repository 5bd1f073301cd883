//! Protocol version negotiation.

use ahp_types::state::SessionSummary;

/// The protocol versions this host implements, most preferred first.
pub(crate) const IMPLEMENTED_VERSIONS: &[&str] = ahp_types::SUPPORTED_PROTOCOL_VERSIONS;

/// The line of the protocol a connection speaks: what it may be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Version {
    /// 0.9.x: sent nothing 1.0 introduced.
    V0_9,
    #[default]
    V1_0,
    /// 1.1 and later 1.x: may also reconnect channel by channel.
    V1_1,
}

/// The actions 1.0.0 introduced (from the 0.9.0 and 1.0.0 type
/// definitions; the upstream registry tags some of them 0.9.0 wrongly).
const ADDED_IN_1_0: &[&str] = &[
    "session/chatsReordered",
    "session/mcpServerBackgroundRequested",
    "chat/backgroundWorkSet",
    "chat/backgroundWorkRemoved",
    "chat/movableChanged",
    "chat/changesetsChanged",
    "chat/canvasesChanged",
    "canvas/stateChanged",
    "chat/isReadChanged",
    "chat/isArchivedChanged",
];

impl Version {
    /// The line of a negotiated version.
    pub fn of(negotiated: &str) -> Self {
        match semver(negotiated) {
            Some((0, _, _)) => Self::V0_9,
            Some((1, 0, _)) | None => Self::V1_0,
            Some(_) => Self::V1_1,
        }
    }

    /// Whether a connection of this line knows the action type `ty`.
    pub fn knows_action(self, ty: &str) -> bool {
        self >= Self::V1_0 || !ADDED_IN_1_0.contains(&ty)
    }

    /// Whether a session summary carries `chats` and `defaultChat` (1.0 added them).
    pub fn summaries_name_chats(self) -> bool {
        self >= Self::V1_0
    }

    /// A session summary as this line defines it: without `chats` and
    /// `defaultChat` for 0.9.
    pub fn summary(self, summary: &mut SessionSummary) {
        if !self.summaries_name_chats() {
            summary.chats = None;
            summary.default_chat = None;
        }
    }
}

/// The version to speak, by the spec's rule (and the official crate's
/// implementation of it): the highest offered version within a released
/// baseline's caret range (`^1.0.0`, `^0.9.0`), returned as offered,
/// whatever the order. `Ok(None)`: nothing in common; `Err`: a malformed
/// entry (three plain integers, no prerelease), named.
pub(crate) fn negotiate(offered: &[String]) -> Result<Option<String>, MalformedVersion> {
    match ahp_types::negotiate_protocol_version(offered) {
        Ok(v) => Ok(v.map(String::from)),
        Err(e) => Err(MalformedVersion(e.to_string())),
    }
}

/// An offered version that is not three plain integers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct MalformedVersion(String);

fn semver(v: &str) -> Option<(u64, u64, u64)> {
    let mut parts = v.split('.').map(|p| p.parse::<u64>().ok());
    let out = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(offered: &[&str]) -> Option<String> {
        negotiate(&offered.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap_or(None)
    }

    #[test]
    fn a_line_per_version_and_what_each_is_sent() {
        assert_eq!(Version::of("0.9.0"), Version::V0_9);
        assert_eq!(Version::of("1.0.0"), Version::V1_0);
        assert_eq!(Version::of("1.1.0"), Version::V1_1);
        assert!(!Version::V0_9.knows_action("chat/isReadChanged"));
        assert!(Version::V0_9.knows_action("chat/delta"));
        assert!(Version::V1_0.knows_action("chat/isReadChanged"));
        assert!(!Version::V0_9.summaries_name_chats());
        let mut summary: SessionSummary = serde_json::from_value(serde_json::json!({
            "resource": "copilot:/1", "provider": "copilot", "title": "t", "status": 1,
            "createdAt": "x", "modifiedAt": "x", "chats": [], "defaultChat": "c",
        }))
        .unwrap();
        Version::V1_0.summary(&mut summary);
        assert!(summary.chats.is_some() && summary.default_chat.is_some());
        Version::V0_9.summary(&mut summary);
        assert!(summary.chats.is_none() && summary.default_chat.is_none());
    }

    #[test]
    fn the_highest_implemented_offer_wins() {
        assert_eq!(pick(&["1.1.0", "1.0.0"]).as_deref(), Some("1.1.0"));
        assert_eq!(
            pick(&["0.10.0", "0.9.0", "0.7.0"]).as_deref(),
            Some("0.9.0")
        );
        assert_eq!(pick(&["0.9.0", "1.0.0"]).as_deref(), Some("1.0.0"));
        assert_eq!(pick(&["0.9.0"]).as_deref(), Some("0.9.0"));
        // Nothing implemented offered: a compatible version still connects.
        assert_eq!(pick(&["1.2.0"]).as_deref(), Some("1.2.0"));
        assert_eq!(pick(&["2.0.0"]), None);
        assert_eq!(pick(&["0.8.0"]), None);
        assert!(negotiate(&["banana".into()]).is_err());
        assert_eq!(pick(&[]), None);
    }
}
