//! The listener: the first request's head read whole ([`super::head`]); a
//! page request is the console's ([`super::console`]); a WebSocket upgrade
//! with token and Origin checks, frame limits.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::admission::{Admission, Limits, Permit, Refused};
use super::connection::{self, Shared};
use super::head::{self, Asked, Replayed};
use crate::ahp::auth::{Authenticated, Principals};
use crate::ahp::host::Host;
use crate::config::ServerConfig;
use crate::telemetry::{metrics, Refusal};

/// The token a client presents: `Authorization: Bearer TOKEN` (the scheme
/// in any case), or `?token=` / `?tkn=` in the query (the keys browser
/// clients use, since they cannot set headers on a WebSocket).
pub fn presented_token<'a>(
    auth_header: Option<&'a str>,
    query: Option<&'a str>,
) -> Option<&'a str> {
    let from_header = auth_header.and_then(|h| {
        let (scheme, token) = h.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
    });
    let from_query = query.and_then(|q| {
        q.split('&').find_map(|kv| match kv.split_once('=') {
            Some(("token" | "tkn", v)) if !v.is_empty() => Some(v),
            _ => None,
        })
    });
    from_header.or(from_query)
}

/// Whether a browser at `origin` may connect: it equals an entry of
/// `allowed`, or an entry ends in `:*` (`http://localhost:*`) and the origin
/// is that scheme and host on any port (or none). Nothing else matches: not
/// `http://localhost.evil.example`, not another scheme.
pub fn origin_allowed(allowed: &[String], origin: &str) -> bool {
    allowed.iter().any(|a| match a.strip_suffix(":*") {
        Some(base) => {
            origin == base
                || origin
                    .strip_prefix(base)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .is_some_and(|port| {
                        (1..=5).contains(&port.len()) && port.bytes().all(|b| b.is_ascii_digit())
                    })
        }
        None => a == origin,
    })
}

/// The origins the console served on this socket has: the address the
/// client reached, as an IP literal (a name could be rebound to loopback by
/// another site), and `localhost` on that port when it is loopback.
pub fn own_origins(local: SocketAddr) -> Vec<String> {
    let mut own = vec![format!("http://{local}")];
    if local.ip().is_loopback() {
        own.push(format!("http://localhost:{}", local.port()));
    }
    own
}

/// The principal an upgrade request authenticates as (with the credential
/// it used), or why it is refused: the HTTP status and a body that says why.
/// `own` are the console's origins ([`own_origins`]), allowed unasked.
pub fn check_upgrade(
    cfg: &ServerConfig,
    principals: &Principals,
    auth_header: Option<&str>,
    query: Option<&str>,
    origin: Option<&str>,
    own: &[String],
) -> Result<Authenticated, (StatusCode, &'static str)> {
    if let Some(origin) = origin {
        if !own.iter().any(|o| o == origin) && !origin_allowed(&cfg.allowed_origins, origin) {
            return Err((
                StatusCode::FORBIDDEN,
                "origin not allowed; add it to [server] allowed_origins\n",
            ));
        }
    }
    principals
        .authenticate(presented_token(auth_header, query))
        .ok_or((
            StatusCode::UNAUTHORIZED,
            "missing or wrong token: send Authorization: Bearer TOKEN or ?token=TOKEN\n",
        ))
}

pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))
}

