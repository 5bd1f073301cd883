//! One task pair per client: a reader that decodes and answers, a writer that
//! drains the connection's bounded outbound queue.

use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::auth::Principal;
use super::errors::AhpError;
use super::host::Host;
use crate::jsonrpc::{self, Answer, ErrorCode, Flow, InboundHandler, RpcError};

type CloseReason = Arc<Mutex<Option<(CloseCode, String)>>>;

fn set_reason(r: &CloseReason, code: CloseCode, why: impl Into<String>) {
    let mut g = r.lock().unwrap_or_else(|e| e.into_inner());
    g.get_or_insert((code, why.into()));
}

type Sink = futures_util::stream::SplitSink<WebSocketStream<TcpStream>, Message>;

/// Sends one frame unless the connection is killed meanwhile (a client that
/// does not read blocks the send forever).
async fn send_or_kill(sink: &mut Sink, m: Message, kill: &CancellationToken) -> bool {
    tokio::select! {
        r = sink.send(m) => r.is_ok(),
        _ = kill.cancelled() => false,
    }
}

/// One connection's requests and notifications, handed to the host.
struct ClientMessages {
    host: Arc<Host>,
    conn: super::clients::ConnId,
}

impl InboundHandler for ClientMessages {
    fn request(&self, method: &str, params: Value) -> Answer {
        // Files are read off the reader: a slow disk delays only its answer.
        if let Some(reply) = self.host.file_request(self.conn, method, &params) {
            return Answer::Later(reply);
        }
        match self.host.request(self.conn, method, &params) {
            // Nothing more can be said without a common version: answer, then close.
            Err(e) if e.is(AhpError::UnsupportedProtocolVersion) => Answer::Last(Err(e)),
            result => Answer::Now(result),
        }
    }

    fn notification(&self, method: &str, params: Value) {
        match method {
            "dispatchAction" => self.host.client_dispatch(self.conn, &params),
            "unsubscribe" => {
                if let Some(c) = params.get("channel").and_then(Value::as_str) {
                    self.host.unsubscribe(self.conn, c);
                }
            }
            other => debug!(conn = self.conn, method = other, "ignoring notification"),
        }
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
) {
    let cfg = host.config().server.clone();
    let (mut sink, mut stream) = ws.split();
    // `close`: flush what is queued, then a Close frame with the reason.
    // `kill`: drop the socket now (a client that does not read).
    let close = shutdown.child_token();
    let kill = CancellationToken::new();
    let reason: CloseReason = Arc::new(Mutex::new(None));
    let connected = host.connect(kill.clone(), principal);
    let (conn, peer, out, mut rx) = (
        connected.conn,
        connected.peer,
        connected.out,
        connected.queue,
    );
    let handler = ClientMessages {
        host: host.clone(),
        conn,
    };
    let from = format!("client connection {conn}");

    let writer = {
        let (close, kill, reason) = (close.clone(), kill.clone(), reason.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    _ = kill.cancelled() => return,
                    text = rx.recv() => {
                        if !send_or_kill(&mut sink, Message::text(text), &kill).await {
                            kill.cancel();
                            return;
                        }
                    },
                    _ = close.cancelled() => {
                        let flush = async {
                            while let Some(text) = rx.try_recv() {
                                if !send_or_kill(&mut sink, Message::text(text), &kill).await {
                                    return;
                                }
                            }
                            let frame = reason.lock().unwrap_or_else(|e| e.into_inner()).take();
                            let frame = frame.map_or(CloseFrame { code: CloseCode::Away, reason: "the host is shutting down".into() }, |(code, why)| CloseFrame { code, reason: why.into() });
                            let _ = send_or_kill(&mut sink, Message::Close(Some(frame)), &kill).await;
                        };
                        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), flush).await;
                        return;
                    }
                }
            }
        })
    };

    // Until the client initializes, the handshake deadline stands.
    let handshake = tokio::time::sleep_until(handshake_deadline);
    tokio::pin!(handshake);
    let mut awaiting_initialize = true;
    loop {
        let msg = tokio::select! {
            _ = close.cancelled() => break,
            _ = kill.cancelled() => break,
            _ = &mut handshake, if awaiting_initialize => {
                if host.client_id_of(conn).is_some() {
                    awaiting_initialize = false;
                    continue;
                }
                info!(conn, "no initialize within [server] handshake_timeout; closing");
                set_reason(&reason, CloseCode::Policy, "no initialize within the handshake deadline");
                break;
            }
            m = stream.next() => m,
        };
        let msg = match msg {
            None => break,
            Some(Ok(m)) => m,
            Some(Err(WsError::Capacity(e))) => {
                info!(conn, "frame over [server] max_frame_bytes: {e}; closing");
                set_reason(
                    &reason,
                    CloseCode::Size,
                    format!("frame over the limit of {} bytes", cfg.max_frame_bytes),
                );
                break;
            }
            Some(Err(e)) => {
                debug!(conn, "websocket error: {e}");
                break;
            }
        };
        match msg {
            Message::Text(text) => {
                let text = text.as_str();
                if jsonrpc::json_depth(text) > cfg.max_json_depth {
                    info!(
                        conn,
                        "JSON nested deeper than {}; closing", cfg.max_json_depth
                    );
                    set_reason(
                        &reason,
                        CloseCode::Policy,
                        format!("JSON nested deeper than {}", cfg.max_json_depth),
                    );
                    break;
                }
                if jsonrpc::receive(text, &peer, &handler, &from) == Flow::Close {
                    set_reason(&reason, CloseCode::Protocol, "no common protocol version");
                    break;
                }
            }
            Message::Binary(_) => {
                out.send(
                    jsonrpc::error_response(
                        None,
                        RpcError::new(
                            ErrorCode::InvalidRequest,
                            "binary frames are not supported; send one JSON-RPC message per text frame",
                        ),
                    )
                    .to_string(),
                );
            }
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
        }
    }
    close.cancel();
    host.disconnect(conn);
    let _ = writer.await;
}
