//! The listener for SDK apps ([`listen`]), and one app's connection: its
//! own connection to a runtime of the pool, and every message passed on as
//! it came but what the bridge answers for: `connect` (the app's token
//! checked here; the runtime's own answer to the bridge's handshake given
//! back), `session.create` and `session.resume` (held to the policy, see
//! [`super::app_vet`]), the runtime's `systemMessage.transform` (routed to the
//! app through the router, with the policy's rules, its deadline and the
//! audit), and `session.lifecycle` (the runtime tells every connection of
//! every session; an app hears of its own only).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::app_clients::AppClients;
use super::app_conn::{lock, AppConn, AppReply, OWN_ID};
use super::gate_error::{OpenRuntimeError, SdkListenError};
use super::SdkGate;
use crate::ahp::tls::Tls;
use crate::bridge::turn::SHUTTING_DOWN;
use crate::runtime::ContentLengthCodec;
use crate::runtime::Reach;
use crate::runtime::{AboutSession, AppConnectParams, AppSend, Envelope};
use crate::runtime::{RuntimeAnswer, RuntimeRequest};
use crate::telemetry::{metrics, Causes, Escaped, Refusal};

/// Frames queued to one side before a reader waits; a side that does not
/// read for `[runtime] call_timeout` with the queue full is cut off.
const QUEUE: usize = 256;

/// A JSON-RPC error answer to `id`, as the wire carries it.
fn error_frame(id: &RawValue, code: i64, message: &str, data: Option<Value>) -> String {
    let mut error = json!({"code": code, "message": message});
    if let Some(d) = data {
        error["data"] = d;
    }
    format!(r#"{{"jsonrpc":"2.0","id":{},"error":{}}}"#, id.get(), error)
}

fn result_frame(id: &RawValue, result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#, id.get())
}

/// Listens on `[sdk] listen` until `stop`; once `draining` (SIGTERM's
/// drain), a new connection is closed at once (an app, or a load balancer
/// in front, then tries another bridge) while open ones go on, until the
/// bridge's stop ends them ([`SdkGate::stop`]). Returns the address bound.
pub(crate) async fn listen(
    gate: Arc<SdkGate>,
    stop: CancellationToken,
    draining: CancellationToken,
) -> Result<(SocketAddr, JoinHandle<()>), SdkListenError> {
    let at = gate.settings.sdk.listen;
    let listener = TcpListener::bind(at)
        .await
        .map_err(|source| SdkListenError::Bind { addr: at, source })?;
    let addr = listener.local_addr().map_err(SdkListenError::LocalAddr)?;
    let tls = match &gate.settings.sdk.tls {
        Some(t) => {
            let tls = Tls::load(t, "sdk.tls")?;
            tls.watch(stop.clone());
            Some(tls)
        }
        None => None,
    };
    let slots = Arc::new(Semaphore::new(gate.settings.max_connections));
    let task = tokio::spawn(async move {
        loop {
            let (stream, peer) = tokio::select! {
                _ = stop.cancelled() => break,
                a = listener.accept() => match a {
                    Ok(a) => a,
                    Err(e) => { warn!("SDK accept failed: {e}"); continue }
                },
            };
            if draining.is_cancelled() {
                metrics().connection_refused(Refusal::Draining);
                debug!(%peer, "SDK connection refused: draining");
                continue;
            }
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                warn!(%peer, "SDK connection refused: [server] max_connections reached");
                continue;
            };
            let _ = stream.set_nodelay(true);
            let conn = gate.next_conn.fetch_add(1, Ordering::Relaxed);
            let (gate, tls) = (gate.clone(), tls.clone());
            tokio::spawn(async move {
                let _permit = permit;
                let peer = peer.to_string();
                match tls {
                    None => serve(gate, stream, conn, peer).await,
                    Some(tls) => {
                        let handshake = tokio::time::timeout(
                            gate.settings.handshake_timeout,
                            tls.acceptor().accept(stream),
                        )
                        .await;
                        match handshake {
                            Ok(Ok(s)) => serve(gate, s, conn, peer).await,
                            Ok(Err(e)) => debug!(%peer, "SDK TLS handshake failed: {e}"),
                            Err(_) => debug!(%peer, "SDK TLS handshake timed out"),
                        }
                    }
                }
            });
        }
    });
    Ok((addr, task))
}

