//! The documented example input of each point (docs/policy.md shows each;
//! a test holds the two the same). The strict check evaluates a policy's
//! sets on them, so a set that errs or has the wrong type on the inputs
//! the docs promise is refused before it is put in force.

use std::sync::LazyLock;

use serde_json::Value;

use super::point::Point;

const OPT_IN: &str = r#"{"point": "opt_in", "principal": "corp:alice", "roles": ["observe", "participate", "transform"],
 "claims": {"iss": "https://login.example.com/tenant/v2.0", "sub": "alice", "groups": ["copilot-writers"]},
 "client": {"id": "ide-alice-1", "kind": "ahp"}, "session": "ahp-session:/x1",
 "sections": ["tone", "custom_instructions"]}"#;

const SESSION_AHP: &str = r#"{"point": "session", "principal": "corp:carol", "roles": ["observe", "participate"],
 "claims": {"sub": "carol", "groups": ["contractors"]},
 "client": {"id": "ide-carol-1", "kind": "ahp"}, "session": "ahp-session:/x2",
 "config": {"provider": "copilot", "workingDirectories": ["/srv/work/acme"],
            "workingDirectoryUris": ["file:///srv/work/acme"],
            "model": "gpt-4.1", "config": {"model": "gpt-4.1"}}}"#;

const SESSION_SDK: &str = r#"{"point": "session", "principal": "sdk-apps", "roles": ["observe", "participate"], "claims": {},
 "client": {"id": "sdk:3", "kind": "sdk"}, "session": "review-42",
 "config": {"provider": null, "workingDirectories": ["/srv/work/app", "/srv/shared"],
            "workingDirectoryUris": ["file:///srv/work/app", "file:///srv/shared"],
            "model": "gpt-4.1",
            "config": {"sessionId": "review-42", "model": "gpt-4.1", "workingDirectory": "/srv/work/app",
                       "additionalDirectories": ["/srv/shared"]}}}"#;

const TRANSFORM: &str = r#"{"point": "transform", "principal": "corp:alice", "roles": ["observe", "participate", "transform"],
 "claims": {"sub": "alice", "groups": ["copilot-writers"]},
 "client": {"id": "ide-alice-1", "kind": "ahp"}, "session": "ahp-session:/x1",
 "section": "tone", "action": "transform", "before": "Be concise.", "after": "Be concise.\nAnswer in French.",
 "added": "\nAnswer in French.", "removed": "", "owner": "ide-alice-1"}"#;

const ADDITION: &str = r#"{"point": "transform", "principal": "corp:alice", "roles": ["observe", "participate", "transform"],
 "claims": {"sub": "alice", "groups": ["copilot-writers"]},
 "client": {"id": "ide-alice-1", "kind": "ahp"}, "session": "ahp-session:/x3",
 "section": "custom_instructions", "action": "append", "before": null,
 "added": "Answer in French.", "owner": "ide-alice-1"}"#;

const PERMISSION: &str = r#"{"point": "permission", "principal": "corp:alice", "roles": ["observe", "participate"],
 "claims": {"sub": "alice", "groups": ["staff"]},
 "client": {"id": "ide-alice-1", "kind": "ahp"}, "session": "ahp-session:/x1",
 "working_directories": ["/srv/work/acme"],
 "request": {"kind": "shell", "toolCallId": "call_7", "intention": "Remove build outputs",
             "fullCommandText": "rm -rf build && rm -rf /var/cache/app",
             "commands": [{"identifier": "rm", "readOnly": false}],
             "possiblePaths": ["build", "/var/cache/app"], "possibleUrls": [],
             "hasWriteFileRedirection": false, "canOfferSessionApproval": false}}"#;

const CUSTOMIZATION: &str = r#"{"point": "customization", "principal": "corp:alice", "roles": ["observe", "participate", "customize"],
 "claims": {"sub": "alice"},
 "client": {"id": "ide-alice-1", "kind": "ahp"}, "session": "ahp-session:/x1",
 "customization": {"kind": "plugin", "name": "review", "source": "client",
                   "servers": [{"name": "jira", "command": "/opt/mcp/bin/jira-mcp", "args": ["--stdio"]}]}}"#;

/// Each point's examples, as documents.
static EXAMPLES: LazyLock<Vec<(Point, Value)>> = LazyLock::new(|| {
    [
        (Point::OptIn, OPT_IN),
        (Point::Session, SESSION_AHP),
        (Point::Session, SESSION_SDK),
        (Point::Transform, TRANSFORM),
        (Point::Transform, ADDITION),
        (Point::Permission, PERMISSION),
        (Point::Customization, CUSTOMIZATION),
    ]
    .into_iter()
    .map(|(p, text)| (p, serde_json::from_str(text).expect("an example is JSON")))
    .collect()
});

/// The documented example inputs of `point`; a section addition's
/// (`before` null, which a transform policy for the JSON-RPC runtime never
/// meets) only with `additions`.
pub fn of(point: Point, additions: bool) -> Vec<&'static Value> {
    EXAMPLES
        .iter()
        .filter(|(p, v)| *p == point && (additions || !is_addition(v)))
        .map(|(_, v)| v)
        .collect()
}

/// A section addition's input: `before` there, and null.
fn is_addition(v: &Value) -> bool {
    v.get("before").is_some_and(Value::is_null)
}

/// Every example, with its point (the docs test reads them all).
pub fn all() -> impl Iterator<Item = (Point, &'static Value)> {
    EXAMPLES.iter().map(|(p, v)| (*p, v))
}
