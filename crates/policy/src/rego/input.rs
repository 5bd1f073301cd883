//! The `input` document of each decision point. Who asks (the principal,
//! its roles, a JWT's verified claims, the client) is filled by the bridge
//! from what it authenticated, never from what a client says of itself;
//! the rest is what the client or the runtime sent. docs/policy.md shows an
//! example of each.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use regorus::Value;
use serde::Serialize;
use serde_json::Value as Json;

use super::point::Point;
use crate::rules::added_span;

/// Where a requester comes from: an AHP client or an SDK app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientKind {
    Ahp,
    Sdk,
}

impl ClientKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ahp => "ahp",
            Self::Sdk => "sdk",
        }
    }
}

/// Who asks, as the bridge knows it. Made for every active client at each
/// transform and bind, Rego or not: the claims are shared, not copied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Subject {
    /// The principal's name; `null` where no principal is known (a
    /// runtime request in a session nobody is attached to).
    pub principal: Option<String>,
    pub roles: Vec<&'static str>,
    /// A JWT principal's verified claims; `{}` for any other credential.
    #[serde(serialize_with = "shared")]
    pub claims: Arc<Json>,
    pub client: ClientRef,
}

fn shared<S: serde::Serializer>(v: &Arc<Json>, s: S) -> Result<S::Ok, S::Error> {
    v.serialize(s)
}

/// `{}`: the claims of every principal that is not a JWT's.
static NO_CLAIMS: LazyLock<Arc<Json>> =
    LazyLock::new(|| Arc::new(Json::Object(Default::default())));

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClientRef {
    pub id: Option<String>,
    pub kind: ClientKind,
}

impl Subject {
    pub fn new(
        principal: Option<String>,
        roles: Vec<&'static str>,
        claims: Option<Arc<Json>>,
        client_id: Option<String>,
        kind: ClientKind,
    ) -> Self {
        Self {
            principal,
            roles,
            claims: claims.unwrap_or_else(|| NO_CLAIMS.clone()),
            client: ClientRef {
                id: client_id,
                kind,
            },
        }
    }

    /// Nobody known: a runtime request of a session with no client.
    pub fn nobody() -> Self {
        Self::new(None, vec![], None, None, ClientKind::Ahp)
    }

    /// A client whose principal is not known (gone, or never attached).
    pub fn client(id: &str, kind: ClientKind) -> Self {
        Self::new(None, vec![], None, Some(id.to_owned()), kind)
    }
}

/// A customization as the runtime would get it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Customization {
    /// `mcp_server`, `plugin`, `skill`, `agent`, `prompt` or `rule`.
    pub kind: String,
    pub name: String,
    /// Where it comes from: `host` (the config) or `client` (published).
    pub source: String,
    /// A stdio MCP server's command and arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// A remote MCP server's URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A plugin's own MCP servers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<Server>,
}

/// One MCP server a plugin brings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Server {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
}

