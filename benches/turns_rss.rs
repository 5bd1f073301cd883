//! What grows with traffic at a fixed number of sessions (issue 44).
//!
//! The real binary (`serve --config`) with its state store, in front of a
//! fake runtime on TCP (`common::pipe`), a fresh bridge for each run. One
//! session; one client subscribed to its chat once. Phase 1 runs TURNS
//! turns (a prompt of about 200 characters streamed back as the answer) and
//! prints VmRSS and the time of each tenth of them, then the chat's snapshot
//! size; then the same again with the chat truncated (`chat/truncated`,
//! every turn dropped) after every 100 turns: what differs is what the
//! turns kept in the chat state cost. Phase 2 sends, on one session,
//! MESSAGES client actions of each of three kinds that the reducers keep
//! (a new working directory each, a new session config key each) or replace
//! (a draft): the RSS after each kind says which ones grow.
//!
//! Run: cargo bench --bench turns_rss [-- TURNS [MESSAGES]]

#[path = "../tests/support/mod.rs"]
mod support;

mod common;

use std::time::Instant;

use ahp::SessionSubscription;
use ahp_bridge_join::ScriptedModel;
use ahp_types::actions::StateAction;
use common::mib;
use common::pipe::PipeRuntime;
use serde_json::{json, Value};
use support::e2e::{ready_session, wait_action_within};
use support::process::{connect, status_kib, BridgeProcess, LOAD_LIMITS};
use support::{chat_of, dispatch_raw, raw_subscribe};

const SESSION: &str = "ahp-session:/grow";

fn prompt(i: usize) -> String {
    format!(
        "Turn {i:06}: {}",
        "remember the quiet harbour at dawn. ".repeat(5)
    )
}

/// Starts turn `i` on the chat and waits, on the one subscription, for its end.
async fn turn(c: &ahp::Client, sub: &mut SessionSubscription, chat: &str, i: usize) {
    let id = format!("t{i}");
    dispatch_raw(
        c,
        chat,
        i as i64,
        json!({"type": "chat/turnStarted", "turnId": id,
        "startedAt": jiff::Timestamp::now().to_string(),
        "message": {"text": prompt(i), "origin": {"kind": "user"}}}),
    )
    .await;
    let ended = wait_action_within(sub, std::time::Duration::from_secs(90), |a| match a {
        StateAction::ChatTurnComplete(d) if d.turn_id == id => Some(true),
        StateAction::ChatError(e) if e.turn_id == id => Some(false),
        StateAction::ChatTurnCancelled(d) if d.turn_id == id => Some(false),
        _ => None,
    })
    .await;
    assert!(ended, "turn {id} did not complete");
}

/// The bytes of a channel's snapshot state, and the snapshot.
async fn snapshot(c: &ahp::Client, uri: &str) -> (usize, Value) {
    let snap = raw_subscribe(c, uri).await;
    let state = snap["snapshot"]["state"].clone();
    (state.to_string().len(), state)
}

/// A kind of client action: what it is, its channel ("chat" or the
/// session), the `i`th of them.
type Kind = (&'static str, &'static str, fn(usize) -> Value);

/// A fresh bridge with one ready session, its chat subscribed.
struct Run {
    b: BridgeProcess,
    c: ahp::Client,
    sub: SessionSubscription,
    chat: String,
    _dir: tempfile::TempDir,
}

