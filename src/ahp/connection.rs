//! One task pair per client: a reader that decodes and answers, a writer that
//! drains the connection's bounded outbound queue.

use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::host::Host;
use crate::jsonrpc::{self, Incoming, RpcError, INVALID_REQUEST};

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

pub async fn run(ws: WebSocketStream<TcpStream>, host: Arc<Host>, shutdown: CancellationToken) {
    let cfg = host.config().server.clone();
    let (mut sink, mut stream) = ws.split();
    let (tx, mut rx) = mpsc::channel::<String>(cfg.outbound_queue);
    // `close`: flush what is queued, then a Close frame with the reason.
    // `kill`: drop the socket now (a client that does not read).
    let close = shutdown.child_token();
    let kill = CancellationToken::new();
    let reason: CloseReason = Arc::new(Mutex::new(None));
    let (conn, peer) = host.connect(tx.clone(), kill.clone());

    let writer = {
        let (close, kill, reason) = (close.clone(), kill.clone(), reason.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    _ = kill.cancelled() => return,
                    m = rx.recv() => match m {
                        Some(text) => {
                            if !send_or_kill(&mut sink, Message::text(text), &kill).await {
                                kill.cancel();
                                return;
                            }
                        }
                        None => return,
                    },
                    _ = close.cancelled() => {
                        let flush = async {
                            while let Ok(text) = rx.try_recv() {
                                if !send_or_kill(&mut sink, Message::text(text), &kill).await {
                                    return;
                                }
                            }
                            let frame = reason.lock().unwrap_or_else(|e| e.into_inner()).take();
                            let frame = frame.map_or(CloseFrame { code: CloseCode::Away, reason: "server closing".into() }, |(code, why)| CloseFrame { code, reason: why.into() });
                            let _ = send_or_kill(&mut sink, Message::Close(Some(frame)), &kill).await;
                        };
                        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), flush).await;
                        return;
                    }
                }
            }
        })
    };

    let send = |v: Value| {
        if tx.try_send(v.to_string()).is_err() && !kill.is_cancelled() {
            warn!(
                conn,
                "client is not reading (outbound queue full); disconnecting it"
            );
            kill.cancel();
        }
    };

    loop {
        let msg = tokio::select! {
            _ = close.cancelled() => break,
            _ = kill.cancelled() => break,
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
                match jsonrpc::parse(text) {
                    Err(m) => send(jsonrpc::error_response(m.id.as_ref(), m.error)),
                    Ok(Incoming::Request { id, method, params }) => {
                        let result = host.request(conn, &method, &params);
                        let fatal = matches!(&result, Err(e) if e.code == -32005);
                        send(jsonrpc::response(&id, result));
                        if fatal {
                            set_reason(&reason, CloseCode::Protocol, "no common protocol version");
                            break;
                        }
                    }
                    Ok(Incoming::Notification { method, params }) => match method.as_str() {
                        "dispatchAction" => host.client_dispatch(conn, &params),
                        "unsubscribe" => {
                            if let Some(c) = params.get("channel").and_then(Value::as_str) {
                                host.unsubscribe(conn, c);
                            }
                        }
                        other => debug!(conn, method = other, "ignoring notification"),
                    },
                    Ok(Incoming::Response { id, result }) => {
                        if !peer.complete(&id, result) {
                            debug!(conn, %id, "answer to no pending request (late or unknown)");
                        }
                    }
                    Ok(Incoming::OrphanError(e)) => debug!(conn, "client reported an error: {e}"),
                }
            }
            Message::Binary(_) => send(jsonrpc::error_response(
                None,
                RpcError::new(
                    INVALID_REQUEST,
                    "binary frames are not supported; send one JSON-RPC message per text frame",
                ),
            )),
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
        }
    }
    close.cancel();
    host.disconnect(conn);
    let _ = writer.await;
}