/// What a point decides on, beside who asks.
#[derive(Debug, Clone, PartialEq)]
pub enum Body<'a> {
    /// `ahp.opt_in`: the sections a client opts in to.
    OptIn { sections: &'a [String] },
    /// `ahp.session`: the session's settings as requested (AHP's
    /// `createSession` params, or an SDK app's `session.create` params):
    /// JSON because they are passed on as the requester wrote them.
    Session { config: &'a Json },
    /// `ahp.transform`: one section an owner changed. The document also
    /// holds `action` and the text `added` and `removed`, as the built-in
    /// `deny` rule computes them ([`added_span`]).
    Transform {
        section: &'a str,
        before: &'a str,
        after: &'a str,
        owner: &'a str,
    },
    /// `ahp.transform` too: text a session adds to a section at its start
    /// (the runtime's own AHP host takes additions, not rewrites). The
    /// document has `before` null (the host's text is not known here),
    /// `added`, and `action` `append` or `prepend`.
    Addition {
        section: &'a str,
        action: &'static str,
        added: &'a str,
        owner: &'a str,
    },
    /// `ahp.permission`: the runtime's request as it sent it, and the
    /// session's working directories (paths, `..` resolved).
    Permission {
        request: &'a Json,
        working_directories: &'a [String],
    },
    /// `ahp.customization`: one container before the runtime gets it.
    Customization { customization: &'a Customization },
}

impl Body<'_> {
    pub fn point(&self) -> Point {
        match self {
            Self::OptIn { .. } => Point::OptIn,
            Self::Session { .. } => Point::Session,
            Self::Transform { .. } | Self::Addition { .. } => Point::Transform,
            Self::Permission { .. } => Point::Permission,
            Self::Customization { .. } => Point::Customization,
        }
    }
}

/// A path as a policy should compare it: `.` and `..` resolved and
/// repeated `/` folded, without asking the file system (the path may not
/// exist yet): `/srv/work/../etc` is `/etc`. A relative path stays relative.
pub fn lexical(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

fn opt(s: Option<&str>) -> Value {
    s.map_or(Value::Null, Value::from)
}

fn object(pairs: Vec<(&str, Value)>) -> Value {
    let map: BTreeMap<Value, Value> = pairs
        .into_iter()
        .map(|(k, v)| (Value::from(k), v))
        .collect();
    Value::from(map)
}

/// One decision's `input`: its document is [`Self::to_value`] (built once,
/// whoever asked).
#[derive(Debug, Clone, PartialEq)]
pub struct Input<'a> {
    pub point: &'static str,
    pub subject: &'a Subject,
    /// The AHP session's URI, where there is one.
    pub session: Option<&'a str>,
    pub body: Body<'a>,
}

impl<'a> Input<'a> {
    pub fn new(subject: &'a Subject, session: Option<&'a str>, body: Body<'a>) -> Self {
        Self {
            point: body.point().as_str(),
            subject,
            session,
            body,
        }
    }

    /// The document as the evaluator takes it, built directly: through
    /// JSON text it cost three times as much (the texts of a transform are
    /// kilobytes). The same document as [`Self::to_json`] (a test holds it).
    pub(super) fn to_value(&self) -> Value {
        let s = self.subject;
        let mut doc = vec![
            ("point", Value::from(self.point)),
            ("principal", opt(s.principal.as_deref())),
            (
                "roles",
                Value::from(s.roles.iter().map(|r| Value::from(*r)).collect::<Vec<_>>()),
            ),
            ("claims", Value::from((*s.claims).clone())),
            (
                "client",
                object(vec![
                    ("id", opt(s.client.id.as_deref())),
                    ("kind", Value::from(s.client.kind.as_str())),
                ]),
            ),
            ("session", opt(self.session)),
        ];
        match &self.body {
            Body::OptIn { sections } => doc.push(("sections", strings(sections))),
            Body::Session { config } => doc.push(("config", Value::from((*config).clone()))),
            Body::Transform {
                section,
                before,
                after,
                owner,
            } => {
                let (added, removed) = changed(before, after);
                doc.extend([
                    ("section", Value::from(*section)),
                    ("action", Value::from("transform")),
                    ("before", Value::from(*before)),
                    ("after", Value::from(*after)),
                    ("added", Value::from(added)),
                    ("removed", Value::from(removed)),
                    ("owner", Value::from(*owner)),
                ])
            }
            Body::Addition {
                section,
                action,
                added,
                owner,
            } => doc.extend([
                ("section", Value::from(*section)),
                ("action", Value::from(*action)),
                ("before", Value::Null),
                ("added", Value::from(*added)),
                ("owner", Value::from(*owner)),
            ]),
            Body::Permission {
                request,
                working_directories,
            } => doc.extend([
                ("request", Value::from((*request).clone())),
                ("working_directories", strings(working_directories)),
            ]),
            Body::Customization { customization } => {
                let json = serde_json::to_value(customization).unwrap_or(Json::Null);
                doc.push(("customization", Value::from(json)));
            }
        }
        object(doc)
    }

    /// The document as JSON (`policy eval`, tests, docs): the same
    /// document the evaluator takes.
    pub fn to_json(&self) -> Json {
        serde_json::to_value(self.to_value()).unwrap_or(Json::Null)
    }
}

fn strings(items: &[String]) -> Value {
    Value::from(
        items
            .iter()
            .map(|x| Value::from(x.as_str()))
            .collect::<Vec<_>>(),
    )
}

/// The text a rewrite inserted and the text it took out: what lies between
/// the common prefix and the common suffix of the two, on character
/// boundaries (the span the built-in `deny` rule searches).
pub(crate) fn changed<'t>(before: &'t str, after: &'t str) -> (&'t str, &'t str) {
    let span = added_span(before, after);
    let suffix = after.len() - span.end;
    let removed = before
        .get(span.start..before.len().saturating_sub(suffix).max(span.start))
        .unwrap_or("");
    (&after[span], removed)
}

/// `ahp.session`'s `config`: one document whoever asked, an AHP client's
/// `createSession` or an SDK app's `session.create`. `paths` are the
/// working directories as the runtime gets them (`..` resolved), `uris`
/// as they were sent (an SDK app sends paths: their `file:` URIs), `sent`
/// the request's own settings as the requester wrote them.
pub fn session_config(
    provider: Option<&str>,
    paths: &[String],
    uris: &[String],
    model: Option<&str>,
    sent: Option<&Json>,
) -> Json {
    serde_json::json!({
        "provider": provider,
        "workingDirectories": paths,
        "workingDirectoryUris": uris,
        "model": model,
        "config": sent,
    })
}
