//! A long life at a fixed number of sessions (issue 44): one session
//! through TURNS turns, its client dropped and back every R turns, VmRSS
//! after every STEP turns; then every turn read back, before and after a
//! restart.
//!
//! The real binary (`serve --config`) with its state store, in front of a
//! fake runtime on TCP (`common::pipe`). One session; its client keeps the
//! chat's state as the official `ahp` reducers make it (a mirror, the
//! `serverSeq` it last saw with it). Each turn is a prompt of about 200
//! characters streamed back. Every R turns the client starts the turn, sees
//! it start, drops its connection and comes back on a new one with the AHP
//! `reconnect`, as the official client does: the odd ones with the last
//! `serverSeq` it saw (the bridge replays what it missed), the even ones as
//! a client that lost its state (`lastSeenServerSeq` 0: snapshots, once the
//! replay buffer has moved on). The turn must then end in the mirror, and
//! a mirror holding fewer turns than were made must have a
//! `turnsNextCursor`.
//!
//! Prints VmRSS and the time of the last STEP turns after every STEP, and
//! RSS(TURNS)/RSS(STEP): issue 44 bounds it at 1.15 for 10000 and 1000.
//! Then a fresh client reads the chat back whole: it subscribes and, while
//! the chat has a `turnsNextCursor`, calls `fetchTurns` with it and applies
//! the `chat/turnsLoaded` that answers, until TURNS turns are there, "t0"
//! first and in order; the same after SIGTERM and a start on the same
//! state store. Exits non-zero when a turn does not end, a reconnect fails
//! or a read-back is short.
//!
//! Run: cargo bench --bench long_life_rss [-- TURNS [R [STEP]]]
//! (defaults 10000, 100, 1000).

#[path = "../tests/support/mod.rs"]
mod support;

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ahp::reducers::apply_action_to_chat;
use ahp::{Client, ClientConfig, SessionSubscription, SubscriptionEvent};
use ahp_bridge_join::ScriptedModel;
use ahp_types::actions::{ActionEnvelope, StateAction};
use ahp_types::state::{ChatState, TurnState};
use common::mib;
use common::pipe::PipeRuntime;
use serde_json::{json, Value};
use support::e2e::ready_session;
use support::process::{connect, status_kib, BridgeProcess, LOAD_LIMITS, TOKEN};
use support::{chat_of, dispatch_raw, DEADLINE};

const SESSION: &str = "ahp-session:/long-life";
const CLIENT: &str = "long-life";
/// A turn on a chat of thousands may wait on the store: generous.
const TURN_DEADLINE: Duration = Duration::from_secs(120);

fn prompt(i: usize) -> String {
    format!(
        "Turn {i:06}: {}",
        "remember the quiet harbour at dawn. ".repeat(5)
    )
}

/// A request's answer within the deadline, or why not.
async fn within(c: &Client, method: &str, params: Value) -> Result<Value, String> {
    match tokio::time::timeout(DEADLINE, c.request::<_, Value>(method, params)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{method}: {e}")),
        Err(_) => Err(format!("{method}: no answer within {DEADLINE:?}")),
    }
}

/// The chat as a client holds it: the official reducers over a snapshot
/// and the actions after it.
struct Mirror {
    chat: String,
    state: ChatState,
    /// The last `serverSeq` seen: what a `reconnect` resumes from.
    seq: u64,
    /// `chat/turnsLoaded` actions applied.
    loaded: usize,
}

impl Mirror {
    /// From a snapshot `{resource, state, fromSeq}`.
    fn from_snapshot(chat: &str, snap: &Value) -> Result<Self, String> {
        let state = serde_json::from_value(snap["state"].clone())
            .map_err(|e| format!("the chat's snapshot is no ChatState: {e}"))?;
        Ok(Self {
            chat: chat.to_owned(),
            state,
            seq: snap["fromSeq"].as_u64().unwrap_or(0),
            loaded: 0,
        })
    }

