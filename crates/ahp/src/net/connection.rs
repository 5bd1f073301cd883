//! One client connection: a reader that decodes each frame and hands it to
//! the commands, a writer that drains the connection's bounded outbound
//! queue, and the close (flush, then a Close frame with the reason).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::admission::Permit;
use super::head::Replayed;
use crate::auth::tickets::Tickets;
use crate::auth::Authenticated;
use crate::cmd::cursor::CursorKey;
use crate::cmd::Commands;
use crate::host::outbound::{Outbound, OutboundQueue};
use crate::host::Host;
use ahp_bridge_base::config::ServerConfig;
use ahp_bridge_jsonrpc::{self as jsonrpc, ErrorCode, Flow, RpcError};
use ahp_bridge_telemetry::{metrics, Refusal};

type Sink = futures_util::stream::SplitSink<WebSocketStream<Replayed>, Message>;
type ClientFrames = futures_util::stream::SplitStream<WebSocketStream<Replayed>>;

/// How long the writer flushes what is queued before it sends Close.
const FLUSH_LIMIT: Duration = Duration::from_secs(2);

/// How long, once Close is sent, the host waits for the client to finish
/// (its Close, its end of the TCP connection) before dropping the socket.
const LINGER_LIMIT: Duration = Duration::from_secs(2);

/// What every connection of one listener shares.
#[derive(Clone)]
pub(crate) struct ListenerShared {
    /// Seals and opens this host's paging cursors.
    pub cursors: Arc<CursorKey>,
    /// Bounds the file requests running at once, host-wide.
    pub file_workers: Arc<tokio::sync::Semaphore>,
    /// The console's tickets, made by `POST /ticket`, used by an upgrade.
    pub tickets: Arc<Tickets>,
}

impl Default for ListenerShared {
    fn default() -> Self {
        Self {
            cursors: Arc::new(CursorKey::random()),
            file_workers: Arc::new(tokio::sync::Semaphore::new(crate::files::FILE_WORKERS)),
            tickets: Arc::default(),
        }
    }
}

/// How a connection closes: the host's reason, or the client's own Close
/// (answered with the same code). The first one set wins.
#[derive(Clone, Default)]
struct CloseReason(Arc<Mutex<Option<Closing>>>);

enum Closing {
    Host(CloseCode, String),
    /// The client sent Close: the WebSocket layer answers it with its code.
    Peer,
}

impl CloseReason {
    fn set(&self, code: CloseCode, why: impl Into<String>) {
        self.set_closing(Closing::Host(code, why.into()));
    }

    fn set_closing(&self, c: Closing) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.get_or_insert(c);
    }

    /// The Close frame the host sends: its reason, or "shutting down";
    /// `None` when the client closed (its Close is echoed instead).
    fn frame(&self) -> Option<CloseFrame> {
        let taken = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        let (code, why) = match taken {
            Some(Closing::Peer) => return None,
            Some(Closing::Host(code, why)) => (code, why),
            None => (CloseCode::Away, "the host is shutting down".into()),
        };
        Some(CloseFrame {
            code,
            reason: why.into(),
        })
    }
}

/// The three ways a connection ends: `close` flushes what is queued, then
/// sends Close with the reason; `kill` drops the socket now (a client that
/// does not read); either stops the reader.
#[derive(Clone)]
struct ConnectionEnd {
    close: CancellationToken,
    kill: CancellationToken,
    reason: CloseReason,
}

/// Sends one frame unless the connection is killed meanwhile (a client that
/// does not read blocks the send forever).
async fn send_or_kill(sink: &mut Sink, m: Message, kill: &CancellationToken) -> bool {
    if let Message::Text(t) = &m {
        metrics().ws_sent(t.len());
    }
    tokio::select! {
        r = sink.send(m) => r.is_ok(),
        _ = kill.cancelled() => false,
    }
}

