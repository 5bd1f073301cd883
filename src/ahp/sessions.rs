//! Session lifecycle: `createSession` (owned by the principal that creates
//! it) and `disposeSession`; listing is in [`super::listing`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ahp_types::actions::StateAction;
use ahp_types::state::{ChatState, SessionState};
use serde_json::{json, Value};
use tracing::info;

use super::access::check_action;
use super::auth::Principal;
use super::clients::ConnId;
use super::errors::AhpError;
use super::host::Host;
use super::methods::str_field;
use super::state::{now_iso, summary_json, SessionEntry, PROVIDER};
use super::uri::{chat_uri_of, session_id_of, ROOT_URI};
use crate::jsonrpc::{ErrorCode, RpcError};

impl Host {
    pub(super) fn create_session(
        self: &Arc<Self>,
        conn: ConnId,
        principal: &Principal,
        params: &Value,
    ) -> Result<Value, RpcError> {
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
                let set = json!({"type": "session/activeClientSet", "activeClient": a});
                let typed: StateAction = serde_json::from_value(set.clone()).map_err(|e| {
                    RpcError::new(
                        ErrorCode::InvalidParams,
                        format!("field `activeClient`: {e}"),
                    )
                })?;
                let opts_in = a
                    .get("systemMessageTransform")
                    .is_some_and(|v| !v.is_null());
                check_action(principal, &typed, opts_in)
                    .map_err(|why| RpcError::new(AhpError::PermissionDenied, why))?;
                Some(set)
            }
        };
        let config = self.session_config_state(params.get("config"))?;
        let chat = chat_uri_of(id);
        let now = now_iso();
        let state: SessionState = serde_json::from_value(json!({
            "provider": PROVIDER, "title": "New session", "status": 1, "lifecycle": "creating",
            "activeClients": [], "chats": [{"resource": chat, "title": "Chat", "status": 1, "modifiedAt": now}],
            "defaultChat": chat, "workingDirectories": dirs, "config": config,
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
                owner: principal.name.clone(),
                chat: chat.clone(),
                opt_ins: BTreeMap::new(),
                tool_owners: HashMap::new(),
                created_at: now.clone(),
                modified_at: now.clone(),
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
        info!(session = %uri, client_id = ?me, principal = %principal.name, "session created");
        self.notify_root(
            &principal.name,
            "root/sessionAdded",
            json!({"channel": ROOT_URI, "summary": summary}),
        );
        self.update_active_sessions();
        if let Some(set) = active {
            let _ = self.server_action(uri, set);
        }
        if let Some(b) = self.backend() {
            b.session_created(uri);
        }
        Ok(json!({}))
    }

    pub(super) fn dispose_session(
        &self,
        principal: &Principal,
        uri: &str,
    ) -> Result<Value, RpcError> {
        let owner = {
            let mut st = self.lock();
            let owner = match st.sessions.get(uri) {
                Some(e) if principal.sees(&e.owner) => e.owner.clone(),
                _ => {
                    return Err(RpcError::new(
                        AhpError::SessionNotFound,
                        format!("no session {uri:?}"),
                    ))
                }
            };
            if owner != principal.name && !principal.is_admin() {
                return Err(RpcError::new(
                    AhpError::PermissionDenied,
                    format!("principal {:?} may dispose only its own sessions; another's needs the `admin` role", principal.name),
                ));
            }
            let Some(entry) = st.sessions.remove(uri) else {
                return Err(RpcError::new(
                    AhpError::SessionNotFound,
                    format!("no session {uri:?}"),
                ));
            };
            st.chats.remove(&entry.chat);
            for c in st.conns.values_mut() {
                c.subs.remove(uri);
                c.subs.remove(&entry.chat);
            }
            owner
        };
        self.forget_stored(uri);
        info!(session = %uri, principal = %principal.name, "session disposed");
        self.notify_root(
            &owner,
            "root/sessionRemoved",
            json!({"channel": ROOT_URI, "session": uri}),
        );
        self.update_active_sessions();
        if let Some(b) = self.backend() {
            b.session_disposed(uri);
        }
        Ok(json!({}))
    }

    pub(super) fn update_active_sessions(&self) {
        let n = self.lock().sessions.len();
        let _ = self.server_action(
            ROOT_URI,
            json!({"type": "root/activeSessionsChanged", "activeSessions": n}),
        );
    }
}
