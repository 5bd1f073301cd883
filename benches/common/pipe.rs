//! A fake runtime on TCP (`[runtime] connect`) that times requests at its
//! end of the pipe: from just before it writes a request frame to the
//! moment the answer frame is read and parsed, on a reader task that does
//! nothing else. It answers every call a bridge makes (protocol version 3;
//! `session.send` streams the prompt back and goes idle), so whatever
//! connects to it (the bridge, or a client answering directly) sees a
//! healthy runtime.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

pub(crate) struct PipeRuntime {
    pub addr: std::net::SocketAddr,
    conns: mpsc::UnboundedReceiver<PipeConn>,
}

/// One connection to the fake.
pub(crate) struct PipeConn {
    asks: mpsc::UnboundedSender<Ask>,
    /// The session ids the peer created or resumed, in order.
    created: mpsc::UnboundedReceiver<String>,
}

/// The time to an answer, measured at the pipe, and the answer.
type Answered = oneshot::Sender<(Duration, Value)>;

struct Ask {
    method: &'static str,
    params: Value,
    done: Answered,
}

pub(crate) fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// One Content-Length frame, parsed; None at EOF or on a bad frame.
pub(crate) async fn read_frame<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> Option<Value> {
    let mut len = None;
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.strip_prefix("Content-Length:") {
            len = v.trim().parse().ok();
        }
    }
    let mut body = vec![0; len?];
    r.read_exact(&mut body).await.ok()?;
    serde_json::from_slice(&body).ok()
}

/// What a healthy runtime answers to the calls a bridge makes.
fn answer(method: &str, params: &Value) -> Value {
    match method {
        "connect" | "ping" => {
            json!({"ok": true, "protocolVersion": 3, "version": "bench-pipe", "message": "pong"})
        }
        "session.create" | "session.resume" => json!({"sessionId": params["sessionId"]}),
        "session.send" => json!({"messageId": "m-echo"}),
        _ => json!({"success": true}),
    }
}

fn event(session: &Value, ty: &str, data: Value) -> Vec<u8> {
    static N: AtomicU64 = AtomicU64::new(0);
    let id = format!("ev-{}", N.fetch_add(1, Ordering::Relaxed));
    frame(
        json!({"jsonrpc": "2.0", "method": "session.event",
            "params": {"sessionId": session, "event": {"id": id, "type": ty, "data": data}}})
        .to_string()
        .as_bytes(),
    )
}

impl PipeRuntime {
    pub(crate) async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, conns) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                sock.set_nodelay(true).unwrap();
                let (asks_tx, asks) = mpsc::unbounded_channel();
                let (created_tx, created) = mpsc::unbounded_channel();
                tokio::spawn(serve(sock, asks, created_tx));
                let _ = tx.send(PipeConn {
                    asks: asks_tx,
                    created,
                });
            }
        });
        Self { addr, conns }
    }

    /// The next connection to the fake.
    pub(crate) async fn next_conn(&mut self) -> PipeConn {
        tokio::time::timeout(Duration::from_secs(20), self.conns.recv())
            .await
            .expect("a connection within 20 s")
            .expect("listener alive")
    }

    /// As [`Self::next_conn`], `None` when none comes within `wait`.
    pub(crate) async fn try_next_conn(&mut self, wait: Duration) -> Option<PipeConn> {
        tokio::time::timeout(wait, self.conns.recv())
            .await
            .ok()
            .flatten()
    }
}

impl PipeConn {
    /// Sends `method` as a request and returns the time to its answer,
    /// measured at the pipe, and the answer.
    pub(crate) async fn ask(&self, method: &'static str, params: Value) -> (Duration, Value) {
        let rx = self.send_ask(method, params).expect("connection alive");
        tokio::time::timeout(Duration::from_secs(20), rx)
            .await
            .expect("an answer within 20 s")
            .expect("connection alive")
    }

    /// As [`Self::ask`], the answer alone; `None` when the connection is
    /// gone or no answer comes within `wait` (a fuzzer goes on).
    pub(crate) async fn try_ask(
        &self,
        method: &'static str,
        params: Value,
        wait: Duration,
    ) -> Option<Value> {
        let rx = self.send_ask(method, params)?;
        let (_, answer) = tokio::time::timeout(wait, rx).await.ok()?.ok()?;
        Some(answer)
    }