/// Serves one app until it or its runtime goes.
pub(super) async fn serve<S>(gate: Arc<SdkGate>, io: S, conn: u64, peer: String)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let max = gate.settings.max_frame_bytes;
    let mut app = Framed::new(io, ContentLengthCodec::new(max));
    let client = format!("sdk:{conn}");
    // The app says who it is first, within the handshake deadline.
    let connect = match tokio::time::timeout(
        gate.settings.handshake_timeout,
        first_connect(&gate, &mut app),
    )
    .await
    {
        Ok(Some(id)) => id,
        Ok(None) => return,
        Err(_) => {
            debug!(%client, "SDK connection sent no connect within the handshake deadline");
            return;
        }
    };
    let (runtime, connected) = match open_runtime(&gate, conn).await {
        Ok(r) => r,
        Err(e) => {
            warn!(%client, "no runtime for an SDK connection: {}", Causes(&e));
            let frame = error_frame(
                &connect,
                -32603,
                &format!("the bridge has no runtime for this connection: {e}"),
                None,
            );
            let _ = app.send(frame).await;
            return;
        }
    };
    if app
        .send(result_frame(&connect, connected.get()))
        .await
        .is_err()
    {
        return;
    }
    info!(%client, peer = %Escaped(&peer), "SDK app connected");
    let (to_app, app_rx) = mpsc::channel(QUEUE);
    let (to_runtime, runtime_rx) = mpsc::channel(QUEUE);
    let shared = Arc::new(AppConn {
        client: client.clone(),
        to_app,
        to_runtime,
        sessions: Mutex::new(HashMap::new()),
        asks: Mutex::new(HashMap::new()),
        next_ask: AtomicU64::new(1),
        closed: CancellationToken::new(),
        finish: CancellationToken::new(),
        flush: CancellationToken::new(),
        ended_by_stop: Mutex::new(Vec::new()),
        send_timeout: gate.settings.call_timeout,
    });
    if !gate.conns().add(conn, shared.clone()) {
        return;
    }
    let (app_sink, app_stream) = app.split();
    let (rt_sink, rt_stream) = runtime.split();
    let writers = [
        tokio::spawn(write_all(app_sink, app_rx, shared.clone())),
        tokio::spawn(write_all(rt_sink, runtime_rx, shared.clone())),
    ];
    let from_runtime = tokio::spawn(from_runtime(gate.clone(), shared.clone(), rt_stream));
    from_app(&gate, &shared, app_stream, &connected).await;
    // The app is gone: what it started stops (its sessions stay on disk,
    // resumable), and the runtime connection closes.
    let sessions = shared.session_ids();
    // The bridge stops: a turn it ended is ended for the app too (it may
    // still be reading).
    let ended = std::mem::take(&mut *lock(&shared.ended_by_stop));
    for s in &ended {
        shared.turn_failed(s, "shutdown", SHUTTING_DOWN).await;
    }
    for s in &sessions {
        let abort = json!({"jsonrpc": "2.0", "id": format!("{OWN_ID}abort:{s}"), "method": "session.abort", "params": {"sessionId": s}});
        let _ = shared.runtime(abort.to_string()).await;
    }
    gate.mirror().app_gone(&sessions);
    // What is queued is written (each write within the send timeout), then
    // both sides close.
    shared.flush.cancel();
    let flushed = tokio::time::timeout(shared.send_timeout, async {
        for w in writers {
            let _ = w.await;
        }
    })
    .await;
    shared.closed.cancel();
    from_runtime.abort();
    if flushed.is_err() {
        debug!(%client, "an SDK connection's queue was not flushed in time");
    }
    lock(&shared.asks).clear();
    gate.conns().remove(conn);
    info!(%client, sessions = sessions.len(), "SDK app disconnected");
}

/// Reads frames until the app's `connect` with a good token; answers what
/// comes before it as the runtime would (-32002). `None`: it went away.
async fn first_connect<S>(
    gate: &SdkGate,
    app: &mut Framed<S, ContentLengthCodec>,
) -> Option<Box<RawValue>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        let frame = app.next().await?.ok()?;
        let env: Envelope = serde_json::from_slice(&frame).ok()?;
        let Some(id) = env.id else { continue };
        let id = id.to_owned();
        if env.method.as_deref() == Some("connect") {
            let p: AppConnectParams = env
                .params
                .and_then(|p| serde_json::from_str(p.get()).ok())
                .unwrap_or_default();
            if gate.token_matches(p.token.as_deref()) {
                return Some(id);
            }
            warn!("an SDK app gave a wrong or no connection token");
        }
        let refused = error_frame(&id, -32002, "AUTHENTICATION_FAILED", None);
        app.send(refused).await.ok()?;
    }
}

