//! Every request a client may send, named by a typed [`HostMethod`] and parsed
//! once into its official `ahp-types` params (or, where the extension adds
//! a field, ours): one [`extract`], whose error names the field's path
//! (`activeClient.tools[0].name: invalid type ...`). Dispatch is a `match`
//! on [`Request`]; nothing past this file reads a method name or raw params.

use ahp_types::commands::{
    AuthenticateParams, CompletionsParams, DisposeSessionParams, FetchTurnsParams,
    InitializeParams, ListSessionsParams, ResolveSessionConfigParams, ResourceListParams,
    ResourceReadParams, ResourceRequestParams, ResourceResolveParams,
    SessionConfigCompletionsParams, SubscribeParams, UnsubscribeParams,
};
use ahp_types::common::JsonObject;
use ahp_types::state::SessionActiveClient;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use super::uri::ROOT_URI;
use crate::extension::TransformOptIn;
use ahp_bridge_jsonrpc::{ErrorCode, RpcError};

/// The requests this host answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostMethod {
    Ping,
    Initialize,
    Reconnect,
    Subscribe,
    CreateSession,
    DisposeSession,
    ListSessions,
    FetchTurns,
    ResolveSessionConfig,
    SessionConfigCompletions,
    Authenticate,
    ResourceRead,
    ResourceList,
    ResourceResolve,
    ResourceRequest,
    Completions,
}

/// Each method with its name on the wire.
const METHODS: &[(&str, HostMethod)] = &[
    ("ping", HostMethod::Ping),
    ("initialize", HostMethod::Initialize),
    ("reconnect", HostMethod::Reconnect),
    ("subscribe", HostMethod::Subscribe),
    ("createSession", HostMethod::CreateSession),
    ("disposeSession", HostMethod::DisposeSession),
    ("listSessions", HostMethod::ListSessions),
    ("fetchTurns", HostMethod::FetchTurns),
    ("resolveSessionConfig", HostMethod::ResolveSessionConfig),
    (
        "sessionConfigCompletions",
        HostMethod::SessionConfigCompletions,
    ),
    ("authenticate", HostMethod::Authenticate),
    ("resourceRead", HostMethod::ResourceRead),
    ("resourceList", HostMethod::ResourceList),
    ("resourceResolve", HostMethod::ResourceResolve),
    ("resourceRequest", HostMethod::ResourceRequest),
    ("completions", HostMethod::Completions),
];

impl HostMethod {
    /// The method of a request's name; `None` for one this host does not
    /// answer (see `cmd::surface` for how each is refused).
    pub(crate) fn of(name: &str) -> Option<Self> {
        METHODS.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
    }

    /// Its name on the wire.
    pub(crate) fn name(self) -> &'static str {
        METHODS
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("?", |(n, _)| n)
    }

    /// Whether its `channel` is the root unless it names another (the
    /// handshake, listing, configuration and file requests); the others'
    /// channel is what they act on, so it must be given.
    fn root_scoped(self) -> bool {
        !matches!(
            self,
            Self::Subscribe | Self::CreateSession | Self::DisposeSession | Self::FetchTurns
        )
    }

    /// Whether it may come before `initialize` (or `reconnect`).
    pub(crate) fn before_initialize(self) -> bool {
        matches!(self, Self::Ping | Self::Initialize | Self::Reconnect)
    }
}

/// One request, parsed.
#[derive(Debug, Clone)]
// Each variant is an AHP method's name (`resourceRequest` among them).
#[allow(clippy::enum_variant_names)]
pub(crate) enum Request {
    Ping,
    Initialize(InitializeParams),
    Reconnect(Reconnect),
    Subscribe(SubscribeParams),
    CreateSession(Box<CreateSession>),
    DisposeSession(DisposeSessionParams),
    ListSessions(ListSessionsParams),
    FetchTurns(FetchTurnsParams),
    ResolveSessionConfig(ResolveSessionConfigParams),
    SessionConfigCompletions(SessionConfigCompletionsParams),
    Authenticate(AuthenticateParams),
    ResourceRead(ResourceReadParams),
    ResourceList(ResourceListParams),
    ResourceResolve(ResourceResolveParams),
    ResourceRequest(ResourceRequestParams),
    Completions(CompletionsParams),
}