    /// Queues the request; `None` when the connection is gone.
    fn send_ask(
        &self,
        method: &'static str,
        params: Value,
    ) -> Option<oneshot::Receiver<(Duration, Value)>> {
        let (done, rx) = oneshot::channel();
        let ask = Ask {
            method,
            params,
            done,
        };
        self.asks.send(ask).ok()?;
        Some(rx)
    }

    /// The session ids the peer created (or resumed) since the last call,
    /// without waiting; `None` when the connection is gone.
    pub(crate) fn created_so_far(&mut self) -> Option<Vec<String>> {
        let mut ids = Vec::new();
        loop {
            match self.created.try_recv() {
                Ok(id) => ids.push(id),
                Err(mpsc::error::TryRecvError::Empty) => return Some(ids),
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    return (!ids.is_empty()).then_some(ids)
                }
            }
        }
    }

    /// The next session id the peer created (or resumed).
    pub(crate) async fn created(&mut self) -> String {
        tokio::time::timeout(Duration::from_secs(20), self.created.recv())
            .await
            .expect("a session within 20 s")
            .expect("connection alive")
    }
}

async fn serve(
    sock: tokio::net::TcpStream,
    mut asks: mpsc::UnboundedReceiver<Ask>,
    created: mpsc::UnboundedSender<String>,
) {
    let (r, mut w) = sock.into_split();
    // The reader stamps each frame the moment it is parsed, so the timing
    // does not include a hop to this task.
    let (in_tx, mut inbound) = mpsc::unbounded_channel::<(Value, Instant)>();
    tokio::spawn(async move {
        let mut r = BufReader::new(r);
        while let Some(m) = read_frame(&mut r).await {
            if in_tx.send((m, Instant::now())).is_err() {
                break;
            }
        }
    });
    let mut next_id = 1_000_000u64;
    let mut pending: Option<(u64, Instant, Answered)> = None;
    loop {
        tokio::select! {
            m = inbound.recv() => {
                let Some((m, at)) = m else { break };
                if let Some(method) = m["method"].as_str() {
                    if from_peer(&mut w, method, &m, &created).await.is_err() {
                        break;
                    }
                } else if pending.as_ref().is_some_and(|(id, _, _)| m["id"] == *id) {
                    let (_, t0, done) = pending.take().unwrap();
                    let _ = done.send((at - t0, m));
                }
            }
            a = asks.recv() => {
                let Some(a) = a else { break };
                next_id += 1;
                let body = json!({"jsonrpc": "2.0", "id": next_id, "method": a.method, "params": a.params}).to_string();
                let bytes = frame(body.as_bytes());
                let t0 = Instant::now();
                pending = Some((next_id, t0, a.done));
                if w.write_all(&bytes).await.is_err() {
                    break;
                }
            }
        }
    }
}

/// Answers a call of the peer's (and streams a whole turn after a send).
async fn from_peer(
    w: &mut OwnedWriteHalf,
    method: &str,
    m: &Value,
    created: &mpsc::UnboundedSender<String>,
) -> std::io::Result<()> {
    let params = &m["params"];
    if let Some(id) = m.get("id") {
        let reply = json!({"jsonrpc": "2.0", "id": id, "result": answer(method, params)});
        w.write_all(&frame(reply.to_string().as_bytes())).await?;
    }
    match method {
        "session.create" | "session.resume" => {
            let _ = created.send(params["sessionId"].as_str().unwrap_or("").to_owned());
        }
        "session.send" => {
            let s = &params["sessionId"];
            let text = params["prompt"].clone();
            let mut out = event(
                s,
                "assistant.message_delta",
                json!({"messageId": "m-echo", "deltaContent": text}),
            );
            out.extend(event(
                s,
                "assistant.message",
                json!({"messageId": "m-echo", "content": text}),
            ));
            out.extend(event(s, "session.idle", json!({})));
            w.write_all(&out).await?;
        }
        _ => {}
    }
    Ok(())
}