    /// Applies an envelope it has not seen (a replay may repeat some);
    /// refusals (sent to their sender alone) change nothing.
    fn apply(&mut self, env: &ActionEnvelope) {
        if env.server_seq <= self.seq && env.server_seq != 0 {
            return;
        }
        self.seq = self.seq.max(env.server_seq);
        if env.channel != self.chat || env.rejection_reason.is_some() {
            return;
        }
        if matches!(env.action, StateAction::ChatTurnsLoaded(_)) {
            self.loaded += 1;
        }
        apply_action_to_chat(&mut self.state, &env.action);
    }

    /// Applies what arrives on `sub` until `done` holds of the state.
    async fn until(
        &mut self,
        sub: &mut SessionSubscription,
        deadline: Duration,
        what: &str,
        done: impl Fn(&Self) -> bool,
    ) -> Result<(), String> {
        let end = tokio::time::Instant::now() + deadline;
        while !done(self) {
            match tokio::time::timeout_at(end, sub.recv()).await {
                Ok(Some(SubscriptionEvent::Action(env))) => self.apply(&env),
                Ok(Some(_)) => {}
                Ok(None) => return Err(format!("{what}: the connection closed")),
                Err(_) => return Err(format!("{what}: not within {deadline:?}")),
            }
        }
        Ok(())
    }

    /// The last turn ended is `id` (however it ended).
    fn ended(&self, id: &str) -> bool {
        self.state.active_turn.is_none() && self.state.turns.last().is_some_and(|t| t.id == id)
    }

    fn started(&self, id: &str) -> bool {
        self.state.active_turn.as_ref().is_some_and(|t| t.id == id) || self.ended(id)
    }
}

/// A client of the chat, its subscription and its mirror.
struct Life {
    addr: SocketAddr,
    c: Client,
    sub: SessionSubscription,
    m: Mirror,
    client_seq: i64,
    replays: usize,
    snapshots: usize,
}

/// The official client over a new WebSocket, not yet initialized; its
/// subscriptions hold more than the default so a burst is not skipped.
async fn open(addr: SocketAddr) -> Client {
    let t = ahp_ws::WebSocketTransport::connect(&format!("ws://{addr}/?tkn={TOKEN}"))
        .await
        .expect("ws connect");
    let cfg = ClientConfig {
        subscription_buffer: 1 << 14,
        ..ClientConfig::default()
    };
    Client::connect(t, cfg).await.expect("client")
}

impl Life {
    async fn start(addr: SocketAddr) -> Self {
        let c = connect(addr, CLIENT).await;
        ready_session(&c, SESSION, None).await;
        let chat = chat_of(SESSION);
        let sub = c.attach_subscription(&chat).await;
        let snap = within(&c, "subscribe", json!({"channel": chat}))
            .await
            .unwrap();
        let m = Mirror::from_snapshot(&chat, &snap["snapshot"]).unwrap();
        Self {
            addr,
            c,
            sub,
            m,
            client_seq: 0,
            replays: 0,
            snapshots: 0,
        }
    }

    /// Turn `t{i}`; with `reconnect`, the connection dropped once it has
    /// started and the turn's end seen after a `reconnect` (`stale`: as a
    /// client that lost its state).
    async fn turn(&mut self, i: usize, reconnect: Option<bool>) -> Result<(), String> {
        let id = format!("t{i}");
        self.client_seq += 1;
        let chat = self.m.chat.clone();
        dispatch_raw(
            &self.c,
            &chat,
            self.client_seq,
            json!({"type": "chat/turnStarted", "turnId": id,
            "startedAt": jiff::Timestamp::now().to_string(),
            "message": {"text": prompt(i), "origin": {"kind": "user"}}}),
        )
        .await;
        if let Some(stale) = reconnect {
            self.m
                .until(&mut self.sub, TURN_DEADLINE, &id, |m| m.started(&id))
                .await?;
            self.reconnect(stale).await?;
            // A chat that holds fewer turns than were made says there are more.
            let st = &self.m.state;
            if st.turns.len() < i && st.turns_next_cursor.is_none() {
                return Err(format!(
                    "after the reconnect the chat holds {} of the {i} earlier turns and no turnsNextCursor",
                    st.turns.len()
                ));
            }
        }
        self.m
            .until(&mut self.sub, TURN_DEADLINE, &id, |m| m.ended(&id))
            .await?;
        match self.m.state.turns.last().map(|t| &t.state) {
            Some(TurnState::Complete) => Ok(()),
            other => Err(format!("turn {id} ended {other:?}")),
        }
    }