impl Request {
    /// Parses the params of `method`.
    pub(crate) fn parse(method: HostMethod, mut params: Value) -> Result<Self, RpcError> {
        use HostMethod as M;
        let name = method;
        if method.root_scoped() {
            // The root is what these target; a client that leaves it out means it.
            if let Value::Object(o) = &mut params {
                o.entry("channel").or_insert_with(|| ROOT_URI.into());
            } else if params.is_null() {
                params = serde_json::json!({ "channel": ROOT_URI });
            }
        }
        Ok(match method {
            M::Ping => Self::Ping,
            M::Initialize => Self::Initialize(extract(name, params)?),
            M::Reconnect => Self::Reconnect(extract(name, params)?),
            M::Subscribe => Self::Subscribe(extract(name, params)?),
            M::CreateSession => Self::CreateSession(Box::new(CreateSession::parse(params)?)),
            M::DisposeSession => Self::DisposeSession(extract(name, params)?),
            M::ListSessions => Self::ListSessions(extract(name, params)?),
            M::FetchTurns => Self::FetchTurns(extract(name, params)?),
            M::ResolveSessionConfig => Self::ResolveSessionConfig(extract(name, params)?),
            M::SessionConfigCompletions => Self::SessionConfigCompletions(extract(name, params)?),
            M::Authenticate => Self::Authenticate(extract(name, params)?),
            M::ResourceRead => Self::ResourceRead(extract(name, params)?),
            M::ResourceList => Self::ResourceList(extract(name, params)?),
            M::ResourceResolve => Self::ResourceResolve(extract(name, params)?),
            M::ResourceRequest => Self::ResourceRequest(extract(name, params)?),
            M::Completions => Self::Completions(extract(name, params)?),
        })
    }
}

/// `createSession`, with what the official params drop or leave out: the
/// active-client entry's opt-in, and a `fork` (which this host refuses).
#[derive(Debug, Clone)]
pub(crate) struct CreateSession {
    pub channel: String,
    pub provider: Option<String>,
    pub working_directories: Option<Vec<String>>,
    pub config: Option<JsonObject>,
    pub active_client: Option<SessionActiveClient>,
    pub opt_in: Option<TransformOptIn>,
    pub fork: Option<Value>,
}

impl CreateSession {
    fn parse(params: Value) -> Result<Self, RpcError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire {
            channel: String,
            #[serde(default)]
            provider: Option<String>,
            #[serde(default)]
            working_directories: Option<Vec<String>>,
            #[serde(default)]
            config: Option<JsonObject>,
            #[serde(default)]
            active_client: Option<SessionActiveClient>,
            #[serde(default)]
            fork: Option<Value>,
        }
        let opt_in = params
            .get("activeClient")
            .map(TransformOptIn::of_entry)
            .transpose()
            .map_err(|e| {
                invalid(
                    HostMethod::CreateSession,
                    &format!("field `activeClient.{e}"),
                )
            })?
            .flatten();
        let w: Wire = extract(HostMethod::CreateSession, params)?;
        Ok(Self {
            channel: w.channel,
            provider: w.provider,
            working_directories: w.working_directories,
            config: w.config,
            active_client: w.active_client,
            opt_in,
            fork: w.fork.filter(|f| !f.is_null()),
        })
    }
}

/// `reconnect`, in the 1.0 form (`subscriptions` as URIs) or the 1.1 one
/// (each subscription with its own cursor).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Reconnect {
    pub client_id: String,
    /// Any `serverSeq` a host may have sent: up to `u64::MAX` (ours start
    /// from the clock, in microseconds). A number it never sent gets
    /// snapshots, not a refusal.
    pub last_seen_server_seq: u64,
    pub subscriptions: Vec<Resume>,
    /// Windowed (flow-controlled) channels: AHP 1.1's experimental
    /// delivery, which this host does not offer.
    #[serde(default)]
    pub windows: Option<Value>,
}

/// One subscription to resume: a URI, or a URI with its own cursor.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum Resume {
    Uri(String),
    #[serde(rename_all = "camelCase")]
    Channel {
        channel: String,
        #[serde(default)]
        last_seen_server_seq: Option<u64>,
    },
}

/// `dispatchAction`: the action stays raw until the host has checked it
/// against the table (its refusal echoes the action as the client sent it).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DispatchAction {
    pub channel: String,
    #[serde(default)]
    pub client_seq: i64,
    /// Missing: `null`, refused with an echo naming the field, so the
    /// client rolls back instead of waiting.
    #[serde(default)]
    pub action: Value,
    /// The W3C `traceparent` of `_meta`, the one thing read from it; a
    /// `_meta` of another shape is ignored, never a reason to drop the action.
    #[serde(rename = "_meta", default, deserialize_with = "traceparent")]
    pub traceparent: Option<String>,
}

/// The longest `traceparent` kept (version 00 is 55 characters; later
/// versions may append fields).
const MAX_TRACEPARENT: usize = 256;

fn traceparent<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let meta = Value::deserialize(d)?;
    Ok(meta
        .get("traceparent")
        .and_then(Value::as_str)
        .filter(|t| t.len() <= MAX_TRACEPARENT && t.bytes().all(|b| b.is_ascii_graphic()))
        .map(String::from))
}

/// The notifications a client sends.
#[derive(Debug, Clone)]
pub(crate) enum Notification {
    DispatchAction(DispatchAction),
    Unsubscribe(UnsubscribeParams),
}

