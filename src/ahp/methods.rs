//! The requests a client sends, checked against its principal's roles, and
//! subscriptions and snapshots. The handshake is in [`super::handshake`],
//! session lifecycle and listing in [`super::sessions`].

use std::sync::Arc;

use serde_json::{json, Value};
use tracing::debug;

use super::access::role_for_request;
use super::auth::Principal;
use super::clients::ConnId;
use super::errors::AhpError;
use super::extension::section_catalogue;
use super::host::Host;
use super::state::{session_json, State};
use super::uri::ROOT_URI;
use crate::jsonrpc::{ErrorCode, RpcError};

pub(super) fn field<'a>(params: &'a Value, name: &str) -> Result<&'a Value, RpcError> {
    params
        .get(name)
        .ok_or_else(|| RpcError::new(ErrorCode::InvalidParams, format!("missing field `{name}`")))
}

pub(super) fn str_field<'a>(params: &'a Value, name: &str) -> Result<&'a str, RpcError> {
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
        match method {
            "initialize" => return self.initialize(conn, params),
            "reconnect" => return self.reconnect(conn, params),
            _ => {}
        }
        let principal = self.caller(conn, method, params)?;
        match method {
            "subscribe" => self.subscribe(conn, str_field(params, "channel")?),
            "createSession" => self.create_session(conn, &principal, params),
            "disposeSession" => self.dispose_session(&principal, str_field(params, "channel")?),
            "listSessions" => self.list_sessions(&principal, params),
            "fetchTurns" => self.fetch_turns(&principal, params),
            "resolveSessionConfig" => self.resolve_session_config(params),
            "sessionConfigCompletions" => self.session_config_completions(params),
            "authenticate" => self.authenticate(&principal, params),
            _ => Err(super::surface::refusal(method)),
        }
    }

    /// Who sends `method` on `conn`: an initialized client whose principal
    /// holds the role the method needs, with params that are an object.
    pub(super) fn caller(
        &self,
        conn: ConnId,
        method: &str,
        params: &Value,
    ) -> Result<Arc<Principal>, RpcError> {
        if self.client_id_of(conn).is_none() {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                format!("{method}: call initialize (or reconnect) first"),
            ));
        }
        if !params.is_object() {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                "params must be an object",
            ));
        }
        let Some((client_id, principal)) = self.identity_of(conn) else {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                "connection closed",
            ));
        };
        if let Some((role, what)) = role_for_request(method) {
            let decision = principal.require(role, what);
            debug!(principal = %principal.name, client_id = ?client_id, method, allowed = decision.is_ok(), "authorization");
            decision.map_err(|why| RpcError::new(AhpError::PermissionDenied, why))?;
        }
        Ok(principal)
    }

    fn subscribe(&self, conn: ConnId, uri: &str) -> Result<Value, RpcError> {
        let mut st = self.lock();
        let snap = self.subscribable(&st, conn, &[uri.to_owned()])?.remove(0);
        if let Some(c) = st.conns.get_mut(&conn) {
            c.subs.insert(uri.to_owned());
        }
        Ok(json!({"snapshot": snap}))
    }

    /// The snapshots of `uris` if `conn` may subscribe to every one of them
    /// (each exists and is visible to its principal, and the subscription
    /// limit holds); changes nothing.
    pub(super) fn subscribable(
        &self,
        st: &State,
        conn: ConnId,
        uris: &[String],
    ) -> Result<Vec<Value>, RpcError> {
        let c = st
            .conns
            .get(&conn)
            .ok_or_else(|| RpcError::new(ErrorCode::InvalidRequest, "connection closed"))?;
        let new = uris.iter().filter(|u| !c.subs.contains(*u)).count();
        let max = self.cfg.server.max_subscriptions;
        if c.subs.len() + new > max {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                format!("at most {max} subscriptions per connection"),
            ));
        }
        uris.iter()
            .map(|uri| {
                st.visible(&c.principal, uri)
                    .then(|| self.snapshot_locked(st, uri))
                    .flatten()
                    .ok_or_else(|| {
                        RpcError::new(
                            AhpError::SessionNotFound,
                            format!("no such channel: {uri:?}"),
                        )
                    })
            })
            .collect()
    }

    /// A snapshot `{resource, state, fromSeq}` with extension fields restored.
    pub fn snapshot(&self, uri: &str) -> Option<Value> {
        let st = self.lock();
        self.snapshot_locked(&st, uri)
    }

    pub(super) fn snapshot_locked(&self, st: &State, uri: &str) -> Option<Value> {
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
            agent["systemMessageSections"] = section_catalogue(&self.hidden_sections());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::sections::SECTION_CATALOGUE;

    #[test]
    fn root_state_advertises_sections_and_restriction() {
        let cfg = Config::default();
        let policy =
            crate::policy::PolicyReader::fixed(crate::policy::Policy::from_config(&cfg).unwrap());
        let host = Host::new(Arc::new(cfg), policy);
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