    /// Drops the connection and comes back with `reconnect` on a new one:
    /// a replay is applied past what the mirror has, snapshots replace it.
    async fn reconnect(&mut self, stale: bool) -> Result<(), String> {
        self.c.shutdown().await;
        let c = open(self.addr).await;
        let sub = c.attach_subscription(&self.m.chat).await;
        let last = if stale { 0 } else { self.m.seq };
        let params = json!({"channel": "ahp-root://", "clientId": CLIENT,
            "lastSeenServerSeq": last, "subscriptions": [self.m.chat]});
        // The bridge may not have seen the old connection close yet: its
        // clientId is then still in use, and the answer says so.
        let started = Instant::now();
        let answer = loop {
            match within(&c, "reconnect", params.clone()).await {
                Err(e) if e.contains("in use") && started.elapsed() < DEADLINE => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                other => break other?,
            }
        };
        let mut parts = vec![answer.clone()];
        if answer["type"] == "channels" {
            parts = answer["channels"].as_array().cloned().unwrap_or_default();
        }
        for part in parts {
            if let Some(actions) = part["actions"].as_array() {
                self.replays += 1;
                for a in actions {
                    let env: ActionEnvelope = serde_json::from_value(a.clone())
                        .map_err(|e| format!("a replayed action: {e}: {a}"))?;
                    self.m.apply(&env);
                }
            }
            let snaps = part["snapshots"].as_array().cloned();
            let snaps =
                snaps.unwrap_or_else(|| part.get("snapshot").cloned().into_iter().collect());
            let chat = self.m.chat.clone();
            for s in snaps.iter().filter(|s| s["resource"] == chat) {
                self.snapshots += 1;
                self.m = Mirror::from_snapshot(&chat, s)?;
            }
        }
        if answer["missing"].as_array().is_some_and(|m| !m.is_empty()) {
            return Err(format!("reconnect: channels missing: {answer}"));
        }
        self.c = c;
        self.sub = sub;
        Ok(())
    }
}

/// A fresh client reads the chat back whole: the snapshot, then pages of
/// older turns while there is a cursor; TURNS turns, t0 first, in order.
async fn read_back(
    addr: SocketAddr,
    chat: &str,
    turns: usize,
    who: &str,
) -> Result<String, String> {
    let c = connect(addr, who).await;
    let mut sub = c.attach_subscription(chat).await;
    let snap = within(&c, "subscribe", json!({"channel": chat})).await?;
    let mut m = Mirror::from_snapshot(chat, &snap["snapshot"])?;
    let in_snapshot = m.state.turns.len();
    let mut pages = 0;
    while let Some(cursor) = m.state.turns_next_cursor.clone() {
        if pages > turns {
            return Err(format!("still a cursor after {pages} pages"));
        }
        pages += 1;
        let loaded = m.loaded;
        within(&c, "fetchTurns", json!({"channel": chat, "cursor": cursor})).await?;
        // The host adds the page to the chat before it answers: the
        // `chat/turnsLoaded` is on its way, if not already applied.
        m.until(&mut sub, DEADLINE, "chat/turnsLoaded", |m| {
            m.loaded > loaded
        })
        .await?;
    }
    let ids: Vec<&str> = m.state.turns.iter().map(|t| t.id.as_str()).collect();
    if ids.len() != turns {
        return Err(format!(
            "{} turns read back ({in_snapshot} in the snapshot, {pages} pages), not {turns}; the first {:?}",
            ids.len(),
            ids.first()
        ));
    }
    if let Some((i, id)) = ids
        .iter()
        .enumerate()
        .find(|(i, id)| **id != format!("t{i}"))
    {
        return Err(format!("turn {i} read back is {id:?}, not \"t{i}\""));
    }
    c.shutdown().await;
    Ok(format!(
        "{turns} turns, \"t0\" first, in order ({in_snapshot} in the snapshot, {pages} pages fetched)"
    ))
}

