//! The handshake: `initialize` (negotiate, bind the clientId, initial
//! subscriptions) and `reconnect` (rebind, then replay or snapshots).

use crate::telemetry::Escaped;
use ahp_types::commands::InitializeParams;
use serde_json::{json, Value};
use tracing::info;

use crate::ahp::extension;
use crate::ahp::files::completions::COMPLETION_TRIGGER;
use crate::ahp::host::clients::ConnId;
use crate::ahp::host::subscriptions::Reconnected;
use crate::ahp::host::Host;
use crate::ahp::protocol::errors::AhpError;
use crate::ahp::protocol::params::{Reconnect, Resume};
use crate::ahp::protocol::uri::file_uri_of;
use crate::ahp::protocol::versions::{negotiate, Version, IMPLEMENTED_VERSIONS};
use crate::jsonrpc::{ErrorCode, RpcError};

pub fn initialize(host: &Host, conn: ConnId, p: InitializeParams) -> Result<Value, RpcError> {
    let chosen = negotiate(&p.protocol_versions)
        .map_err(|e| {
            RpcError::new(
                ErrorCode::InvalidParams,
                format!("field `protocolVersions`: {e}"),
            )
        })?
        .ok_or_else(|| {
            RpcError::new(
                AhpError::UnsupportedProtocolVersion,
                "no supported protocol version offered",
            )
            .with_data(json!({"supportedVersions": IMPLEMENTED_VERSIONS}))
        })?;
    let initial = p.initial_subscriptions.unwrap_or_default();
    let version = Version::of(&chosen);
    let (seq, snapshots) = host.bind_client(conn, &p.client_id, version, initial)?;
    info!(client = %Escaped(&p.client_id), protocol = %chosen, "client initialized");
    let mut result = json!({
        "protocolVersion": chosen,
        "serverSeq": seq,
        "serverInfo": {"name": "ahp-copilot-bridge", "version": env!("CARGO_PKG_VERSION"), "title": "AHP bridge for GitHub Copilot"},
        "snapshots": snapshots,
        "_meta": advertised(),
        "completionTriggerCharacters": [COMPLETION_TRIGGER],
    });
    if let Some(dir) = &host.config().runtime.working_directory {
        result["defaultDirectory"] = json!(file_uri_of(dir));
    }
    Ok(result)
}

pub fn reconnect(host: &Host, conn: ConnId, p: Reconnect) -> Result<Value, RpcError> {
    let invalid = |m: &str| RpcError::new(ErrorCode::InvalidParams, m);
    let last = p.last_seen_server_seq;
    if p.windows.is_some() {
        return Err(invalid("field `windows`: windowed (flow-controlled) delivery is not offered by this host; reconnect without it (subscribe answers never accept `flowControl`)"));
    }
    let subs = p
        .subscriptions
        .into_iter()
        .map(|s| match s {
            Resume::Uri(u) => (u, None),
            Resume::Channel {
                channel,
                last_seen_server_seq,
            } => (channel, Some(last_seen_server_seq.unwrap_or(last))),
        })
        .collect();
    Ok(match host.rebind_client(conn, &p.client_id, last, subs)? {
        Reconnected::Replay { actions, missing } => {
            info!(client = %Escaped(&p.client_id), replayed = actions.len(), "client reconnected by replay");
            json!({"type": "replay", "actions": actions, "missing": missing})
        }
        Reconnected::Snapshot { snapshots, missing } => {
            info!(client = %Escaped(&p.client_id), "client reconnected by snapshot");
            json!({"type": "snapshot", "snapshots": snapshots, "missing": missing})
        }
        Reconnected::Channels { channels, missing } => {
            info!(client = %Escaped(&p.client_id), channels = channels.len(), "client reconnected channel by channel");
            json!({"type": "channels", "channels": channels, "missing": missing})
        }
    })
}

/// `InitializeResult._meta`: the transform extension and the host's channels.
fn advertised() -> Value {
    let mut meta = extension::advertisement();
    if let (Some(m), Value::Object(channels)) =
        (meta.as_object_mut(), crate::ahp::channels::advertisement())
    {
        m.extend(channels);
    }
    meta
}