/// Accepts connections until `accepting` is cancelled; `shutdown` closes
/// the connections (each flushes its queue, then sends Close 1001). At the
/// connection limits the oldest connection that has not initialized makes
/// room ([`Admission`]); with none to close, a socket is closed as soon as it
/// is accepted. Out of file descriptors, the loop backs off instead of
/// spinning.
pub async fn serve(
    listener: TcpListener,
    host: Arc<Host>,
    accepting: CancellationToken,
    shutdown: CancellationToken,
) {
    let (total, per_ip) = host.config().connection_limits();
    let admission = Admission::new(Limits { total, per_ip });
    info!(
        max_connections = total,
        max_connections_per_ip = per_ip,
        "connection limits"
    );
    let shared = Shared::default();
    let mut backoff = Duration::ZERO;
    let mut refusing = false;
    loop {
        let accepted = tokio::select! {
            _ = accepting.cancelled() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) => {
                backoff = Duration::ZERO;
                let mut permit = match admission.admit(peer.ip()) {
                    Ok(permit) => permit,
                    Err(Refused(limit)) => {
                        metrics().connection_refused(Refusal::Limit);
                        // Said once per episode: a flood must not flood the log too.
                        if !std::mem::replace(&mut refusing, true) {
                            warn!(%peer, "connection closed at once: {limit} reached");
                        }
                        drop(stream);
                        continue;
                    }
                };
                refusing = false;
                let host = host.clone();
                let shutdown = shutdown.clone();
                let shared = shared.clone();
                let made_room = permit.made_room.take();
                tokio::spawn(accept(stream, peer, host, shutdown, shared, permit));
                // The connection closed to make room holds its descriptor
                // until its task ends: accepting on meanwhile would run the
                // process out of descriptors in a burst.
                if let Some(gone) = made_room {
                    let _ = tokio::time::timeout(Duration::from_secs(1), gone.cancelled()).await;
                }
            }
            Err(e) => {
                let out_of_fds = matches!(e.raw_os_error(), Some(23 | 24));
                if backoff.is_zero() {
                    warn!("accept failed: {e}; backing off");
                }
                backoff = (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                if !out_of_fds {
                    backoff = backoff.max(Duration::from_millis(50));
                }
                tokio::select! {
                    _ = accepting.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
            }
        }
    }
}

// The handshake callback's signature is tungstenite's, large Err and all.
#[allow(clippy::result_large_err)]
async fn accept(
    mut stream: TcpStream,
    peer: SocketAddr,
    host: Arc<Host>,
    shutdown: CancellationToken,
    shared: Shared,
    permit: Permit,
) {
    let cfg = host.config().server.clone();
    let deadline = tokio::time::Instant::now() + cfg.handshake_timeout;
    // Small messages (a transform request, a delta) go out at once, not
    // after Nagle waits for the peer's delayed ACK.
    let _ = stream.set_nodelay(true);
    let mut ws_cfg = WebSocketConfig::default();
    ws_cfg.max_message_size = Some(cfg.max_frame_bytes);
    ws_cfg.max_frame_size = Some(cfg.max_frame_bytes);
    let own = stream.local_addr().map(own_origins).unwrap_or_default();
    let Some(ahead) = upgrade_request(&mut stream, peer, deadline, &permit).await else {
        return;
    };
    let stream = Replayed::new(ahead, stream);
    let mut authenticated = None;
    let mut refusal = None;
    let check = |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
        let header = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok());
        // The principals in force now: a reload applies to the next upgrade.
        match check_upgrade(
            &cfg,
            &host.principals(),
            header("authorization"),
            req.uri().query(),
            header("origin"),
            &own,
        ) {
            Ok(a) => {
                authenticated = Some(a);
                Ok(resp)
            }
            Err((status, body)) => {
                let why = match status {
                    StatusCode::FORBIDDEN => Refusal::Origin,
                    _ => Refusal::Unauthorized,
                };
                refusal = Some(why);
                let mut r = ErrorResponse::new(Some(body.to_string()));
                *r.status_mut() = status;
                Err(r)
            }
        }
    };
    let upgrade = tokio_tungstenite::accept_hdr_async_with_config(stream, check, Some(ws_cfg));
    let upgraded = tokio::select! {
        u = tokio::time::timeout_at(deadline, upgrade) => u,
        _ = permit.evicted.cancelled() => {
            metrics().connection_refused(Refusal::MadeRoom);
            debug!(%peer, "closed before its upgrade to make room for a new connection");
            return;
        }
    };
    let ws = match upgraded {
        Ok(Ok(ws)) => ws,
        Ok(Err(e)) => {
            metrics().connection_refused(refusal.unwrap_or(Refusal::BadUpgrade));
            info!(%peer, "upgrade refused: {e}");
            return;
        }
        Err(_) => {
            metrics().connection_refused(Refusal::HandshakeTimeout);
            debug!(%peer, "no WebSocket upgrade within [server] handshake_timeout; closed");
            return;
        }
    };
    let Some(auth) = authenticated else { return };
    debug!(%peer, principal = %auth.principal.name, "websocket connected");
    connection::run(ws, host, shutdown, auth, deadline, shared, permit).await;
    debug!(%peer, "websocket closed");
}