/// Prints a read-back's outcome; false when it failed.
fn report(what: &str, outcome: &Result<String, String>) -> bool {
    match outcome {
        Ok(s) => println!("  {what:<26}: ok: {s}"),
        Err(e) => println!("  {what:<26}: FAILED: {e}"),
    }
    outcome.is_ok()
}

/// Ends the bench on a failed turn or reconnect, with the bridge's last
/// words; the bridge is killed first (`exit` runs no destructor, and a
/// bridge left running holds the bench's stdout open).
fn fail(b: &mut BridgeProcess, i: usize, e: &str) -> ! {
    let log = b.all_log_lines();
    let tail = &log[log.len().saturating_sub(20)..];
    let status = b.child.try_wait().ok().flatten();
    let _ = b.child.kill();
    let _ = b.child.wait();
    println!(
        "turn {i}: {e}\nthe bridge: {}\nits log ends:\n{}",
        status.map_or("running".to_owned(), |s| format!("exited, {s}")),
        tail.join("\n")
    );
    std::process::exit(1);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1).filter_map(|a| a.parse().ok());
    let turns: usize = args.next().unwrap_or(10000);
    let every: usize = args.next().unwrap_or(100).max(1);
    let step: usize = args.next().unwrap_or(1000).max(1);
    let model = ScriptedModel::start().await.unwrap();
    let fake = PipeRuntime::start().await;
    let dir = tempfile::tempdir().unwrap();
    let runtime_toml = format!("connect = \"{}\"", fake.addr);
    let start =
        || BridgeProcess::start_with_runtime(&model, dir.path(), LOAD_LIMITS, &runtime_toml, None);
    let mut b = start();
    let rss = |b: &BridgeProcess| status_kib(b.child.id(), "VmRSS");

    println!("{turns} turns on one session, its client reconnecting every {every}, store on");
    println!("  start                : VmRSS {}", mib(rss(&b)));
    let mut life = Life::start(b.addr).await;
    let (mut at_step, mut block) = (None, Instant::now());
    for i in 0..turns {
        let n = i + 1;
        let reconnect = n
            .is_multiple_of(every)
            .then_some((n / every).is_multiple_of(2));
        if let Err(e) = life.turn(i, reconnect).await {
            fail(&mut b, i, &e);
        }
        if n.is_multiple_of(step) {
            let now = rss(&b);
            at_step.get_or_insert(now);
            println!(
                "  after {n:>6} turns   : VmRSS {}  (peak {})  last {step} turns {:.2} s; \
                 reconnects: {} replayed, {} by snapshot; {} turns in the client's chat",
                mib(now),
                mib(status_kib(b.child.id(), "VmHWM")),
                block.elapsed().as_secs_f64(),
                life.replays,
                life.snapshots,
                life.m.state.turns.len(),
            );
            block = Instant::now();
        }
    }
    let end = rss(&b);
    match at_step {
        Some(first) if turns > step => println!(
            "  RSS({turns})/RSS({step}) = {:.3}  (issue 44's bound: at most 1.15)",
            end as f64 / first as f64
        ),
        _ => println!("  (no ratio: fewer than two steps of {step} turns)"),
    }
    let chat = life.m.chat.clone();
    life.c.shutdown().await;

    let mut ok = report(
        "read back",
        &read_back(b.addr, &chat, turns, "reader-1").await,
    );
    let status = b.signal_and_wait("TERM", Duration::from_secs(30));
    println!("  stopped (SIGTERM)         : {status}");
    drop(b);
    let b = start();
    println!("  started again, same store : VmRSS {}", mib(rss(&b)));
    ok &= report(
        "read back after restart",
        &read_back(b.addr, &chat, turns, "reader-2").await,
    );
    if !ok {
        drop(b);
        std::process::exit(1);
    }
}