impl Run {
    async fn start(model: &ScriptedModel, fake: &PipeRuntime) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let runtime_toml = format!("connect = \"{}\"", fake.addr);
        let b =
            BridgeProcess::start_with_runtime(model, dir.path(), LOAD_LIMITS, &runtime_toml, None);
        let c = connect(b.addr, "grow").await;
        ready_session(&c, SESSION, None).await;
        let chat = chat_of(SESSION);
        let (_, sub) = c.subscribe(chat.clone()).await.unwrap();
        Self {
            b,
            c,
            sub,
            chat,
            _dir: dir,
        }
    }

    fn rss(&self) -> u64 {
        status_kib(self.b.child.id(), "VmRSS")
    }

    /// `turns` turns; with `truncate`, the chat emptied after every 100.
    async fn turns(&mut self, turns: usize, truncate: bool) {
        println!("  start                : VmRSS {}", mib(self.rss()));
        let mut block = Instant::now();
        let step = (turns / 10).max(1);
        for i in 1..=turns {
            turn(&self.c, &mut self.sub, &self.chat, i).await;
            if truncate && i % 100 == 0 {
                dispatch_raw(&self.c, &self.chat, 0, json!({"type": "chat/truncated"})).await;
            }
            if i % step == 0 {
                println!(
                    "  after {i:>6} turns   : VmRSS {}  (peak {})  last {step} turns {:.2} s",
                    mib(self.rss()),
                    mib(status_kib(self.b.child.id(), "VmHWM")),
                    block.elapsed().as_secs_f64()
                );
                block = Instant::now();
            }
        }
        let (bytes, state) = snapshot(&self.c, &self.chat).await;
        let kept = state["turns"].as_array().map_or(0, Vec::len);
        println!(
            "  chat snapshot        : {} ({kept} turns in it); VmRSS {}",
            mib(bytes as u64 / 1024),
            mib(self.rss())
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1).filter_map(|a| a.parse().ok());
    let turns: usize = args.next().unwrap_or(1000);
    let messages: usize = args.next().unwrap_or(20000);
    let model = ScriptedModel::start().await.unwrap();
    let fake = PipeRuntime::start().await;

    println!("phase 1a: {turns} turns on one session, one subscriber, store on");
    Run::start(&model, &fake).await.turns(turns, false).await;
    println!("phase 1b: the same, the chat truncated after every 100 turns");
    Run::start(&model, &fake).await.turns(turns, true).await;

    println!("phase 2: {messages} client actions of each kind on one session");
    let run = Run::start(&model, &fake).await;
    let kinds: [Kind; 3] = [
        (
            "chat/draftChanged (replaces)",
            "chat",
            |i| json!({"type": "chat/draftChanged", "draft": {"text": format!("draft {i:08} {}", "x".repeat(64))}}),
        ),
        (
            "session/workingDirectorySet (refused past 64)",
            "session",
            |i| json!({"type": "session/workingDirectorySet", "directory": format!("file:///tmp/fuzz/{i:08}-{}", "d".repeat(48))}),
        ),
        (
            "session/configChanged (a new key each)",
            "session",
            |i| json!({"type": "session/configChanged", "config": {format!("k{i:08}-{}", "c".repeat(48)): "v"}}),
        ),
    ];
    for (what, on, action) in kinds {
        let before = run.rss();
        let channel = if on == "chat" {
            run.chat.clone()
        } else {
            SESSION.to_owned()
        };
        let t = Instant::now();
        for i in 0..messages {
            dispatch_raw(&run.c, &channel, i as i64, action(i)).await;
            // In steps, so the echoes never pile up past a client's queue.
            if i % 200 == 199 {
                if let Err(e) = run.c.request::<_, Value>("ping", json!({})).await {
                    let log = run.b.all_log_lines();
                    let tail = &log[log.len().saturating_sub(20)..];
                    panic!(
                        "ping after {i}: {e:?}; the bridge's log ends:\n{}",
                        tail.join("\n")
                    );
                }
            }
        }
        // One connection's messages are handled in order: the snapshot
        // answered after them shows them applied.
        let (bytes, state) = snapshot(&run.c, &channel).await;
        let dirs = state["workingDirectories"].as_array().map_or(0, Vec::len);
        let keys = state["config"]["values"].as_object().map_or(0, |o| o.len());
        println!(
            "  {what:<46}: VmRSS {} -> {}  snapshot {}  (dirs {dirs}, config keys {keys}) {:.1} s",
            mib(before),
            mib(run.rss()),
            mib(bytes as u64 / 1024),
            t.elapsed().as_secs_f64()
        );
    }
}