/// The first request's bytes when it is a WebSocket upgrade; any other
/// request is answered with the console's page here, and a request not
/// read whole by `deadline` (or a connection closed to make room) is counted.
async fn upgrade_request(
    stream: &mut TcpStream,
    peer: SocketAddr,
    deadline: tokio::time::Instant,
    permit: &Permit,
) -> Option<Vec<u8>> {
    let read = tokio::select! {
        h = tokio::time::timeout_at(deadline, head::read_head(stream)) => h,
        _ = permit.evicted.cancelled() => {
            metrics().connection_refused(Refusal::MadeRoom);
            debug!(%peer, "closed before its request to make room for a new connection");
            return None;
        }
    };
    match read {
        Ok(Ok((Asked::Upgrade, bytes))) => Some(bytes),
        Ok(Ok((page, _))) => {
            super::console::serve(stream, &page).await;
            None
        }
        Ok(Err(e)) => {
            metrics().connection_refused(Refusal::BadUpgrade);
            debug!(%peer, "request not read: {e}");
            None
        }
        Err(_) => {
            metrics().connection_refused(Refusal::HandshakeTimeout);
            debug!(%peer, "no request within [server] handshake_timeout; closed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn cfg(token: Option<&str>, origins: &[&str]) -> Config {
        let mut c = Config::default();
        c.server.token = token.map(String::from);
        c.server.allowed_origins = origins.iter().map(|s| s.to_string()).collect();
        c
    }

    fn check(
        c: &Config,
        auth: Option<&str>,
        query: Option<&str>,
        origin: Option<&str>,
    ) -> Result<String, StatusCode> {
        let own = own_origins("127.0.0.1:8421".parse().unwrap());
        check_upgrade(
            &c.server,
            &Principals::from_config(c),
            auth,
            query,
            origin,
            &own,
        )
        .map(|a| a.principal.name.clone())
        .map_err(|e| e.0)
    }

    #[test]
    fn token_by_header_or_query() {
        let c = cfg(Some("0123456789abcdef"), &[]);
        let ok = Ok("default".to_string());
        assert_eq!(check(&c, Some("Bearer 0123456789abcdef"), None, None), ok);
        assert_eq!(check(&c, Some("bearer 0123456789abcdef"), None, None), ok);
        assert_eq!(check(&c, Some("BEARER  0123456789abcdef "), None, None), ok);
        assert_eq!(
            check(&c, None, Some("a=1&token=0123456789abcdef"), None),
            ok
        );
        assert_eq!(check(&c, None, Some("tkn=0123456789abcdef&b=2"), None), ok);
        assert_eq!(
            check(&c, Some("Bearer nope"), None, None),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            check(&c, Some("Basic 0123456789abcdef"), None, None),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            check(&c, None, Some("xtoken=0123456789abcdef"), None),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(check(&c, None, None, None), Err(StatusCode::UNAUTHORIZED));
        assert_eq!(
            check(&cfg(None, &[]), None, None, None),
            Ok("local".to_string())
        );
    }

    #[test]
    fn origin_must_be_allowed() {
        let c = cfg(None, &["https://ok.example"]);
        assert!(check(&c, None, None, Some("https://ok.example")).is_ok());
        assert_eq!(
            check(&c, None, None, Some("https://evil.example")),
            Err(StatusCode::FORBIDDEN)
        );
    }

    #[test]
    fn any_port_patterns_match_only_that_host() {
        let allowed = vec![
            "http://localhost:*".to_string(),
            "https://ide.example".into(),
        ];
        for ok in [
            "http://localhost:5173",
            "http://localhost",
            "https://ide.example",
        ] {
            assert!(origin_allowed(&allowed, ok), "{ok}");
        }
        for bad in [
            "http://localhost.evil.example:5173",
            "http://localhost:5173.evil.example",
            "http://localhost:",
            "http://localhost:123456",
            "https://localhost:5173",
            "http://evil.example",
            "https://ide.example:8443",
        ] {
            assert!(!origin_allowed(&allowed, bad), "{bad}");
        }
        // `serve` without allowed_origins refuses every browser, loopback
        // included, but for the console it serves itself on that address.
        let c = cfg(None, &[]);
        assert_eq!(
            check(&c, None, None, Some("http://localhost:5173")),
            Err(StatusCode::FORBIDDEN)
        );
        for own in ["http://127.0.0.1:8421", "http://localhost:8421"] {
            assert!(check(&c, None, None, Some(own)).is_ok(), "{own}");
        }
        assert_eq!(
            check(&c, None, None, Some("http://rebound.example:8421")),
            Err(StatusCode::FORBIDDEN)
        );
    }
}
