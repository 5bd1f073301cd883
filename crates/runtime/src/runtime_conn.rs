//! One connection to the runtime: frames in and out, our calls with a
//! deadline, its notifications delivered in order, and its requests always
//! answered (unsupported ones with -32601), so nothing stays pending.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;
use tracing::{debug, trace, warn};

use super::calls::{self, Method};
use super::codec::ContentLengthCodec;
use super::events::{RuntimeEvent, SESSION_EVENT};
use super::mismatch::{Mismatch, MismatchKind};
use super::requests::{RuntimeAnswer, RuntimeRequest};
use super::schema as s;
use crate::runtime_error::RuntimeError;
use ahp_bridge_jsonrpc::{
    self as jsonrpc, Answer, CallError, ErrorCode, InboundHandler, Peer, RpcError,
};

pub(crate) const PROTOCOL_VERSION: u64 = 3;

pub type RuntimeReplyFuture = Pin<Box<dyn Future<Output = RuntimeAnswer> + Send>>;

/// What the bridge does with what the runtime sends on its own.
pub trait RuntimeHandler: Send + Sync + 'static {
    /// An event of a runtime session, in arrival order, with its id (to
    /// drop a repeat: [`super::repeats`]).
    fn event(&self, session_id: &str, id: Option<&str>, event: RuntimeEvent);
    /// A request from the runtime; the answer goes back whatever it is.
    fn request(&self, request: RuntimeRequest) -> RuntimeReplyFuture;
}

/// Types what the runtime sends and hands it to the bridge; unsupported
/// requests are answered -32601 at once, so nothing stays pending.
struct TypedInbound(Arc<dyn RuntimeHandler>);

impl InboundHandler for TypedInbound {
    fn request(&self, method: &str, params: Value) -> Answer {
        match RuntimeRequest::parse(method, params) {
            Ok(r) => {
                let reply = self.0.request(r);
                Answer::Later(Box::pin(async move {
                    serde_json::to_value(reply.await)
                        .map_err(|e| RpcError::new(ErrorCode::InternalError, e.to_string()))
                }))
            }
            Err(m) => {
                m.report();
                Answer::Now(Err(match m.kind {
                    MismatchKind::UnknownRequest => RpcError::method_not_found(method),
                    _ => RpcError::new(
                        ErrorCode::InvalidParams,
                        format!("invalid params: {}", m.detail),
                    ),
                }))
            }
        }
    }

    fn notification(&self, method: &str, params: Value) {
        if method == SESSION_EVENT {
            // Events carry prompt text: their data only at trace.
            trace!(event = %params, "runtime event");
            match RuntimeEvent::parse(params) {
                Ok(a) => self.0.event(&a.session_id, a.id.as_deref(), a.event),
                Err(m) => m.report(),
            }
        } else {
            debug!(method, "runtime notification ignored");
        }
    }
}

pub struct RuntimeConn {
    peer: Arc<Peer>,
    /// Cancelled when the connection ends (EOF, bad frame, write failure).
    closed: CancellationToken,
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

    /// Calls method `M` within the call timeout.
    pub async fn call<M: Method>(&self, params: &M::Params) -> Result<M::Result, CallError> {
        self.call_within::<M>(params, self.call_timeout).await
    }

    /// Calls method `M`, waiting at most `timeout`. A result not as the
    /// schema says, or the method unknown to the runtime, is a counted
    /// mismatch (and the call fails).
    pub async fn call_within<M: Method>(
        &self,
        params: &M::Params,
        timeout: Duration,
    ) -> Result<M::Result, CallError> {
        let answered = match self.peer.call_sized(M::NAME, params, timeout).await {
            Ok(a) => a,
            Err(CallError::Rpc(e)) if e.is(ErrorCode::MethodNotFound) => {
                Mismatch::new(
                    MismatchKind::UnknownMethod,
                    M::NAME,
                    "the runtime has no such method",
                )
                .report();
                return Err(CallError::Rpc(e));
            }
            Err(e) => return Err(e),
        };
        serde_path_to_error::deserialize(answered.value).map_err(|e| {
            let m = Mismatch::parse(M::NAME, e);
            m.report();
            CallError::Rpc(RpcError::new(
                ErrorCode::InternalError,
                format!(
                    "the runtime's answer is not as its schema says: {}",
                    m.detail
                ),
            ))
        })
    }

    /// A liveness check: `ping` within `timeout`.
    pub async fn ping(&self, timeout: Duration) -> Result<(), CallError> {
        let params = s::PingParams { message: None };
        self.call_within::<calls::Ping>(&params, timeout)
            .await
            .map(drop)
    }

    /// Whether the connection still stands (no EOF, bad frame or write failure).
    pub fn is_open(&self) -> bool {
        !self.closed.is_cancelled()
    }

    /// Ends when the connection does.
    pub async fn closed(&self) {
        self.closed.cancelled().await
    }

    /// A token cancelled when the connection ends.
    pub fn closed_token(&self) -> CancellationToken {
        self.closed.clone()
    }

    /// `connect` (with the token), falling back to `ping` on older runtimes;
    /// refuses any protocol version but 3. Returns the runtime's version.
    pub async fn handshake(&self, token: Option<&str>) -> Result<String, RuntimeError> {
        let params = calls::ConnectParams {
            token: token.map(String::from),
        };
        let (protocol, version) = match self
            .peer
            .call_sized(calls::Connect::NAME, &params, self.call_timeout)
            .await
        {
            Ok(a) => {
                let r: s::ConnectResult =
                    serde_path_to_error::deserialize(a.value).map_err(|e| {
                        let m = Mismatch::parse(calls::Connect::NAME, e);
                        m.report();
                        RuntimeError::ConnectAnswer(m.detail.clone())
                    })?;
                (r.protocol_version.get(), r.version)
            }
            Err(CallError::Rpc(e)) if e.is(ErrorCode::MethodNotFound) => {
                let ping = s::PingParams {
                    message: Some("ahp-copilot-bridge".into()),
                };
                let r = self
                    .call::<calls::Ping>(&ping)
                    .await
                    .map_err(|e| RuntimeError::Ping(e.to_string()))?;
                (r.protocol_version.get(), "unknown".to_owned())
            }
            Err(e) => return Err(RuntimeError::ConnectCall(e.to_string())),
        };
        if protocol != PROTOCOL_VERSION {
            return Err(RuntimeError::Protocol {
                found: protocol,
                speaks: PROTOCOL_VERSION,
            });
        }
        Ok(version)
    }

    pub fn close(&self) {
        self.closed.cancel();
        self.peer.close();
    }
}