/// Serves one upgraded connection, authenticated as `auth`;
/// `handshake_deadline` is when it must have sent `initialize` (or
/// `reconnect`) by.
pub(crate) async fn run(
    ws: WebSocketStream<Replayed>,
    host: Arc<Host>,
    shutdown: CancellationToken,
    auth: Authenticated,
    handshake_deadline: tokio::time::Instant,
    shared: ListenerShared,
    permit: Permit,
) {
    let (sink, mut stream) = ws.split();
    let ending = ConnectionEnd {
        close: shutdown.child_token(),
        kill: CancellationToken::new(),
        reason: CloseReason::default(),
    };
    let expires = auth.expires_at.map(until);
    let connected = host.connections().connect(ending.kill.clone(), auth);
    let writer = spawn_writer(sink, connected.queue, ending.clone());
    let commands = Commands {
        host: host.clone(),
        conn: connected.conn,
        cursors: shared.cursors,
        file_workers: shared.file_workers,
    };
    let reader = Reader {
        commands,
        peer: connected.peer,
        out: connected.out,
        cfg: host.settings().server().clone(),
        ending: ending.clone(),
        permit,
        closing: connected.closing,
        expires,
    };
    reader.read(&mut stream, handshake_deadline).await;
    ending.close.cancel();
    host.connections().disconnect(connected.conn);
    let sink = writer.await.ok().flatten();
    if let (Some(sink), false) = (sink, ending.kill.is_cancelled()) {
        linger(stream, sink).await;
    }
}

/// Drains the queue to the socket until the connection ends; then, unless
/// killed, flushes what is left and closes: the host's Close, or the echo
/// of the client's. Gives the sink back for the close to finish.
fn spawn_writer(
    mut sink: Sink,
    mut queue: OutboundQueue,
    e: ConnectionEnd,
) -> JoinHandle<Option<Sink>> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                biased;
                _ = e.kill.cancelled() => return None,
                text = queue.recv() => {
                    if !send_or_kill(&mut sink, Message::text(text), &e.kill).await {
                        e.kill.cancel();
                        return None;
                    }
                },
                _ = e.close.cancelled() => break,
            }
        }
        let flush = async {
            let frame = e.reason.frame();
            if frame.is_some() {
                // Nothing may follow the client's Close; before ours, what is queued goes.
                while let Some(text) = queue.try_recv() {
                    if !send_or_kill(&mut sink, Message::text(text), &e.kill).await {
                        return;
                    }
                }
            }
            let _ = match frame {
                Some(frame) => send_or_kill(&mut sink, Message::Close(Some(frame)), &e.kill).await,
                // The WebSocket layer queued the echo of the client's Close: flush sends it.
                None => tokio::select! {
                    r = sink.flush() => r.is_ok(),
                    _ = e.kill.cancelled() => false,
                },
            };
        };
        let _ = tokio::time::timeout(FLUSH_LIMIT, flush).await;
        Some(sink)
    })
}

/// The end of a clean close: the host has sent its Close (or echoed the
/// client's), so it ends its side of the TCP connection and reads, without
/// looking, until the client ends its own (after its Close, or after the
/// rest of a frame it was still sending) or [`LINGER_LIMIT`] passes. The
/// client then sees the close it was sent, not a reset.
async fn linger(stream: ClientFrames, sink: Sink) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut ws) = stream.reunite(sink) else {
        return;
    };
    let tcp = ws.get_mut();
    let _ = tcp.shutdown().await;
    let drain = async {
        let mut buf = vec![0u8; 16 * 1024];
        while matches!(tcp.read(&mut buf).await, Ok(n) if n > 0) {}
    };
    let _ = tokio::time::timeout(LINGER_LIMIT, drain).await;
}

/// The reading half of a connection.
struct Reader {
    commands: Commands,
    peer: Arc<jsonrpc::Peer>,
    out: Outbound,
    cfg: ServerConfig,
    ending: ConnectionEnd,
    /// Its place among the connections; closed to make room until it initializes.
    permit: Permit,
    /// Cancelled when the host closes it (a credential a reload revoked).
    closing: CancellationToken,
    /// When its credential (a JWT) expires: it is closed then.
    expires: Option<tokio::time::Instant>,
}

/// The tokio instant of a wall-clock time (now, when it is past).
fn until(t: std::time::SystemTime) -> tokio::time::Instant {
    let left = t
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    tokio::time::Instant::now() + left
}

