//! The listener: TLS first when configured ([`super::tls`]), the first
//! request's head read whole ([`super::head`]); a page request is the
//! console's ([`super::console`]), `POST /ticket` makes a ticket
//! ([`super::ticket_page`]); a WebSocket upgrade is let in by
//! [`super::gate`], with frame limits.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::admission::{Admission, ConnectionLimits, Permit, Refused};
use super::connection::{self, ListenerShared};
use super::gate::{authenticate, own_origins, Asking};
use super::head::{self, Asked, Replayed};
use super::ticket_page;
use super::tls::Tls;
use super::transport::Transport;
use crate::host::Host;
use ahp_bridge_telemetry::{metrics, Escaped, Refusal};

/// A listener that could not be bound, and where.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}: {error}")]
pub struct BindError {
    pub addr: SocketAddr,
    pub error: std::io::Error,
}

pub async fn bind(addr: SocketAddr) -> Result<TcpListener, BindError> {
    TcpListener::bind(addr)
        .await
        .map_err(|error| BindError { addr, error })
}

/// Accepts connections until `accepting` is cancelled; `shutdown` closes
/// the connections (each flushes its queue, then sends Close 1001). At the
/// connection limits the oldest connection that has not initialized makes
/// room ([`Admission`]); with none to close, a socket is closed as soon as it
/// is accepted. Out of file descriptors, the loop backs off instead of
/// spinning. With `tls`, every connection is TLS first.
pub async fn serve(
    listener: TcpListener,
    host: Arc<Host>,
    tls: Option<Arc<Tls>>,
    accepting: CancellationToken,
    draining: CancellationToken,
    shutdown: CancellationToken,
) {
    let (total, per_ip) = host.settings().connection_limits();
    let admission = Admission::new(ConnectionLimits { total, per_ip });
    info!(
        max_connections = total,
        max_connections_per_ip = per_ip,
        "connection limits"
    );
    let shared = ListenerShared::default();
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
                let made_room = permit.made_room.take();
                let conn = AcceptedConn {
                    peer,
                    host: host.clone(),
                    draining: draining.clone(),
                    shutdown: shutdown.clone(),
                    shared: shared.clone(),
                    permit,
                };
                tokio::spawn(conn.run(stream, tls.clone()));
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

/// One accepted connection, before it is a WebSocket.
struct AcceptedConn {
    peer: SocketAddr,
    host: Arc<Host>,
    /// Cancelled at SIGTERM: new upgrades get 503 while open ones go on.
    draining: CancellationToken,
    shutdown: CancellationToken,
    shared: ListenerShared,
    permit: Permit,
}

/// Why the steps before the upgrade stopped waiting.
enum Stopped {
    /// `[server] handshake_timeout` passed.
    Deadline,
    /// Closed to make room for a newer connection.
    MadeRoom,
}

impl AcceptedConn {
    /// Runs `step` within the handshake deadline, unless the connection is
    /// closed to make room first; either way counted, and said at debug.
    async fn within<T>(
        &self,
        deadline: tokio::time::Instant,
        what: &str,
        step: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        let stopped = tokio::select! {
            r = tokio::time::timeout_at(deadline, step) => match r {
                Ok(v) => return Some(v),
                Err(_) => Stopped::Deadline,
            },
            _ = self.permit.evicted.cancelled() => Stopped::MadeRoom,
        };
        let peer = self.peer;
        match stopped {
            Stopped::Deadline => {
                metrics().connection_refused(Refusal::HandshakeTimeout);
                debug!(%peer, "no {what} within [server] handshake_timeout; closed");
            }
            Stopped::MadeRoom => {
                metrics().connection_refused(Refusal::MadeRoom);
                debug!(%peer, "closed before its {what} to make room for a new connection");
            }
        }
        None
    }

    /// The TLS handshake (counted in the handshake deadline), the first
    /// request, and then a page, a ticket, or the WebSocket.
    async fn run(self, stream: TcpStream, tls: Option<Arc<Tls>>) {
        let host = self.host.clone();
        let cfg = host.settings().server().clone();
        let deadline = tokio::time::Instant::now() + cfg.handshake_timeout;
        let peer = self.peer;
        // Small messages (a transform request, a delta) go out at once, not
        // after Nagle waits for the peer's delayed ACK.
        let _ = stream.set_nodelay(true);
        let own = stream
            .local_addr()
            .map(|l| own_origins(l, tls.is_some()))
            .unwrap_or_default();
        let mut transport = match &tls {
            None => Transport::Plain(stream),
            Some(tls) => match self
                .within(deadline, "TLS handshake", tls_handshake(stream, tls, peer))
                .await
            {
                Some(Some(t)) => t,
                _ => return,
            },
        };
        let read = self
            .within(deadline, "request", head::read_head(&mut transport))
            .await;
        let (asked, ahead) = match read {
            None => return,
            Some(Ok(read)) => read,
            Some(Err(e)) => {
                metrics().connection_refused(Refusal::BadUpgrade);
                debug!(%peer, "request not read: {e}");
                return;
            }
        };
        let certs = transport.identities();
        let presented = match asked {
            Asked::Upgrade(presented) => presented,
            Asked::Page {
                ref method,
                ref path,
                ref presented,
                ..
            } if method == "POST" && path == TICKET_PATH => {
                let asking = Asking {
                    presented,
                    certs: &certs,
                    own: &own,
                    tickets: None,
                };
                let principals = host.principals();
                let answer = authenticate(&cfg, &principals, &asking);
                let Some(answer) = self.within(deadline, "authentication", answer).await else {
                    return;
                };
                ticket_page::answer(&mut transport, answer, &self.shared.tickets).await;
                return;
            }
            page => {
                super::console::serve(&mut transport, &page).await;
                return;
            }
        };
        if self.draining.is_cancelled() {
            // A clear answer for a load balancer that has not seen /readyz
            // yet, not a refused connection.
            metrics().connection_refused(Refusal::Draining);
            debug!(%peer, "upgrade refused: draining");
            let why = "this bridge is draining (shutting down): connect again, another one answers";
            refuse(&mut transport, StatusCode::SERVICE_UNAVAILABLE, why).await;
            return;
        }
        let asking = Asking {
            presented: &presented,
            certs: &certs,
            own: &own,
            tickets: Some(&self.shared.tickets),
        };
        // The principals in force now: a reload applies to the next upgrade.
        let principals = host.principals();
        let answer = authenticate(&cfg, &principals, &asking);
        let Some(answer) = self.within(deadline, "authentication", answer).await else {
            return;
        };
        let auth = match answer {
            Ok(a) => a,
            Err(r) => {
                metrics().connection_refused(r.refusal());
                info!(%peer, status = r.status.as_u16(), "upgrade refused: {}", r.why);
                refuse(&mut transport, r.status, &r.why).await;
                return;
            }
        };
        let mut ws_cfg = WebSocketConfig::default();
        ws_cfg.max_message_size = Some(cfg.max_frame_bytes);
        ws_cfg.max_frame_size = Some(cfg.max_frame_bytes);
        ws_cfg.read_buffer_size = READ_BUFFER_BYTES;
        let stream = Replayed::new(ahead, transport);
        let upgrade = tokio_tungstenite::accept_async_with_config(stream, Some(ws_cfg));
        let ws = match self.within(deadline, "WebSocket upgrade", upgrade).await {
            None => return,
            Some(Ok(ws)) => ws,
            Some(Err(e)) => {
                metrics().connection_refused(Refusal::BadUpgrade);
                info!(%peer, "upgrade refused: {e}");
                return;
            }
        };
        debug!(%peer, principal = %Escaped(&auth.principal.name), "websocket connected");
        let AcceptedConn {
            host,
            shutdown,
            shared,
            permit,
            ..
        } = self;
        connection::run(ws, host, shutdown, auth, deadline, shared, permit).await;
        debug!(%peer, "websocket closed");
    }
}

/// What a client's socket reads at a time. The library zeroes this much
/// before every read, a wake that finds nothing included, so its 128 KiB
/// default costs on every frame; a longer frame still arrives whole (the
/// buffer grows to the length its header announces).
const READ_BUFFER_BYTES: usize = 8 * 1024;

/// The path the console asks a ticket of.
pub const TICKET_PATH: &str = "/ticket";

/// TLS on an accepted socket. A peer that speaks plain HTTP to it gets a
/// plain 400 that says so, not a broken handshake; a failed handshake (an
/// old version, no common cipher, a client certificate not verified or
/// missing where required) is counted and said at debug.
async fn tls_handshake(stream: TcpStream, tls: &Tls, peer: SocketAddr) -> Option<Transport> {
    const HANDSHAKE_RECORD: u8 = 0x16;
    let mut first = [0u8; 1];
    match stream.peek(&mut first).await {
        Ok(1) if first[0] == HANDSHAKE_RECORD => {}
        Ok(1) => {
            metrics().connection_refused(Refusal::Tls);
            debug!(%peer, "plain text on the TLS port; answered 400");
            let mut stream = Transport::Plain(stream);
            refuse(
                &mut stream,
                StatusCode::BAD_REQUEST,
                "this port speaks TLS: connect with wss:// or https://",
            )
            .await;
            return None;
        }
        _ => return None,
    }
    match tls.acceptor().accept(stream).await {
        Ok(s) => Some(Transport::Tls(Box::new(s))),
        Err(e) => {
            metrics().connection_refused(Refusal::Tls);
            debug!(%peer, "TLS handshake failed: {e}");
            None
        }
    }
}

/// Answers a request the listener refuses, and closes.
pub async fn refuse(stream: &mut Transport, status: StatusCode, why: &str) {
    use tokio::io::AsyncWriteExt;
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n{why}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        why.len() + 1,
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.shutdown().await;
}
