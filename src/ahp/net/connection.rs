//! One client connection: a reader that decodes each frame and hands it to
//! the commands, a writer that drains the connection's bounded outbound
//! queue, and the close (flush, then a Close frame with the reason).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::ahp::auth::Principal;
use crate::ahp::cmd::cursor::CursorKey;
use crate::ahp::cmd::Commands;
use crate::ahp::host::outbound::{Outbound, OutboundQueue};
use crate::ahp::host::Host;
use crate::config::ServerConfig;
use crate::jsonrpc::{self, ErrorCode, Flow, RpcError};

type Sink = futures_util::stream::SplitSink<WebSocketStream<TcpStream>, Message>;
type Stream = futures_util::stream::SplitStream<WebSocketStream<TcpStream>>;

/// How long the writer flushes what is queued before it sends Close.
const FLUSH_LIMIT: Duration = Duration::from_secs(2);

/// What every connection of one listener shares.
#[derive(Clone)]
pub struct Shared {
    /// Seals and opens this host's paging cursors.
    pub cursors: Arc<CursorKey>,
    /// Bounds the file requests running at once, host-wide.
    pub file_workers: Arc<tokio::sync::Semaphore>,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            cursors: Arc::new(CursorKey::random()),
            file_workers: Arc::new(tokio::sync::Semaphore::new(crate::ahp::files::FILE_WORKERS)),
        }
    }
}

/// Why the host closes a connection: the first reason set wins.
#[derive(Clone, Default)]
struct CloseReason(Arc<Mutex<Option<(CloseCode, String)>>>);

impl CloseReason {
    fn set(&self, code: CloseCode, why: impl Into<String>) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.get_or_insert((code, why.into()));
    }

    /// The Close frame to send: the reason set, or "shutting down".
    fn frame(&self) -> CloseFrame {
        let taken = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        let (code, why) = taken.unwrap_or((CloseCode::Away, "the host is shutting down".into()));
        CloseFrame {
            code,
            reason: why.into(),
        }
    }
}

/// The three ways a connection ends: `close` flushes what is queued, then
/// sends Close with the reason; `kill` drops the socket now (a client that
/// does not read); either stops the reader.
#[derive(Clone)]
struct Ending {
    close: CancellationToken,
    kill: CancellationToken,
    reason: CloseReason,
}

/// Sends one frame unless the connection is killed meanwhile (a client that
/// does not read blocks the send forever).
async fn send_or_kill(sink: &mut Sink, m: Message, kill: &CancellationToken) -> bool {
    tokio::select! {
        r = sink.send(m) => r.is_ok(),
        _ = kill.cancelled() => false,
    }
}

/// Serves one upgraded connection of `principal`; `handshake_deadline` is
/// when it must have sent `initialize` (or `reconnect`) by.
pub async fn run(
    ws: WebSocketStream<TcpStream>,
    host: Arc<Host>,
    shutdown: CancellationToken,
    principal: Arc<Principal>,
    handshake_deadline: tokio::time::Instant,
    shared: Shared,
) {
    let (sink, stream) = ws.split();
    let ending = Ending {
        close: shutdown.child_token(),
        kill: CancellationToken::new(),
        reason: CloseReason::default(),
    };
    let connected = host.connect(ending.kill.clone(), principal);
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
        cfg: host.config().server.clone(),
        ending: ending.clone(),
    };
    reader.read(stream, handshake_deadline).await;
    ending.close.cancel();
    host.disconnect(connected.conn);
    let _ = writer.await;
}

/// Drains the queue to the socket until the connection ends.
fn spawn_writer(mut sink: Sink, mut queue: OutboundQueue, e: Ending) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                biased;
                _ = e.kill.cancelled() => return,
                text = queue.recv() => {
                    if !send_or_kill(&mut sink, Message::text(text), &e.kill).await {
                        e.kill.cancel();
                        return;
                    }
                },
                _ = e.close.cancelled() => break,
            }
        }
        let flush = async {
            while let Some(text) = queue.try_recv() {
                if !send_or_kill(&mut sink, Message::text(text), &e.kill).await {
                    return;
                }
            }
            let _ = send_or_kill(&mut sink, Message::Close(Some(e.reason.frame())), &e.kill).await;
        };
        let _ = tokio::time::timeout(FLUSH_LIMIT, flush).await;
    })
}

/// The reading half of a connection.
struct Reader {
    commands: Commands,
    peer: Arc<jsonrpc::Peer>,
    out: Outbound,
    cfg: ServerConfig,
    ending: Ending,
}

impl Reader {
    /// Reads frames until the client closes or the connection ends; until
    /// the client initializes, the handshake deadline stands.
    async fn read(&self, mut stream: Stream, handshake_deadline: tokio::time::Instant) {
        let conn = self.commands.conn;
        let handshake = tokio::time::sleep_until(handshake_deadline);
        tokio::pin!(handshake);
        let mut awaiting_initialize = true;
        loop {
            let msg = tokio::select! {
                _ = self.ending.close.cancelled() => return,
                _ = self.ending.kill.cancelled() => return,
                _ = &mut handshake, if awaiting_initialize => {
                    if self.commands.host.client_id_of(conn).is_some() {
                        awaiting_initialize = false;
                        continue;
                    }
                    info!(conn, "no initialize within [server] handshake_timeout; closing");
                    self.ending.reason.set(CloseCode::Policy, "no initialize within the handshake deadline");
                    return;
                }
                m = stream.next() => m,
            };
            let msg = match msg {
                None => return,
                Some(Ok(m)) => m,
                Some(Err(WsError::Capacity(e))) => {
                    info!(conn, "frame over [server] max_frame_bytes: {e}; closing");
                    let why = format!("frame over the limit of {} bytes", self.cfg.max_frame_bytes);
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
                self.out.send(jsonrpc::error_response(None, e).to_string());
                Flow::Continue
            }
            Message::Close(_) => Flow::Close,
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => Flow::Continue,
        }
    }
}
