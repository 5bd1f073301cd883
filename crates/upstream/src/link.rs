//! One authenticated connection to the runtime's AHP host: the socket, the
//! AHP client over it, `initialize` (subscribed to the root), and
//! `authenticate` with the GitHub token sealed to this connection's
//! challenge. A fresh connection after a loss goes through all of it again:
//! a challenge is good for one connection only.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ahp::{Client, ClientConfig, ClientError, ClientEventStream};
use ahp_bridge_base::config::Secret;
use ahp_types::commands::{AuthenticateParams, InitializeResult};
use ahp_types::errors::ahp_error_codes;
use ahp_types::state::SnapshotState;

use crate::meta::CopilotMeta;
use crate::seal::{sealed_token, SealBinding};
use crate::upstream_error::UpstreamError;
use crate::ws_transport::Socket;

/// The root channel every connection-level command names.
pub(crate) const ROOT: &str = "ahp-root://";

/// The AHP versions this side speaks, most preferred first.
const VERSIONS: &[&str] = &["1.0.0"];

/// Events a slow reader may fall behind by before the client skips them;
/// the relay's reader only moves them to its own queue, so this is slack
/// for a scheduling hiccup, not a standing buffer (it is allocated lazily
/// by the broadcast channel, one slot per event held).
const EVENT_SLACK: usize = 4096;

/// Where the host is and how to reach it.
pub struct Target<'a> {
    /// `ws://ip:port/`, without a query.
    pub url: &'a str,
    /// The host's connection token, if it takes one.
    pub token: Option<&'a Secret>,
    /// The deadline of every request.
    pub call_timeout: Duration,
    /// The largest message accepted from the host.
    pub max_frame_bytes: usize,
}

/// A connection the host has authenticated.
pub struct Linked {
    pub client: Client,
    /// Every event from the host, from before `initialize` on.
    pub events: ClientEventStream,
    /// What `initialize` answered (the root's snapshot among it).
    pub init: InitializeResult,
    /// The protected resource the token was sealed for.
    pub resource: String,
}

/// Connects to `target` as `client_id` and authenticates with `github`.
pub async fn link(
    target: &Target<'_>,
    client_id: &str,
    github: &Secret,
) -> Result<Linked, UpstreamError> {
    let socket = Socket::open(target.url, target.token, target.max_frame_bytes).await?;
    let config = ClientConfig {
        default_request_timeout: Some(target.call_timeout),
        subscription_buffer: EVENT_SLACK,
    };
    let client = Client::connect(socket, config)
        .await
        .map_err(rpc("connect"))?;
    let events = client.events();
    let init = client
        .initialize(
            client_id.to_owned(),
            VERSIONS.iter().map(|v| v.to_string()).collect(),
            vec![ROOT.to_owned()],
        )
        .await
        .map_err(rpc("initialize"))?;
    let resource = authenticate(&client, &init, github).await?;
    Ok(Linked {
        client,
        events,
        init,
        resource,
    })
}

/// `authenticate` with the token sealed for this connection; the protected
/// resource it was for.
async fn authenticate(
    client: &Client,
    init: &InitializeResult,
    github: &Secret,
) -> Result<String, UpstreamError> {
    let announced = CopilotMeta::of(init.meta.as_ref())?;
    let challenge = announced.auth_challenge.as_ref().ok_or_else(|| {
        UpstreamError::Announcement("initialize carried no _meta copilot.authChallenge".into())
    })?;
    let root = init
        .snapshots
        .iter()
        .find_map(|s| match &s.state {
            SnapshotState::Root(r) => Some(r),
            _ => None,
        })
        .ok_or_else(|| UpstreamError::Announcement("initialize carried no root state".into()))?;
    // The keys: in the root state's `_meta`, or beside the challenge.
    let in_root = CopilotMeta::of(root.meta.as_ref())?;
    let keys = if in_root.encryption_keys.is_empty() {
        &announced
    } else {
        &in_root
    };
    let key = keys.auth_key()?;
    let resource = root
        .agents
        .iter()
        .flat_map(|a| a.protected_resources.iter().flatten())
        .map(|r| r.resource.clone())
        .next()
        .ok_or_else(|| {
            UpstreamError::Announcement("the root state names no protected resource".into())
        })?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let binding = SealBinding {
        resource: &resource,
        challenge: &challenge.challenge,
    };
    let token = sealed_token(key, &binding, github, now)?;
    let params = AuthenticateParams {
        channel: ROOT.to_owned(),
        meta: None,
        resource: resource.clone(),
        token: token.0,
        expires_in: None,
        scopes: None,
    };
    client
        .request::<_, serde_json::Value>("authenticate", params)
        .await
        .map_err(|e| match e {
            ClientError::Rpc(e) => UpstreamError::Auth(e.message),
            e => rpc("authenticate")(e),
        })?;
    Ok(resource)
}

/// A failed request, named by its method: the host's own message. "Not
/// found" keeps its kind: the relay starts afresh a session its host lost.
pub(crate) fn rpc(method: &'static str) -> impl Fn(ClientError) -> UpstreamError {
    move |e| match e {
        ClientError::Rpc(e)
            if [
                ahp_error_codes::NOT_FOUND,
                ahp_error_codes::SESSION_NOT_FOUND,
            ]
            .contains(&e.code) =>
        {
            UpstreamError::NotFound {
                method,
                message: e.message,
            }
        }
        e => UpstreamError::Rpc {
            method,
            reason: e.to_string(),
        },
    }
}
