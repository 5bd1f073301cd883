//! A fake Copilot runtime on TCP (`[runtime] connect`), for the faults the real
//! one cannot be made to show. It answers the calls a bridge needs as the
//! scenario `fixtures/fake-runtime/default.json` says, changed by further
//! scenarios ([`FakeRuntime::apply`]) or one method at a time
//! ([`FakeRuntime::set`]), and lets the test send anything: events, requests,
//! garbage bytes.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::fake_scenario::{fill, scenario, Reaction, Rule};
use super::DEADLINE;

/// What the fake does with one method.
#[derive(Clone)]
pub(crate) enum Answer {
    Reply(Value),
    /// A JSON-RPC error (code, message).
    Error(i64, &'static str),
    /// Never answer.
    Ignore,
}

impl From<Answer> for Reaction {
    fn from(a: Answer) -> Self {
        match a {
            Answer::Reply(v) => Reaction::Reply(v),
            Answer::Error(code, message) => Reaction::Error(code, message.into()),
            Answer::Ignore => Reaction::Ignore,
        }
    }
}

/// Method to rule; a method with none is never answered.
type Answers = Arc<Mutex<HashMap<String, Rule>>>;

pub(crate) struct FakeRuntime {
    pub addr: SocketAddr,
    answers: Answers,
    conns: tokio::sync::Mutex<mpsc::UnboundedReceiver<FakeConn>>,
}

/// One connection from the bridge.
pub(crate) struct FakeConn {
    out: mpsc::UnboundedSender<Vec<u8>>,
    /// Every message the bridge sent, in order (answered or not).
    incoming: mpsc::UnboundedReceiver<Value>,
}

fn frame(body: &str) -> Vec<u8> {
    format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

/// A `session.event` notification.
fn event_frame(session_id: &Value, ty: &str, data: Value) -> Vec<u8> {
    frame(&json!({"jsonrpc": "2.0", "method": "session.event",
        "params": {"sessionId": session_id, "event": {"id": uuid_like(), "type": ty, "data": data}}}).to_string())
}

/// What the fake sends for a call `msg` that `rule` answers: the answer
/// (unless ignored), then the rule's events.
fn react(rule: &Rule, msg: &Value) -> Vec<Vec<u8>> {
    let (id, params) = (&msg["id"], &msg["params"]);
    let mut out = Vec::new();
    match &rule.answer {
        Reaction::Ignore => {}
        Reaction::Error(code, message) => out.push(frame(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                .to_string(),
        )),
        Reaction::Reply(v) => out.push(frame(
            &json!({"jsonrpc": "2.0", "id": id, "result": fill(v, params)}).to_string(),
        )),
    }
    for e in &rule.emits {
        let session = match &e.session {
            Some(s) => json!(s),
            None => params["sessionId"].clone(),
        };
        out.push(event_frame(&session, &e.event_type, fill(&e.data, params)));
    }
    out
}

impl FakeRuntime {
    pub(crate) async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let answers: Answers = Arc::new(Mutex::new(
            scenario("default").rules.iter().cloned().collect(),
        ));
        let (tx, rx) = mpsc::unbounded_channel();
        let a = answers.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let (r, mut w) = sock.into_split();
                let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
                let (in_tx, in_rx) = mpsc::unbounded_channel();
                tokio::spawn(async move {
                    while let Some(b) = out_rx.recv().await {
                        if w.write_all(&b).await.is_err() {
                            break;
                        }
                    }
                });
                let (a, out) = (a.clone(), out_tx.clone());
                tokio::spawn(async move {
                    let mut r = BufReader::new(r);
                    while let Some(msg) = read_frame(&mut r).await {
                        if let (Some(_), Some(method)) = (msg.get("id"), msg["method"].as_str()) {
                            let rule = a.lock().unwrap().get(method).cloned();
                            for bytes in rule.map(|r| react(&r, &msg)).unwrap_or_default() {
                                let _ = out.send(bytes);
                            }
                        }
                        if in_tx.send(msg).is_err() {
                            break;
                        }
                    }
                });
                let _ = tx.send(FakeConn {
                    out: out_tx,
                    incoming: in_rx,
                });
            }
        });
        Self {
            addr,
            answers,
            conns: tokio::sync::Mutex::new(rx),
        }
    }

    /// From now on, `method` is answered so (on every connection), with no
    /// events after it.
    pub(crate) fn set(&self, method: &str, answer: Answer) {
        self.answers.lock().unwrap().insert(
            method.to_owned(),
            Rule {
                answer: answer.into(),
                emits: vec![],
            },
        );
    }

    /// From now on (on every connection), the methods that the scenario
    /// `fixtures/fake-runtime/NAME.json` names are answered as it says,
    /// events included; the others as before. `apply("default")` answers
    /// every method a bridge calls as at the start again.
    pub(crate) fn apply(&self, name: &str) {
        let mut answers = self.answers.lock().unwrap();
        for (method, rule) in &scenario(name).rules {
            answers.insert(method.clone(), rule.clone());
        }
    }

    /// The next connection from the bridge.
    pub(crate) async fn next_conn(&self) -> FakeConn {
        tokio::time::timeout(DEADLINE, async { self.conns.lock().await.recv().await })
            .await
            .expect("the bridge connects within the deadline")
            .expect("listener alive")
    }
}

async fn read_frame<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> Option<Value> {
    let mut len = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            len = v.trim().parse().ok();
        }
    }
    let mut body = vec![0; len?];
    r.read_exact(&mut body).await.ok()?;
    serde_json::from_slice(&body).ok()
}

impl FakeConn {
    pub(crate) fn send(&self, v: &Value) {
        let _ = self.out.send(frame(&v.to_string()));
    }

    pub(crate) fn send_raw(&self, bytes: &[u8]) {
        let _ = self.out.send(bytes.to_vec());
    }

    /// A `session.event` notification.
    pub(crate) fn event(&self, session_id: &str, ty: &str, data: Value) {
        let _ = self.out.send(event_frame(&json!(session_id), ty, data));
    }

    /// A `session.event` with the event id given: sent twice, a repeat.
    pub(crate) fn event_with_id(&self, session_id: &str, id: &str, ty: &str, data: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": "session.event",
            "params": {"sessionId": session_id, "event": {"id": id, "type": ty, "data": data}}}));
    }

    /// Waits for the next message `pick` accepts; others are skipped.
    pub(crate) async fn wait(&mut self, what: &str, mut pick: impl FnMut(&Value) -> bool) -> Value {
        tokio::time::timeout(DEADLINE, async {
            loop {
                let m = self.incoming.recv().await.expect("connection open");
                if pick(&m) {
                    return m;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
    }

    /// Waits for the bridge's call of `method`.
    pub(crate) async fn call_of(&mut self, method: &str) -> Value {
        self.wait(method, |m| m["method"] == method).await
    }

    /// Waits for the bridge's answer to our request `id`.
    pub(crate) async fn answer_to(&mut self, id: Value) -> Value {
        self.wait("an answer", |m| m["id"] == id && m.get("method").is_none())
            .await
    }

    /// Whether the bridge closed this connection (reads end).
    pub(crate) async fn closed(&mut self) -> bool {
        tokio::time::timeout(DEADLINE, async {
            while self.incoming.recv().await.is_some() {}
        })
        .await
        .is_ok()
    }
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("ev-{}", N.fetch_add(1, Ordering::Relaxed))
}