impl Notification {
    /// A notification this host acts on, parsed; `None` for any other (or
    /// one whose params do not parse: a notification gets no answer).
    pub(crate) fn parse(method: &str, params: Value) -> Option<Self> {
        match method {
            "dispatchAction" => serde_json::from_value(params)
                .ok()
                .map(Self::DispatchAction),
            "unsubscribe" => serde_json::from_value(params).ok().map(Self::Unsubscribe),
            _ => None,
        }
    }
}

/// The params of `method`, parsed; an error names the field's path.
pub(crate) fn extract<P: DeserializeOwned>(
    method: HostMethod,
    params: Value,
) -> Result<P, RpcError> {
    // No params at all reads as no fields, so the error names the first missing one.
    let params = match params {
        Value::Null => Value::Object(Default::default()),
        p => p,
    };
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            invalid(method, &inner.to_string())
        } else {
            invalid(method, &format!("field `{path}`: {inner}"))
        }
    })
}

fn invalid(method: HostMethod, why: &str) -> RpcError {
    RpcError::new(
        ErrorCode::InvalidParams,
        format!("{}: {why}", method.name()),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn create(params: Value) -> Result<CreateSession, RpcError> {
        match Request::parse(HostMethod::CreateSession, params)? {
            Request::CreateSession(c) => Ok(*c),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_malformed_create_session_names_the_field_path() {
        let e = create(json!({})).unwrap_err();
        assert!(e.is(ErrorCode::InvalidParams));
        assert!(e.message.contains("missing field `channel`"), "{e}");
        let e = create(json!({"channel": "ahp-session:/s", "provider": 5})).unwrap_err();
        assert!(e.message.contains("field `provider`"), "{e}");
        let e =
            create(json!({"channel": "ahp-session:/s", "workingDirectories": "no"})).unwrap_err();
        assert!(e.message.contains("field `workingDirectories`"), "{e}");
        let e = create(json!({"channel": "ahp-session:/s",
            "activeClient": {"clientId": "c", "tools": [{"name": 1}]}}))
        .unwrap_err();
        assert!(
            e.message.contains("field `activeClient.tools[0].name`"),
            "{e}"
        );
        let e = create(json!({"channel": "ahp-session:/s",
            "activeClient": {"clientId": "c", "tools": [], "systemMessageTransform": {"sections": [1]}}}))
        .unwrap_err();
        assert!(
            e.message
                .contains("activeClient.systemMessageTransform.sections[0]"),
            "{e}"
        );
    }

    #[test]
    fn a_well_formed_create_session_keeps_the_extension_and_the_fork() {
        let c = create(json!({"channel": "copilot:/x", "_meta": {"k": 1},
            "workingDirectories": ["file:///tmp"], "fork": {"session": "s", "turnId": "t"},
            "activeClient": {"clientId": "c", "tools": [], "systemMessageTransform": {"sections": ["tone"]}}}))
        .unwrap();
        assert_eq!(c.opt_in.unwrap().sections, vec!["tone".to_string()]);
        assert!(c.fork.is_some());
        assert_eq!(
            c.working_directories.unwrap(),
            vec!["file:///tmp".to_string()]
        );
    }

    #[test]
    fn a_dispatch_keeps_only_a_traceparent_from_meta() {
        let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let parse = |v: Value| match Notification::parse("dispatchAction", v) {
            Some(Notification::DispatchAction(d)) => d,
            other => panic!("{other:?}"),
        };
        let base = json!({"channel": "c", "action": {"type": "x"}});
        assert_eq!(parse(base.clone()).traceparent, None);
        let mut with = base.clone();
        with["_meta"] = json!({"traceparent": tp, "other": 1});
        assert_eq!(parse(with).traceparent.as_deref(), Some(tp));
        // A `_meta` of another shape is ignored; the action still counts.
        for meta in [
            json!(5),
            json!({"traceparent": 5}),
            json!({"traceparent": "a\nb"}),
        ] {
            let mut odd = base.clone();
            odd["_meta"] = meta;
            assert_eq!(parse(odd).traceparent, None);
        }
    }

    #[test]
    fn methods_and_other_params() {
        assert_eq!(
            HostMethod::of("createSession"),
            Some(HostMethod::CreateSession)
        );
        assert_eq!(HostMethod::of("createChat"), None);
        assert_eq!(HostMethod::CreateSession.name(), "createSession");
        assert!(HostMethod::Ping.before_initialize() && !HostMethod::Subscribe.before_initialize());
        let e = Request::parse(HostMethod::Subscribe, json!({"channel": 7})).unwrap_err();
        assert!(e.message.contains("field `channel`"), "{e}");
        assert!(
            Notification::parse("dispatchAction", json!({"channel": "c", "action": {}})).is_some()
        );
        assert!(Notification::parse("somethingElse", json!({})).is_none());
    }
}
