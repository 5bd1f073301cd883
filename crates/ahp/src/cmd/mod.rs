//! What a client sends, answered: each request's method is typed first
//! (an unknown one refused by [`surface`]), the caller checked (initialized,
//! holding the role the method needs), the params parsed once, then a
//! `match` hands it to the file of its group: [`handshake`], [`session_commands`],
//! [`listing`], [`config_schema`], [`authenticate`], and the file
//! requests of `crate::files`.

use ahp_bridge_telemetry::Escaped;
use std::sync::Arc;

use serde_json::Value;
use tracing::debug;

use super::auth::access::role_for_request;
use super::auth::Principal;
use super::files;
use super::host::clients::ConnId;
use super::host::Host;
use super::protocol::errors::AhpError;
use super::protocol::params::{HostMethod, Notification, Request};
use ahp_bridge_jsonrpc::{Answer, ErrorCode, InboundHandler, RpcError};
use reply::{subscribed, to_result, Empty};

pub(crate) mod authenticate;
pub mod config_schema;
pub(crate) mod cursor;
pub(crate) mod handshake;
pub(crate) mod listing;
pub(crate) mod reply;
pub mod session_commands;
pub(crate) mod surface;

/// One connection's requests and notifications, answered against the host.
pub(crate) struct Commands {
    pub host: Arc<Host>,
    pub conn: ConnId,
    /// Seals and opens this host's paging cursors.
    pub cursors: Arc<cursor::CursorKey>,
    /// Bounds the file requests running at once, host-wide.
    pub file_workers: Arc<tokio::sync::Semaphore>,
}

impl InboundHandler for Commands {
    fn request(&self, method: &str, params: Value) -> Answer {
        let Some(method) = HostMethod::of(method) else {
            return Answer::Now(Err(surface::refusal(method)));
        };
        let request = self
            .caller(method)
            .and_then(|caller| Ok((caller, Request::parse(method, params)?)));
        let (caller, request) = match request {
            Ok(r) => r,
            Err(e) => return Answer::Now(Err(e)),
        };
        match self.answer(caller, request) {
            // Nothing more can be said without a common version: answer, then close.
            Answer::Now(Err(e)) if e.is(AhpError::UnsupportedProtocolVersion) => {
                Answer::Last(Err(e))
            }
            answer => answer,
        }
    }

    fn notification(&self, method: &str, params: Value) {
        match Notification::parse(method, params) {
            Some(Notification::DispatchAction(d)) => self.host.client_dispatch(self.conn, d),
            Some(Notification::Unsubscribe(u)) => {
                self.host.connections().unsubscribe(self.conn, &u.channel)
            }
            None => debug!(conn = self.conn, method, "ignoring notification"),
        }
    }
}

impl Commands {
    /// Who sends `method`: nobody yet for the handshake; else an
    /// initialized client whose principal holds the role the method needs.
    fn caller(&self, method: HostMethod) -> Result<Option<Arc<Principal>>, RpcError> {
        if method.before_initialize() {
            return Ok(None);
        }
        let Some((client_id, principal)) = self.host.connections().identity(self.conn) else {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                format!("{}: call initialize (or reconnect) first", method.name()),
            ));
        };
        if let Some((role, what)) = role_for_request(method) {
            let decision = principal.require(role, what);
            debug!(principal = %principal.name, client = %Escaped(&client_id), method = method.name(), allowed = decision.is_ok(), "authorization");
            decision.map_err(|why| RpcError::new(AhpError::PermissionDenied, why.0))?;
        }
        Ok(Some(principal))
    }

    fn answer(&self, caller: Option<Arc<Principal>>, request: Request) -> Answer {
        let (host, conn) = (&self.host, self.conn);
        let Some(p) = caller else {
            return Answer::Now(match request {
                // The response itself is the signal; the official client expects `null`.
                Request::Ping => Ok(Value::Null),
                Request::Initialize(i) => handshake::initialize(host, conn, i),
                Request::Reconnect(r) => handshake::reconnect(host, conn, r),
                _ => Err(RpcError::new(ErrorCode::InternalError, "no caller")),
            });
        };
        let file = |r| files::request(host.clone(), p.clone(), self.file_workers.clone(), r);
        // Each reply is typed until here, where it becomes the JSON-RPC result.
        Answer::Now(match request {
            Request::Subscribe(s) => host.subscribe(conn, &s.channel).map(subscribed),
            Request::CreateSession(c) => {
                session_commands::create(host, conn, &p, *c).and_then(to_result)
            }
            Request::DisposeSession(d) => host
                .session_list()
                .remove_session(&p, &d.channel)
                .and_then(|()| to_result(Empty {})),
            Request::ListSessions(l) => listing::list_sessions(
                host,
                &self.cursors,
                &p,
                host.connections().version_of(conn),
                l,
            )
            .and_then(to_result),
            Request::FetchTurns(f) => listing::fetch_turns(host, &p, f).and_then(to_result),
            Request::ResolveSessionConfig(r) => config_schema::resolve(host, r).and_then(to_result),
            Request::SessionConfigCompletions(c) => {
                config_schema::completions(host, c).and_then(to_result)
            }
            Request::Authenticate(a) => authenticate::authenticate(host, &p, a).and_then(to_result),
            Request::ResourceRead(_)
            | Request::ResourceList(_)
            | Request::ResourceResolve(_)
            | Request::ResourceRequest(_)
            | Request::Completions(_) => {
                // Files are read off the reader: a slow disk delays only its answer.
                return Answer::Later(file(request));
            }
            Request::Ping | Request::Initialize(_) | Request::Reconnect(_) => Err(RpcError::new(
                ErrorCode::InternalError,
                "handshake with a caller",
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::uri::ROOT_URI;
    use ahp_bridge_base::config::Config;
    use ahp_bridge_base::sections::SECTION_CATALOGUE;
    use ahp_bridge_policy::{Policy, PolicyReader};

    #[test]
    fn root_state_advertises_sections_and_restriction() {
        let cfg = Config::default();
        let policy = PolicyReader::fixed(Policy::from_config(&cfg).unwrap());
        let host = Host::new(&cfg, policy);
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
