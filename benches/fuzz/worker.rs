//! One fuzzing connection: an official `ahp` client with a home session
//! that lives the whole run (its chat gets most messages, as the issue's
//! fuzzer's one chat did) and sessions it creates and disposes, so the
//! sessions it holds stay about its share; beside it a raw WebSocket for
//! frames the official client cannot send. Every wait has a deadline; a
//! connection that fails or closes is opened again.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ahp::{Client, ClientError};
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::messages::{self, active_client, Rng};
use crate::support::chat_of;
use crate::support::process::{try_connect_as, TOKEN};

/// How long any one request or send may take before the connection is
/// given up and opened again.
const WAIT: Duration = Duration::from_secs(10);

/// What every worker has done, counted together.
#[derive(Default)]
pub(crate) struct Stats {
    pub valid: AtomicU64,
    pub mutated: AtomicU64,
    pub requests: AtomicU64,
    pub garbage: AtomicU64,
    pub created: AtomicU64,
    pub disposed: AtomicU64,
    /// Requests the bridge refused with a JSON-RPC error.
    pub refused: AtomicU64,
    /// Connections given up on purpose (a client that goes and comes back).
    pub dropped: AtomicU64,
    /// Connections given up as failed: closed by the bridge, or a request
    /// or send without an answer within its deadline.
    pub failed: AtomicU64,
    /// Raw connections opened again (the bridge closed the last one).
    pub raw_reopened: AtomicU64,
    /// Transform requests the clients answered.
    pub transforms: AtomicU64,
}