/// Connects to a runtime of the pool and does the runtime's handshake with
/// its token: the connection and the runtime's answer (what the app is
/// given for its own `connect`).
async fn open_runtime(
    gate: &SdkGate,
    conn: u64,
) -> Result<(Framed<TcpStream, ContentLengthCodec>, Box<RawValue>), OpenRuntimeError> {
    let reach: Reach = gate.reach(conn).await?;
    let after = gate.settings.call_timeout;
    let connect = |source| OpenRuntimeError::Connect {
        addr: reach.addr.clone(),
        source,
    };
    let stream = tokio::time::timeout(after, TcpStream::connect(reach.addr.as_str()))
        .await
        .map_err(|_| OpenRuntimeError::AcceptTimeout {
            addr: reach.addr.clone(),
            after,
        })?
        .map_err(connect)?;
    stream.set_nodelay(true).map_err(connect)?;
    let mut rt = Framed::new(
        stream,
        ContentLengthCodec::new(gate.settings.max_frame_bytes),
    );
    let id = format!("{OWN_ID}connect");
    let hello = json!({"jsonrpc": "2.0", "id": id, "method": "connect", "params": {"token": reach.token.as_ref().map(|t| t.0.as_str())}});
    rt.send(hello.to_string()).await?;
    let answer = tokio::time::timeout(gate.settings.call_timeout, async {
        while let Some(frame) = rt.next().await {
            let frame = frame?;
            let env: Envelope = serde_json::from_slice(&frame)?;
            if env.id.map(RawValue::get) != Some(&format!("\"{id}\"")) {
                continue;
            }
            if let Some(e) = env.error {
                return Err(OpenRuntimeError::Refused(e.get().to_owned()));
            }
            return env
                .result
                .map(|r| r.to_owned())
                .ok_or(OpenRuntimeError::NoResult);
        }
        Err(OpenRuntimeError::Closed)
    })
    .await
    .map_err(|_| OpenRuntimeError::AnswerTimeout(after))??;
    Ok((rt, answer))
}

/// Writes one side's queue until the connection is cut off, or, once it
/// is told its last frames are queued (`flush`), until the queue is empty.
async fn write_all<K>(mut sink: K, mut rx: mpsc::Receiver<String>, shared: Arc<AppConn>)
where
    K: futures_util::Sink<String> + Unpin,
{
    let (closed, flush) = (&shared.closed, &shared.flush);
    loop {
        tokio::select! {
            biased;
            _ = closed.cancelled() => break,
            next = rx.recv() => match next {
                Some(text) => if sink.send(text).await.is_err() { closed.cancel(); break },
                None => break,
            },
            _ = flush.cancelled() => break,
        }
    }
    let _ = sink.close().await;
}

