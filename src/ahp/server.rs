//! The listener: WebSocket upgrade with token and Origin checks, frame limits.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::connection;
use super::host::Host;
use crate::config::ServerConfig;

/// Why an upgrade is refused: the HTTP status and a body that says why.
pub fn check_upgrade(
    cfg: &ServerConfig,
    auth_header: Option<&str>,
    query: Option<&str>,
    origin: Option<&str>,
) -> Result<(), (StatusCode, &'static str)> {
    if let Some(origin) = origin {
        if !cfg.allowed_origins.iter().any(|o| o == origin) {
            return Err((
                StatusCode::FORBIDDEN,
                "origin not allowed; add it to [server] allowed_origins\n",
            ));
        }
    }
    if let Some(token) = &cfg.token {
        let from_header = auth_header
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim);
        let from_query = query.and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("token=")));
        let ok = [from_header, from_query]
            .into_iter()
            .flatten()
            .any(|given| constant_time_eq(given.as_bytes(), token.as_bytes()));
        if !ok {
            return Err((
                StatusCode::UNAUTHORIZED,
                "missing or wrong token: send Authorization: Bearer TOKEN or ?token=TOKEN\n",
            ));
        }
    }
    Ok(())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))
}

/// Accepts connections until `shutdown`.
pub async fn serve(listener: TcpListener, host: Arc<Host>, shutdown: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) => {
                let host = host.clone();
                let shutdown = shutdown.clone();
                tokio::spawn(async move { accept(stream, peer, host, shutdown).await });
            }
            Err(e) => {
                warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

// The handshake callback's signature is tungstenite's, large Err and all.
#[allow(clippy::result_large_err)]
async fn accept(stream: TcpStream, peer: SocketAddr, host: Arc<Host>, shutdown: CancellationToken) {
    let cfg = host.config().server.clone();
    let mut ws_cfg = WebSocketConfig::default();
    ws_cfg.max_message_size = Some(cfg.max_frame_bytes);
    ws_cfg.max_frame_size = Some(cfg.max_frame_bytes);
    let check = |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
        let header = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok());
        match check_upgrade(
            &cfg,
            header("authorization"),
            req.uri().query(),
            header("origin"),
        ) {
            Ok(()) => Ok(resp),
            Err((status, body)) => {
                let mut r = ErrorResponse::new(Some(body.to_string()));
                *r.status_mut() = status;
                Err(r)
            }
        }
    };
    let ws =
        match tokio_tungstenite::accept_hdr_async_with_config(stream, check, Some(ws_cfg)).await {
            Ok(ws) => ws,
            Err(e) => {
                info!(%peer, "upgrade refused: {e}");
                return;
            }
        };
    debug!(%peer, "websocket connected");
    connection::run(ws, host, shutdown).await;
    debug!(%peer, "websocket closed");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(token: Option<&str>, origins: &[&str]) -> ServerConfig {
        ServerConfig {
            token: token.map(String::from),
            allowed_origins: origins.iter().map(|s| s.to_string()).collect(),
            ..ServerConfig::default()
        }
    }

    #[test]
    fn token_by_header_or_query() {
        let c = cfg(Some("0123456789abcdef"), &[]);
        assert!(check_upgrade(&c, Some("Bearer 0123456789abcdef"), None, None).is_ok());
        assert!(check_upgrade(&c, None, Some("a=1&token=0123456789abcdef"), None).is_ok());
        assert_eq!(
            check_upgrade(&c, Some("Bearer nope"), None, None)
                .unwrap_err()
                .0,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            check_upgrade(&c, None, None, None).unwrap_err().0,
            StatusCode::UNAUTHORIZED
        );
        assert!(check_upgrade(&cfg(None, &[]), None, None, None).is_ok());
    }

    #[test]
    fn origin_must_be_allowed() {
        let c = cfg(None, &["https://ok.example"]);
        assert!(check_upgrade(&c, None, None, Some("https://ok.example")).is_ok());
        assert_eq!(
            check_upgrade(&c, None, None, Some("https://evil.example"))
                .unwrap_err()
                .0,
            StatusCode::FORBIDDEN
        );
    }
}
