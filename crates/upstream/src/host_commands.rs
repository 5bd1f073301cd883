//! The commands the relay sends the host, typed: create a session on a URI
//! the bridge chose, learn its default chat from its snapshot, subscribe,
//! dispatch an action (its `clientSeq` returned, to know its echo), dispose.
//! Subscriptions go through the client's plain `request`, not its
//! `subscribe`: that one allocates a broadcast queue per URI, which the
//! relay (reading the one event stream) would never drain.

use ahp::Client;
use ahp_types::actions::StateAction;
use ahp_types::commands::{
    CreateSessionParams, DisposeSessionParams, ResolveSessionConfigParams,
    ResolveSessionConfigResult, SubscribeParams, SubscribeResult,
};
use ahp_types::common::JsonObject;
use ahp_types::state::{SessionState, SnapshotState};

use crate::link::rpc;
use crate::upstream_error::UpstreamError;

/// The provider the Copilot host serves.
pub(crate) const PROVIDER: &str = "copilot";

/// Creates session `uri` (`copilot:/<uuid>`) with `dirs` (file URIs) and
/// `config`, then subscribes to it: its state as the host has it.
pub async fn create_session(
    client: &Client,
    uri: &str,
    dirs: Vec<String>,
    config: JsonObject,
) -> Result<SessionState, UpstreamError> {
    let params = CreateSessionParams {
        channel: uri.to_owned(),
        meta: None,
        provider: Some(PROVIDER.to_owned()),
        working_directories: (!dirs.is_empty()).then_some(dirs),
        config: Some(config),
        active_client: None,
        progress_token: None,
    };
    client
        .request::<_, serde_json::Value>("createSession", params)
        .await
        .map_err(host_message("createSession"))?;
    session_state(client, uri).await
}

/// Subscribes to session `uri`: its state (the default chat among it).
pub async fn session_state(client: &Client, uri: &str) -> Result<SessionState, UpstreamError> {
    match subscribe(client, uri).await? {
        Some(SnapshotState::Session(s)) => Ok(*s),
        _ => Err(UpstreamError::Rpc {
            method: "subscribe",
            reason: format!("no session state for {uri}"),
        }),
    }
}

/// A session's default chat: its `defaultChat`, or (a session the host
/// loaded again after a restart may not say it) its first chat.
pub fn default_chat(state: &SessionState) -> Option<String> {
    state
        .default_chat
        .clone()
        .or_else(|| state.chats.first().map(|c| c.resource.clone()))
}

/// Subscribes to `uri`; the snapshot's state.
pub async fn subscribe(client: &Client, uri: &str) -> Result<Option<SnapshotState>, UpstreamError> {
    let params = SubscribeParams {
        channel: uri.to_owned(),
        meta: None,
        delivery: None,
        view: None,
    };
    let r: SubscribeResult = client
        .request("subscribe", params)
        .await
        .map_err(rpc("subscribe"))?;
    Ok(r.snapshot.map(|s| s.state))
}

/// Dispatches `action` on `channel`; its `clientSeq`.
pub async fn dispatch(
    client: &Client,
    channel: &str,
    action: StateAction,
) -> Result<i64, UpstreamError> {
    let handle = client
        .dispatch(channel.to_owned(), action)
        .await
        .map_err(rpc("dispatchAction"))?;
    Ok(handle.client_seq)
}

/// The host's session config schema, with its defaults
/// (`resolveSessionConfig` with nothing filled in).
pub async fn config_schema(client: &Client) -> Result<ResolveSessionConfigResult, UpstreamError> {
    let params = ResolveSessionConfigParams {
        channel: "ahp-root://".to_owned(),
        meta: None,
        provider: Some(PROVIDER.to_owned()),
        working_directory: None,
        config: None,
    };
    client
        .request("resolveSessionConfig", params)
        .await
        .map_err(rpc("resolveSessionConfig"))
}

/// Disposes session `uri`.
pub async fn dispose_session(client: &Client, uri: &str) -> Result<(), UpstreamError> {
    let params = DisposeSessionParams {
        channel: uri.to_owned(),
        meta: None,
    };
    client
        .request::<_, serde_json::Value>("disposeSession", params)
        .await
        .map_err(rpc("disposeSession"))?;
    Ok(())
}

/// A refusal in the host's own words (an invalid section, an unknown
/// config value), for the client to read as it was said.
fn host_message(method: &'static str) -> impl Fn(ahp::ClientError) -> UpstreamError {
    move |e| match e {
        ahp::ClientError::Rpc(e) => UpstreamError::Refused {
            method,
            message: e.message,
        },
        e => rpc(method)(e),
    }
}