impl Stats {
    pub(crate) fn sent(&self) -> u64 {
        [&self.valid, &self.mutated, &self.requests, &self.garbage]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
}

fn add(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

type RawSink = SplitSink<WebSocketStream<MaybeTlsStream<TcpStream>>, Message>;

/// The raw connection's sending half; a task reads (and drops) what comes back.
struct Raw {
    tx: RawSink,
    reader: tokio::task::JoinHandle<()>,
}

pub(crate) struct Worker {
    addr: SocketAddr,
    rng: Rng,
    /// The clientId, the same on every connection, so the sessions'
    /// active-client entries keep naming it.
    id: String,
    home: String,
    /// The sessions it created and has not disposed (not the home one).
    held: Vec<String>,
    target: usize,
    n: u64,
    c: Option<Client>,
    raw: Option<Raw>,
    home_created: bool,
    stats: Arc<Stats>,
    end: Instant,
}

/// Whether an error is the bridge refusing (the connection is fine): the
/// official client reports its connection closing under a request as a
/// JSON-RPC error too.
fn refused(e: &ClientError) -> bool {
    match e {
        ClientError::Rpc(e) => {
            !(e.code == -32000
                && ["transport closed", "client shut down"].contains(&e.message.as_str()))
        }
        _ => false,
    }
}

impl Worker {
    pub(crate) fn new(
        w: usize,
        addr: SocketAddr,
        seed: u64,
        target: usize,
        stats: Arc<Stats>,
        end: Instant,
    ) -> Self {
        Self {
            addr,
            rng: Rng::new(seed ^ (w as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            id: format!("fuzz-{w}"),
            home: format!("ahp-session:/fuzz-home-{w}"),
            held: Vec::new(),
            target,
            n: 0,
            c: None,
            raw: None,
            home_created: false,
            stats,
            end,
        }
    }

    pub(crate) async fn run(mut self) {
        while Instant::now() < self.end {
            if self.c.is_none() {
                match self.open().await {
                    Some(c) => self.c = Some(c),
                    // Refused or the bridge is busy (the old connection may
                    // still hold the clientId): again shortly.
                    None => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                }
            }
            if let Err(on_purpose) = self.step().await {
                add(if on_purpose {
                    &self.stats.dropped
                } else {
                    &self.stats.failed
                });
                if let Some(c) = self.c.take() {
                    let _ = tokio::time::timeout(WAIT, c.shutdown()).await;
                }
            }
        }
        if let Some(c) = self.c.take() {
            let _ = tokio::time::timeout(WAIT, c.shutdown()).await;
        }
    }

    /// The official client, initialized, answering transforms, its home
    /// session created (once) and watched.
    async fn open(&mut self) -> Option<Client> {
        let c = tokio::time::timeout(WAIT, try_connect_as(self.addr, TOKEN, &self.id))
            .await
            .ok()??;
        let stats = self.stats.clone();
        c.set_server_request_handler(move |_, p: Value| {
            let k = stats.transforms.fetch_add(1, Ordering::Relaxed);
            async move { messages::transform_answer(&p, k) }
        });
        if !self.home_created {
            let home = self.home.clone();
            self.call(&c, "createSession", create_params(&home, &self.id))
                .await
                .ok()?;
            self.home_created = true;
        }
        for ch in [self.home.clone(), chat_of(&self.home)] {
            self.call(&c, "subscribe", json!({"channel": ch}))
                .await
                .ok()?;
        }
        Some(c)
    }

    /// A request; `Err` when the connection failed (a refusal is counted, and fine).
    async fn call(&self, c: &Client, method: &str, params: Value) -> Result<bool, ()> {
        match tokio::time::timeout(WAIT, c.request::<_, Value>(method, params)).await {
            Ok(Ok(_)) => Ok(true),
            Ok(Err(e)) if refused(&e) => {
                add(&self.stats.refused);
                Ok(false)
            }
            _ => Err(()),
        }
    }

    /// One message (or, to keep the sessions held, a creation); `Err`
    /// when the connection is to be opened again (`true`: on purpose).
    async fn step(&mut self) -> Result<(), bool> {
        self.n += 1;
        let n = self.n;
        let c = self.c.clone().ok_or(false)?;
        // A round trip now and then: the bridge keeps up before more is sent.
        if n.is_multiple_of(100) {
            self.call(&c, "ping", json!({"channel": "ahp-root://"}))
                .await
                .map_err(|()| false)?;
        }
        if self.held.len() < self.target {
            return self.create(&c).await.map_err(|()| false);
        }
        let session = if self.held.is_empty() || self.rng.chance(50) {
            self.home.clone()
        } else {
            self.rng.pick(&self.held).clone()
        };
        let chat = chat_of(&session);
        let sent = match self.rng.below(1000) {
            0..=29 => self.dispose(&c).await,
            30..=579 => {
                let (on_chat, action) = messages::valid(&mut self.rng, &self.id, n);
                let channel = if on_chat { &chat } else { &session };
                add(&self.stats.valid);
                dispatch(
                    &c,
                    json!({"channel": channel, "clientSeq": n, "action": action}),
                )
                .await
            }
            580..=829 => {
                let (on_chat, action) = messages::valid(&mut self.rng, &self.id, n);
                let channel = if on_chat { &chat } else { &session };
                let params = json!({"channel": channel, "clientSeq": n, "action": action});
                // Mostly the action, sometimes the envelope around it.
                let params = if self.rng.chance(80) {
                    let mut p = params;
                    p["action"] = messages::mutate(&mut self.rng, p["action"].take(), n);
                    p
                } else {
                    messages::mutate(&mut self.rng, params, n)
                };
                add(&self.stats.mutated);
                dispatch(&c, params).await
            }
            830..=929 => self.request(&c, &chat, n).await,
            930..=998 => {
                add(&self.stats.garbage);
                self.garbage(n).await;
                Ok(())
            }
            // Dropped on purpose: a client that goes and comes back.
            _ => return Err(true),
        };
        sent.map_err(|()| false)
    }

    /// A request of [`messages::request`]'s; a `createSession` that made
    /// a session counts it as held.
    async fn request(&mut self, c: &Client, chat: &str, n: u64) -> Result<(), ()> {
        let (method, params) = messages::request(&mut self.rng, chat, n);
        add(&self.stats.requests);
        let made = self.call(c, &method, params).await;
        // Unanswered, it may have been made.
        if method == "createSession" && made != Ok(false) {
            self.held.push(messages::odd_session(n));
        }
        made.map(|_| ())
    }

    async fn create(&mut self, c: &Client) -> Result<(), ()> {
        let s = format!("ahp-session:/fuzz-{}-{}", self.id, self.n);
        let made = self
            .call(c, "createSession", create_params(&s, &self.id))
            .await;
        // Unanswered, it may have been made: held until disposed.
        if made != Ok(false) {
            self.held.push(s.clone());
        }
        if made? {
            add(&self.stats.created);
            self.call(c, "subscribe", json!({"channel": chat_of(&s)}))
                .await?;
        }
        Ok(())
    }

    async fn dispose(&mut self, c: &Client) -> Result<(), ()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let s = self.held.swap_remove(self.rng.below(self.held.len()));
        match self.call(c, "disposeSession", json!({"channel": s})).await {
            Ok(_) => {
                add(&self.stats.disposed);
                Ok(())
            }
            // Not known to be gone: still counted as held.
            Err(()) => {
                self.held.push(s);
                Err(())
            }
        }
    }

    /// A frame no client library sends, on the raw connection (opened
    /// again when the bridge closed it; now and then not initialized).
    async fn garbage(&mut self, n: u64) {
        if self.raw.as_ref().is_some_and(|r| r.reader.is_finished()) {
            self.raw = None;
        }
        if self.raw.is_none() {
            self.raw = self.open_raw(n).await;
        }
        let (bytes, binary) = messages::garbage(&mut self.rng, n);
        let msg = if binary {
            Message::binary(bytes)
        } else {
            Message::text(String::from_utf8(bytes).unwrap_or_default())
        };
        let Some(raw) = self.raw.as_mut() else { return };
        let sent = tokio::time::timeout(WAIT, raw.tx.send(msg)).await;
        if !matches!(sent, Ok(Ok(()))) {
            add(&self.stats.raw_reopened);
            self.raw = None;
        }
    }

    async fn open_raw(&mut self, n: u64) -> Option<Raw> {
        let url = format!("ws://{}/?tkn={TOKEN}", self.addr);
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(url))
            .await
            .ok()?
            .ok()?;
        let (mut tx, mut rx) = ws.split();
        let reader = tokio::spawn(async move { while let Some(Ok(_)) = rx.next().await {} });
        if self.rng.chance(70) {
            let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"channel": "ahp-root://", "protocolVersions": ["1.0.0"],
                           "clientId": format!("{}-raw-{n}", self.id)}});
            let sent = tokio::time::timeout(WAIT, tx.send(Message::text(init.to_string()))).await;
            if !matches!(sent, Ok(Ok(()))) {
                return None;
            }
        }
        Some(Raw { tx, reader })
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn create_params(session: &str, client_id: &str) -> Value {
    json!({"channel": session, "provider": "copilot", "activeClient": active_client(client_id)})
}

async fn dispatch(c: &Client, params: Value) -> Result<(), ()> {
    match tokio::time::timeout(WAIT, c.notify("dispatchAction", params)).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(()),
    }
}