/// The app's side: its requests, answers and notifications.
async fn from_app<R>(
    gate: &Arc<SdkGate>,
    shared: &Arc<AppConn>,
    mut stream: R,
    connected: &RawValue,
) where
    R: futures_util::Stream<Item = Result<bytes::BytesMut, crate::runtime::FrameError>> + Unpin,
{
    loop {
        let frame = tokio::select! {
            _ = shared.closed.cancelled() => return,
            _ = shared.finish.cancelled() => return,
            f = stream.next() => f,
        };
        let frame = match frame {
            Some(Ok(f)) => f,
            Some(Err(e)) => {
                warn!(client = %shared.client, "SDK app frame refused: {e}");
                return;
            }
            None => return,
        };
        let Ok(text) = String::from_utf8(frame.to_vec()) else {
            warn!(client = %shared.client, "SDK app sent a frame that is not UTF-8");
            return;
        };
        let env: Envelope = match serde_json::from_str(&text) {
            Ok(e) => e,
            Err(e) => {
                warn!(client = %shared.client, "SDK app sent a frame that is not JSON-RPC: {e}");
                return;
            }
        };
        let forward = match (env.method.as_deref(), env.id) {
            (Some("connect"), Some(id)) => {
                let p: AppConnectParams = env
                    .params
                    .and_then(|p| serde_json::from_str(p.get()).ok())
                    .unwrap_or_default();
                let frame = if gate.token_matches(p.token.as_deref()) {
                    result_frame(id, connected.get())
                } else {
                    error_frame(id, -32002, "AUTHENTICATION_FAILED", None)
                };
                shared.app(frame).await;
                continue;
            }
            (Some(m @ ("session.create" | "session.resume")), Some(id)) => {
                match gate.vet_session(shared, m, env.params).await {
                    Ok(Some(params)) => format!(
                        r#"{{"jsonrpc":"2.0","id":{},"method":"{m}","params":{}}}"#,
                        id.get(),
                        Value::Object(params)
                    ),
                    Ok(None) => text,
                    Err((message, data)) => {
                        shared
                            .app(error_frame(id, -32602, &message, Some(data)))
                            .await;
                        continue;
                    }
                }
            }
            (Some("session.send"), Some(_)) => {
                let send: Option<AppSend> =
                    env.params.and_then(|p| serde_json::from_str(p.get()).ok());
                if let Some(send) = send.filter(|s| shared.owns(&s.session_id)) {
                    gate.mirror().send(&send.session_id, &send.prompt);
                }
                text
            }
            (None, Some(id)) if is_own(id) => {
                let reply = match (env.result, env.error) {
                    (Some(r), _) => AppReply::Result(r.to_owned()),
                    _ => AppReply::Error,
                };
                if let Some(tx) = lock(&shared.asks).remove(own_key(id)) {
                    let _ = tx.send(reply);
                }
                continue;
            }
            _ => text,
        };
        if !shared.runtime(forward).await {
            return;
        }
    }
}

fn is_own(id: &RawValue) -> bool {
    id.get().starts_with(&format!("\"{OWN_ID}"))
}

fn own_key(id: &RawValue) -> &str {
    id.get().trim_matches('"')
}

/// The runtime's side: events and answers to the app, lifecycle notices of
/// the app's own sessions only, transforms through the router.
async fn from_runtime<R>(gate: Arc<SdkGate>, shared: Arc<AppConn>, mut stream: R)
where
    R: futures_util::Stream<Item = Result<bytes::BytesMut, crate::runtime::FrameError>> + Unpin,
{
    while let Some(frame) = stream.next().await {
        let Ok(frame) = frame else { break };
        let Ok(text) = String::from_utf8(frame.to_vec()) else {
            break;
        };
        let Ok(env) = serde_json::from_str::<Envelope>(&text) else {
            warn!(client = %shared.client, "the runtime sent a frame that is not JSON-RPC");
            break;
        };
        match (env.method.as_deref(), env.id) {
            (Some("systemMessage.transform"), Some(id)) => {
                let id = id.to_owned();
                let params = env.params.map(|p| p.get()).unwrap_or("null");
                let mut de = serde_json::Deserializer::from_str(params);
                let ask = RuntimeRequest::parse("systemMessage.transform", &mut de);
                let (gate, shared) = (gate.clone(), shared.clone());
                tokio::spawn(async move {
                    let answer = match ask {
                        Ok(RuntimeRequest::Transform {
                            session_id,
                            sections,
                        }) => {
                            let clients = AppClients::new(shared.clone(), gate.principal());
                            let out = gate
                                .router()
                                .route(&clients, &session_id, &session_id, &sections)
                                .await;
                            RuntimeAnswer::Transformed(out)
                        }
                        Ok(_) => return,
                        Err(m) => {
                            m.report();
                            let why = format!("{}: {}", m.place, m.detail);
                            shared.runtime(error_frame(&id, -32602, &why, None)).await;
                            return;
                        }
                    };
                    let result = serde_json::to_string(&answer).unwrap_or_else(|_| "null".into());
                    shared.runtime(result_frame(&id, &result)).await;
                });
                continue;
            }
            (Some("session.lifecycle"), None) => {
                let about: Option<AboutSession> =
                    env.params.and_then(|p| serde_json::from_str(p.get()).ok());
                let mine = about
                    .and_then(|a| a.session_id)
                    .is_some_and(|s| shared.owns(&s));
                if !mine {
                    continue;
                }
            }
            (None, Some(id)) if is_own(id) => continue,
            (Some("session.event"), None) => {
                if let Some(p) = env.params {
                    gate.mirror().event(p);
                }
            }
            _ => {}
        }
        if !shared.app(text).await {
            break;
        }
    }
    shared.closed.cancel();
}
