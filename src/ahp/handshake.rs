//! The handshake: `initialize` (negotiate, bind the clientId, initial
//! subscriptions) and `reconnect` (rebind, then replay or snapshots).

use std::collections::HashSet;

use serde_json::{json, Value};
use tracing::info;

use super::clients::ConnId;
use super::completions::COMPLETION_TRIGGER;
use super::errors::AhpError;
use super::extension;
use super::files::file_uri_of;
use super::host::Host;
use super::methods::{field, str_field};
use crate::jsonrpc::{ErrorCode, RpcError};

/// The protocol versions this host implements, most preferred first.
pub const IMPLEMENTED_VERSIONS: &[&str] = ahp_types::SUPPORTED_PROTOCOL_VERSIONS;

/// The version to speak: the highest offered one this host implements
/// exactly; failing that, the highest offered one the spec makes compatible
/// with one it implements (same major, `>= 1`, or same `0.minor`), which the
/// answer must then name as offered. `None`: nothing in common.
pub fn negotiate(offered: &[String]) -> Option<String> {
    let exact = offered
        .iter()
        .filter(|v| IMPLEMENTED_VERSIONS.contains(&v.as_str()))
        .max_by_key(|v| semver(v));
    match exact {
        Some(v) => Some(v.clone()),
        // The official selection: malformed entries make it give up.
        None => ahp_types::negotiate_protocol_version(offered)
            .ok()
            .flatten()
            .map(String::from),
    }
}

fn semver(v: &str) -> Option<(u64, u64, u64)> {
    let mut parts = v.split('.').map(|p| p.parse::<u64>().ok());
    let out = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(out)
}

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
        let chosen = negotiate(&versions).ok_or_else(|| {
            RpcError::new(
                AhpError::UnsupportedProtocolVersion,
                "no supported protocol version offered",
            )
            .with_data(json!({"supportedVersions": IMPLEMENTED_VERSIONS}))
        })?;
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
        let mut result = json!({
            "protocolVersion": chosen,
            "serverSeq": st.seq,
            "serverInfo": {"name": "ahp-copilot-bridge", "version": env!("CARGO_PKG_VERSION"), "title": "AHP bridge for GitHub Copilot"},
            "snapshots": snapshots,
            "_meta": extension::advertisement(),
            "completionTriggerCharacters": [COMPLETION_TRIGGER],
        });
        if let Some(dir) = &self.cfg.runtime.working_directory {
            result["defaultDirectory"] = json!(file_uri_of(dir));
        }
        Ok(result)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(offered: &[&str]) -> Option<String> {
        negotiate(&offered.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn the_highest_implemented_offer_wins() {
        assert_eq!(pick(&["1.1.0", "1.0.0"]).as_deref(), Some("1.0.0"));
        assert_eq!(pick(&["0.9.0", "1.0.0"]).as_deref(), Some("1.0.0"));
        assert_eq!(pick(&["0.9.0"]).as_deref(), Some("0.9.0"));
        // Nothing implemented offered: a compatible version still connects.
        assert_eq!(pick(&["1.2.0"]).as_deref(), Some("1.2.0"));
        assert_eq!(pick(&["2.0.0"]), None);
        assert_eq!(pick(&["0.8.0"]), None);
        assert_eq!(pick(&["banana"]), None);
        assert_eq!(pick(&[]), None);
    }
}