impl Reader {
    /// Reads frames until the client closes or the connection ends; until
    /// the client initializes, the handshake deadline stands.
    async fn read(&self, stream: &mut ClientFrames, handshake_deadline: tokio::time::Instant) {
        let conn = self.commands.conn;
        let handshake = tokio::time::sleep_until(handshake_deadline);
        tokio::pin!(handshake);
        let expiry = tokio::time::sleep_until(self.expires.unwrap_or(handshake_deadline));
        tokio::pin!(expiry);
        let mut awaiting_initialize = true;
        loop {
            if awaiting_initialize
                && self
                    .commands
                    .host
                    .connections()
                    .client_id_of(conn)
                    .is_some()
            {
                awaiting_initialize = false;
                self.permit.initialized();
            }
            let msg = tokio::select! {
                _ = self.ending.close.cancelled() => return,
                _ = self.ending.kill.cancelled() => return,
                _ = self.closing.cancelled() => {
                    let host = &self.commands.host;
                    let why = host.connections().close_reason(conn).unwrap_or("closed by the host");
                    info!(conn, "{why}; closing");
                    self.ending.reason.set(CloseCode::Policy, why);
                    return;
                }
                _ = &mut expiry, if self.expires.is_some() => {
                    info!(conn, "its token expired; closing");
                    self.ending.reason.set(CloseCode::Policy, "token expired: authenticate again with a fresh token");
                    return;
                }
                _ = self.permit.evicted.cancelled(), if awaiting_initialize => {
                    metrics().connection_refused(Refusal::MadeRoom);
                    debug!(conn, "closed before initialize to make room for a new connection");
                    self.ending.kill.cancel();
                    return;
                }
                _ = self.out.drained(), if self.out.under_pressure() => continue,
                _ = &mut handshake, if awaiting_initialize => {
                    if self.commands.host.connections().client_id_of(conn).is_some() {
                        awaiting_initialize = false;
                        continue;
                    }
                    metrics().connection_refused(Refusal::HandshakeTimeout);
                    info!(conn, "no initialize within [server] handshake_timeout; closing");
                    self.ending.reason.set(CloseCode::Policy, "no initialize within the handshake deadline");
                    return;
                }
                m = stream.next(), if !self.out.under_pressure() => m,
            };
            let msg = match msg {
                None => return,
                Some(Ok(m)) => m,
                Some(Err(WsError::Capacity(e))) => {
                    info!(conn, "frame over [server] max_frame_bytes: {e}; closing");
                    let why = format!(
                        "frame over [server] max_frame_bytes ({} bytes)",
                        self.cfg.max_frame_bytes
                    );
                    self.ending.reason.set(CloseCode::Size, why);
                    return;
                }
                Some(Err(e)) => {
                    debug!(conn, "websocket error: {e}");
                    return;
                }
            };
            if self.frame(msg) == Flow::Close {
                return;
            }
        }
    }

    /// Handles one frame.
    fn frame(&self, msg: Message) -> Flow {
        let conn = self.commands.conn;
        match msg {
            Message::Text(text) => {
                let text = text.as_str();
                metrics().ws_received(text.len());
                let max_depth = self.cfg.max_json_depth;
                if jsonrpc::json_depth(text) > max_depth {
                    info!(conn, "JSON nested deeper than {max_depth}; closing");
                    let why = format!("JSON nested deeper than {max_depth}");
                    self.ending.reason.set(CloseCode::Policy, why);
                    return Flow::Close;
                }
                let from = format!("client connection {conn}");
                let flow = jsonrpc::receive(text, &self.peer, &self.commands, &from);
                if flow == Flow::Close {
                    self.ending
                        .reason
                        .set(CloseCode::Protocol, "no common protocol version");
                }
                flow
            }
            Message::Binary(_) => {
                let e = RpcError::new(
                    ErrorCode::InvalidRequest,
                    "binary frames are not supported; send one JSON-RPC message per text frame",
                );
                self.out.send(jsonrpc::error_response(None, e));
                Flow::Continue
            }
            Message::Close(_) => {
                self.ending.reason.set_closing(Closing::Peer);
                Flow::Close
            }
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => Flow::Continue,
        }
    }
}
