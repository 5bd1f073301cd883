//! The handshake: `initialize` (negotiate, attach the clientId, initial
//! subscriptions) and `reconnect` (attach again, then replay or snapshots).

use ahp_bridge_telemetry::Escaped;
use ahp_types::commands::{Implementation, InitializeParams, InitializeResult};
use ahp_types::common::JsonObject;
use serde_json::{json, Value};
use tracing::info;

use super::reply::to_result;
use crate::extension;
use crate::files::completions::COMPLETION_TRIGGER;
use crate::host::clients::ConnId;
use crate::host::Host;
use crate::host::Reconnected;
use crate::protocol::errors::AhpError;
use crate::protocol::params::{Reconnect, Resume};
use crate::protocol::uri::file_uri_of;
use crate::protocol::versions::{negotiate, Version, IMPLEMENTED_VERSIONS};
use ahp_bridge_jsonrpc::{ErrorCode, RpcError};

/// The reply as JSON: the snapshots in it are the host's rendering (see
/// below), so the official `InitializeResult` is serialized here and they
/// are put in.
pub(crate) fn initialize(
    host: &Host,
    conn: ConnId,
    p: InitializeParams,
) -> Result<Value, RpcError> {
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
    let (seq, snapshots) = host.attach_client(conn, &p.client_id, version, initial)?;
    info!(client = %Escaped(&p.client_id), protocol = %chosen, "client initialized");
    let result = InitializeResult {
        protocol_version: chosen,
        server_seq: i64::try_from(seq).unwrap_or(i64::MAX),
        server_info: Some(Implementation {
            name: "ahp-copilot-bridge".into(),
            version: Some(env!("CARGO_PKG_VERSION").into()),
            title: Some("AHP bridge for GitHub Copilot".into()),
        }),
        meta: Some(advertised()),
        snapshots: vec![],
        default_directory: host.settings().working_directory().map(file_uri_of),
        completion_trigger_characters: Some(vec![COMPLETION_TRIGGER.into()]),
        terminal_command_prefix: None,
        telemetry: None,
        automations: None,
    };
    // The official `Snapshot` has no form for an `x-` channel's state nor for
    // the transform opt-in an active client carries: the snapshots go in as
    // the host renders them, every other field as the official type has it.
    let mut result = to_result(result)?;
    result["snapshots"] = Value::Array(snapshots);
    Ok(result)
}

/// The reply as JSON: not the official `ReconnectResult` (see below).
pub(crate) fn reconnect(host: &Host, conn: ConnId, p: Reconnect) -> Result<Value, RpcError> {
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
    // Not the official `ReconnectResult`: its snapshot form has no `missing`
    // and there is no channel-by-channel form (1.1), and the replayed
    // envelopes are sent as they were kept, with the opt-in extension field
    // the official `StateAction` would drop.
    Ok(
        match host.reattach_client(conn, &p.client_id, last, subs)? {
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
        },
    )
}

/// `InitializeResult._meta`: the transform extension and the host's channels.
fn advertised() -> JsonObject {
    let mut meta = JsonObject::new();
    for part in [extension::advertisement(), crate::channels::advertisement()] {
        if let Value::Object(fields) = part {
            meta.extend(fields);
        }
    }
    meta
}
