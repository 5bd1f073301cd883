//! The handshake: `initialize` (negotiate, bind the clientId, initial
//! subscriptions) and `reconnect` (rebind, then replay or snapshots).

use std::collections::HashSet;

use serde_json::{json, Value};
use tracing::info;

use super::clients::ConnId;
use super::errors::AhpError;
use super::host::Host;
use super::methods::{field, str_field};
use crate::jsonrpc::{ErrorCode, RpcError};

impl Host {
    pub(super) fn initialize(&self, conn: ConnId, params: &Value) -> Result<Value, RpcError> {
        let versions: Vec<String> =
            serde_json::from_value(field(params, "protocolVersions")?.clone()).map_err(|_| {
                RpcError::new(
                    ErrorCode::InvalidParams,
                    "field `protocolVersions` must be an array of strings",
                )
            })?;
        let client_id = str_field(params, "clientId")?;
        let chosen = match ahp_types::negotiate_protocol_version(&versions) {
            Ok(Some(v)) => v.to_owned(),
            Ok(None) | Err(_) => {
                return Err(RpcError::new(
                    AhpError::UnsupportedProtocolVersion,
                    "no supported protocol version offered",
                )
                .with_data(json!({"supportedVersions": ahp_types::SUPPORTED_PROTOCOL_VERSIONS})))
            }
        };
        let initial: Vec<String> = match params.get("initialSubscriptions") {
            None | Some(Value::Null) => vec![],
            Some(v) => serde_json::from_value(v.clone()).map_err(|_| {
                RpcError::new(
                    ErrorCode::InvalidParams,
                    "field `initialSubscriptions` must be an array of strings",
                )
            })?,
        };
        // Everything is checked before anything changes: a failed
        // initialize leaves the clientId unbound and nothing subscribed.
        let mut st = self.lock();
        self.check_bind(&st, conn, client_id)?;
        let snapshots = self.subscribable(&st, conn, &initial)?;
        self.bind_client(&mut st, conn, client_id);
        if let Some(c) = st.conns.get_mut(&conn) {
            c.subs.extend(initial);
        }
        info!(client_id = ?client_id, protocol = %chosen, "client initialized");
        Ok(json!({
            "protocolVersion": chosen,
            "serverSeq": st.seq,
            "serverInfo": {"name": "ahp-copilot-bridge", "version": env!("CARGO_PKG_VERSION"), "title": "AHP bridge for GitHub Copilot"},
            "snapshots": snapshots,
        }))
    }

    pub(super) fn reconnect(&self, conn: ConnId, params: &Value) -> Result<Value, RpcError> {
        let client_id = str_field(params, "clientId")?;
        let last = field(params, "lastSeenServerSeq")?
            .as_u64()
            .ok_or_else(|| {
                RpcError::new(
                    ErrorCode::InvalidParams,
                    "field `lastSeenServerSeq` must be a non-negative integer",
                )
            })?;
        let subs: Vec<String> = serde_json::from_value(field(params, "subscriptions")?.clone())
            .map_err(|_| {
                RpcError::new(
                    ErrorCode::InvalidParams,
                    "field `subscriptions` must be an array of strings",
                )
            })?;
        let mut st = self.lock();
        self.check_bind(&st, conn, client_id)?;
        self.bind_client(&mut st, conn, client_id);
        let principal = st.conns.get(&conn).map(|c| c.principal.clone());
        let oldest = st.replay.front().map(|r| r.seq).unwrap_or(st.seq + 1);
        // Replay is possible when every action after `last` is still buffered,
        // and `last` was issued by this instance: an earlier instance's number
        // (below `seq_base`) says nothing about what this one has sent.
        let can_replay = last >= st.seq_base && last <= st.seq && last + 1 >= oldest;
        let mut missing = Vec::new();
        let mut live = Vec::new();
        for uri in &subs {
            let visible = principal.as_ref().is_some_and(|p| st.visible(p, uri));
            if visible && live.len() < self.cfg.server.max_subscriptions {
                live.push(uri.clone());
            } else {
                missing.push(uri.clone());
            }
        }
        if can_replay {
            let set: HashSet<&str> = live.iter().map(String::as_str).collect();
            let actions: Vec<Value> = st
                .replay
                .iter()
                .filter(|r| r.seq > last && set.contains(r.channel.as_str()))
                .filter_map(|r| serde_json::from_str(&r.envelope).ok())
                .collect();
            if let Some(c) = st.conns.get_mut(&conn) {
                c.subs.extend(live);
            }
            info!(client_id = ?client_id, replayed = actions.len(), "client reconnected by replay");
            Ok(json!({"type": "replay", "actions": actions, "missing": missing}))
        } else {
            let snapshots: Vec<Value> = live
                .iter()
                .filter_map(|uri| self.snapshot_locked(&st, uri))
                .collect();
            if let Some(c) = st.conns.get_mut(&conn) {
                c.subs.extend(live);
            }
            info!(client_id = ?client_id, "client reconnected by snapshot");
            Ok(json!({"type": "snapshot", "snapshots": snapshots}))
        }
    }
}
