//! One connection to the runtime: frames in and out, our calls with a
//! deadline, its notifications delivered in order, and its requests always
//! answered (unsupported ones with -32601), so nothing stays pending.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;
use tracing::{debug, trace, warn};

use super::codec::ContentLengthCodec;
use super::wire::{method, RuntimeAnswer, RuntimeEvent, RuntimeRequest, SESSION_EVENT};
use crate::jsonrpc::{self, Answer, CallError, ErrorCode, InboundHandler, Peer, RpcError};

pub const PROTOCOL_VERSION: u64 = 3;

pub type ReplyFuture = Pin<Box<dyn Future<Output = RuntimeAnswer> + Send>>;

/// What the bridge does with what the runtime sends on its own.
pub trait RuntimeHandler: Send + Sync + 'static {
    /// An event of a runtime session, in arrival order.
    fn event(&self, session_id: &str, event: RuntimeEvent);
    /// A request from the runtime; the answer goes back whatever it is.
    fn request(&self, request: RuntimeRequest) -> ReplyFuture;
}

/// Types what the runtime sends and hands it to the bridge; unsupported
/// requests are answered -32601 at once, so nothing stays pending.
struct TypedInbound(Arc<dyn RuntimeHandler>);

impl InboundHandler for TypedInbound {
    fn request(&self, method: &str, params: Value) -> Answer {
        match RuntimeRequest::parse(method, &params) {
            Some(r) => {
                let reply = self.0.request(r);
                Answer::Later(Box::pin(async move { Ok(reply.await.to_json()) }))
            }
            None => Answer::Now(Err(RpcError::method_not_found(method))),
        }
    }

    fn notification(&self, method: &str, params: Value) {
        if method == SESSION_EVENT {
            // Events carry prompt text: their data only at trace.
            trace!(event = %params, "runtime event");
            let (session, event) = RuntimeEvent::parse(&params);
            self.0.event(&session, event);
        } else {
            debug!(method, "runtime notification ignored");
        }
    }
}

pub struct RuntimeConn {
    pub peer: Arc<Peer>,
    /// Cancelled when the connection ends (EOF, bad frame, write failure).
    pub closed: CancellationToken,
    call_timeout: Duration,
}

impl RuntimeConn {
    pub fn start<R, W>(
        reader: R,
        writer: W,
        handler: Arc<dyn RuntimeHandler>,
        call_timeout: Duration,
        max_frame: usize,
    ) -> Arc<Self>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let closed = CancellationToken::new();
        let peer = Peer::new(move |text| tx.send(text).is_ok());
        let mut sink = FramedWrite::new(writer, ContentLengthCodec::new(max_frame));
        let c = closed.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    m = rx.recv() => match m {
                        Some(text) => if let Err(e) = sink.send(text).await {
                            warn!("runtime write failed: {e}");
                            break;
                        },
                        None => break,
                    },
                    _ = c.cancelled() => break,
                }
            }
            c.cancel();
        });
        let mut stream = FramedRead::new(reader, ContentLengthCodec::new(max_frame));
        let (p, c) = (peer.clone(), closed.clone());
        let inbound = TypedInbound(handler);
        tokio::spawn(async move {
            loop {
                let frame = tokio::select! {
                    f = stream.next() => f,
                    _ = c.cancelled() => break,
                };
                let bytes = match frame {
                    None => {
                        debug!("runtime closed its output");
                        break;
                    }
                    Some(Err(e)) => {
                        warn!("runtime sent a bad frame: {e}; dropping the connection");
                        break;
                    }
                    Some(Ok(b)) => b,
                };
                let text = String::from_utf8_lossy(&bytes);
                // The runtime's requests are answered on their own tasks:
                // `receive` never waits, so events keep flowing meanwhile.
                jsonrpc::receive(&text, &p, &inbound, "runtime");
            }
            c.cancel();
            p.close();
        });
        Arc::new(Self {
            peer,
            closed,
            call_timeout,
        })
    }

    pub async fn call(&self, method: &str, params: Value) -> Result<Value, CallError> {
        self.peer.call(method, params, self.call_timeout).await
    }

    /// `connect` (with the token), falling back to `ping` on older runtimes;
    /// refuses any protocol version but 3. Returns the runtime's version.
    pub async fn handshake(&self, token: Option<&str>) -> anyhow::Result<String> {
        let params = match token {
            Some(t) => json!({"token": t}),
            None => json!({}),
        };
        let reply = match self.call(method::CONNECT, params).await {
            Ok(v) => v,
            Err(CallError::Rpc(e)) if e.is(ErrorCode::MethodNotFound) => self
                .call(method::PING, json!({"message": "ahp-copilot-bridge"}))
                .await
                .map_err(|e| anyhow::anyhow!("runtime ping failed: {e}"))?,
            Err(e) => anyhow::bail!("runtime connect failed: {e}"),
        };
        let version = reply["protocolVersion"].as_u64();
        if version != Some(PROTOCOL_VERSION) {
            anyhow::bail!(
                "runtime speaks protocol version {}, this bridge speaks only {PROTOCOL_VERSION}; install the pinned CLI (scripts/install-runtime.sh)",
                version.map_or("(none)".into(), |v| v.to_string())
            );
        }
        Ok(reply["version"].as_str().unwrap_or("unknown").to_string())
    }

    pub fn close(&self) {
        self.closed.cancel();
        self.peer.close();
    }
}
