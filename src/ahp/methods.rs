//! The requests a client sends: the handshake (`initialize`, `reconnect`),
//! subscriptions and snapshots, and session lifecycle and listing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use ahp_types::state::{ChatState, SessionState};
use serde_json::{json, Value};
use tracing::info;

use super::clients::ConnId;
use super::errors::AhpError;
use super::extension::section_catalogue;
use super::host::Host;
use super::state::{now_iso, session_json, summary_json, SessionEntry, State, PROVIDER};
use super::uri::{chat_uri_of, session_id_of, ROOT_URI};
use crate::jsonrpc::{ErrorCode, RpcError};

fn field<'a>(params: &'a Value, name: &str) -> Result<&'a Value, RpcError> {
    params
        .get(name)
        .ok_or_else(|| RpcError::new(ErrorCode::InvalidParams, format!("missing field `{name}`")))
}

fn str_field<'a>(params: &'a Value, name: &str) -> Result<&'a str, RpcError> {
    field(params, name)?.as_str().ok_or_else(|| {
        RpcError::new(
            ErrorCode::InvalidParams,
            format!("field `{name}` must be a string"),
        )
    })
}

impl Host {
    /// Answers one client request. `Err` with code -32005 tells the caller to close.
    pub fn request(
        self: &Arc<Self>,
        conn: ConnId,
        method: &str,
        params: &Value,
    ) -> Result<Value, RpcError> {
        if method == "ping" {
            // The response itself is the signal; the official client expects `null`.
            return Ok(Value::Null);
        }
        let initialized = self.client_id_of(conn).is_some();
        match method {
            "initialize" => return self.initialize(conn, params),
            "reconnect" => return self.reconnect(conn, params),
            _ if !initialized => {
                return Err(RpcError::new(
                    ErrorCode::InvalidRequest,
                    format!("{method}: call initialize (or reconnect) first"),
                ))
            }
            _ => {}
        }
        if !params.is_object() {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                "params must be an object",
            ));
        }
        match method {
            "subscribe" => self.subscribe(conn, str_field(params, "channel")?),
            "createSession" => self.create_session(conn, params),
            "disposeSession" => self.dispose_session(str_field(params, "channel")?),
            "listSessions" => Ok(self.list_sessions()),
            "fetchTurns" => {
                let chat = str_field(params, "channel")?;
                if self.lock().chats.contains_key(chat) {
                    Ok(json!({}))
                } else {
                    Err(RpcError::new(
                        AhpError::SessionNotFound,
                        format!("no chat {chat}"),
                    ))
                }
            }
            _ => Err(RpcError::method_not_found(method)),
        }
    }

    fn initialize(&self, conn: ConnId, params: &Value) -> Result<Value, RpcError> {
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
        let mut st = self.lock();
        self.bind_client(&mut st, conn, client_id)?;
        let mut snapshots = Vec::new();
        for uri in initial {
            if let Some(s) = self.subscribe_locked(&mut st, conn, &uri)? {
                snapshots.push(s);
            }
        }
        info!(client_id, protocol = %chosen, "client initialized");
        Ok(json!({
            "protocolVersion": chosen,
            "serverSeq": st.seq,
            "serverInfo": {"name": "ahp-copilot-bridge", "version": env!("CARGO_PKG_VERSION"), "title": "AHP bridge for GitHub Copilot"},
            "snapshots": snapshots,
        }))
    }

    fn reconnect(&self, conn: ConnId, params: &Value) -> Result<Value, RpcError> {
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
        self.bind_client(&mut st, conn, client_id)?;
        let oldest = st.replay.front().map(|(s, _)| *s).unwrap_or(st.seq + 1);
        // Replay is possible when every action after `last` is still buffered.
        let can_replay = last <= st.seq && last + 1 >= oldest;
        let mut missing = Vec::new();
        let mut live = Vec::new();
        for uri in &subs {
            if st.exists(uri) && live.len() < self.cfg.server.max_subscriptions {
                live.push(uri.clone());
            } else {
                missing.push(uri.clone());
            }
        }
        if can_replay {
            let set: HashSet<&String> = live.iter().collect();
            let actions: Vec<Value> = st
                .replay
                .iter()
                .filter(|(s, e)| {
                    *s > last
                        && e["channel"]
                            .as_str()
                            .is_some_and(|c| set.contains(&c.to_string()))
                })
                .map(|(_, e)| e.clone())
                .collect();
            if let Some(c) = st.conns.get_mut(&conn) {
                c.subs.extend(live);
            }
            info!(
                client_id,
                replayed = actions.len(),
                "client reconnected by replay"
            );
            Ok(json!({"type": "replay", "actions": actions, "missing": missing}))
        } else {
            let mut snapshots = Vec::new();
            for uri in &live {
                if let Some(s) = self.subscribe_locked(&mut st, conn, uri)? {
                    snapshots.push(s);
                }
            }
            info!(client_id, "client reconnected by snapshot");
            Ok(json!({"type": "snapshot", "snapshots": snapshots}))
        }
    }

    fn subscribe(&self, conn: ConnId, uri: &str) -> Result<Value, RpcError> {
        let mut st = self.lock();
        let snap = self.subscribe_locked(&mut st, conn, uri)?;
        Ok(json!({"snapshot": snap}))
    }

    fn subscribe_locked(
        &self,
        st: &mut State,
        conn: ConnId,
        uri: &str,
    ) -> Result<Option<Value>, RpcError> {
        let snap = self.snapshot_locked(st, uri).ok_or_else(|| {
            RpcError::new(AhpError::SessionNotFound, format!("no such channel: {uri}"))
        })?;
        let c = st
            .conns
            .get_mut(&conn)
            .ok_or_else(|| RpcError::new(ErrorCode::InvalidRequest, "connection closed"))?;
        if !c.subs.contains(uri) && c.subs.len() >= self.cfg.server.max_subscriptions {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "at most {} subscriptions per connection",
                    self.cfg.server.max_subscriptions
                ),
            ));
        }
        c.subs.insert(uri.to_owned());
        Ok(Some(snap))
    }

    /// A snapshot `{resource, state, fromSeq}` with extension fields restored.
    pub fn snapshot(&self, uri: &str) -> Option<Value> {
        let st = self.lock();
        self.snapshot_locked(&st, uri)
    }

    fn snapshot_locked(&self, st: &State, uri: &str) -> Option<Value> {
        let state = if uri == ROOT_URI {
            self.root_json(st)
        } else if let Some(s) = st.sessions.get(uri) {
            session_json(s)
        } else if let Some((c, _)) = st.chats.get(uri) {
            serde_json::to_value(c).ok()?
        } else {
            return None;
        };
        Some(json!({"resource": uri, "state": state, "fromSeq": st.seq}))
    }

    fn root_json(&self, st: &State) -> Value {
        let mut v = serde_json::to_value(&st.root).unwrap_or(Value::Null);
        if let Some(agent) = v["agents"].get_mut(0) {
            agent["systemMessageSections"] = section_catalogue(&self.cfg.policy.restricted);
        }
        v
    }

    fn create_session(self: &Arc<Self>, conn: ConnId, params: &Value) -> Result<Value, RpcError> {
        let uri = str_field(params, "channel")?;
        let id = session_id_of(uri).ok_or_else(|| {
            RpcError::new(ErrorCode::InvalidParams, "field `channel` must be `ahp-session:/<id>` with an id of letters, digits, `-`, `_` or `.`")
        })?;
        if let Some(p) = params.get("provider").and_then(Value::as_str) {
            if p != PROVIDER {
                return Err(RpcError::new(
                    AhpError::ProviderNotFound,
                    format!("unknown provider {p:?}; this host has {PROVIDER:?}"),
                ));
            }
        }
        let dirs: Vec<String> = match params.get("workingDirectories") {
            None | Some(Value::Null) => vec![],
            Some(v) => serde_json::from_value(v.clone()).map_err(|_| {
                RpcError::new(
                    ErrorCode::InvalidParams,
                    "field `workingDirectories` must be an array of URIs",
                )
            })?,
        };
        let me = self.client_id_of(conn).unwrap_or_default();
        let active = match params.get("activeClient") {
            None | Some(Value::Null) => None,
            Some(a) => {
                let parsed: ahp_types::state::SessionActiveClient =
                    serde_json::from_value(a.clone()).map_err(|e| {
                        RpcError::new(
                            ErrorCode::InvalidParams,
                            format!("field `activeClient`: {e}"),
                        )
                    })?;
                if parsed.client_id != me {
                    return Err(RpcError::new(
                        ErrorCode::InvalidParams,
                        "field `activeClient.clientId` must be the caller's own clientId",
                    ));
                }
                Some(a.clone())
            }
        };
        let chat = chat_uri_of(id);
        let now = now_iso();
        let state: SessionState = serde_json::from_value(json!({
            "provider": PROVIDER, "title": "New session", "status": 1, "lifecycle": "creating",
            "activeClients": [], "chats": [{"resource": chat, "title": "Chat", "status": 1, "modifiedAt": now}],
            "defaultChat": chat, "workingDirectories": dirs,
        }))
        .map_err(|e| RpcError::new(ErrorCode::InvalidParams, e.to_string()))?;
        let chat_state: ChatState = serde_json::from_value(
            json!({"resource": chat, "title": "Chat", "status": 1, "modifiedAt": now, "turns": []}),
        )
        .map_err(|e| RpcError::new(ErrorCode::InvalidParams, e.to_string()))?;
        let summary = {
            let mut st = self.lock();
            if st.sessions.contains_key(uri) {
                return Err(RpcError::new(
                    AhpError::SessionAlreadyExists,
                    format!("session {uri} already exists"),
                ));
            }
            let entry = SessionEntry {
                state,
                chat: chat.clone(),
                opt_ins: BTreeMap::new(),
                tool_owners: HashMap::new(),
                created_at: now.clone(),
            };
            let summary = summary_json(uri, &entry);
            st.sessions.insert(uri.to_owned(), entry);
            st.chats.insert(chat.clone(), (chat_state, uri.to_owned()));
            // The creator watches its own session from the start.
            if let Some(c) = st.conns.get_mut(&conn) {
                if c.subs.len() < self.cfg.server.max_subscriptions {
                    c.subs.insert(uri.to_owned());
                }
            }
            summary
        };
        info!(session = %uri, client_id = %me, "session created");
        self.notify_root(
            "root/sessionAdded",
            json!({"channel": ROOT_URI, "summary": summary}),
        );
        self.update_active_sessions();
        if let Some(a) = active {
            let _ = self.server_action(
                uri,
                json!({"type": "session/activeClientSet", "activeClient": a}),
            );
        }
        if let Some(b) = self.backend() {
            b.session_created(uri);
        }
        Ok(json!({}))
    }

    fn dispose_session(&self, uri: &str) -> Result<Value, RpcError> {
        {
            let mut st = self.lock();
            let Some(entry) = st.sessions.remove(uri) else {
                return Err(RpcError::new(
                    AhpError::SessionNotFound,
                    format!("no session {uri}"),
                ));
            };
            st.chats.remove(&entry.chat);
            for c in st.conns.values_mut() {
                c.subs.remove(uri);
                c.subs.remove(&entry.chat);
            }
        }
        info!(session = %uri, "session disposed");
        self.notify_root(
            "root/sessionRemoved",
            json!({"channel": ROOT_URI, "session": uri}),
        );
        self.update_active_sessions();
        if let Some(b) = self.backend() {
            b.session_disposed(uri);
        }
        Ok(json!({}))
    }

    fn list_sessions(&self) -> Value {
        let st = self.lock();
        let items: Vec<Value> = st
            .sessions
            .iter()
            .map(|(u, e)| summary_json(u, e))
            .collect();
        json!({"items": items})
    }

    fn update_active_sessions(&self) {
        let n = self.lock().sessions.len();
        let _ = self.server_action(
            ROOT_URI,
            json!({"type": "root/activeSessionsChanged", "activeSessions": n}),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::sections::SECTION_CATALOGUE;

    #[test]
    fn root_state_advertises_sections_and_restriction() {
        let host = Host::new(Arc::new(Config::default()));
        let snap = host.snapshot(ROOT_URI).unwrap();
        let secs = snap["state"]["agents"][0]["systemMessageSections"]
            .as_array()
            .unwrap();
        assert_eq!(secs.len(), SECTION_CATALOGUE.len());
        let safety = secs.iter().find(|s| s["id"] == "safety").unwrap();
        assert_eq!(safety["restricted"], true);
        assert_eq!(snap["state"]["agents"][0]["provider"], "copilot");
    }
}
