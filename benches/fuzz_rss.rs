//! Memory under a mutation fuzzer over the AHP socket (issue 44: "under
//! the same kind of fuzzing for 15 minutes, RSS at the end is at most
//! 1.15x RSS after 5 minutes").
//!
//! The real binary (`serve --config`) with its state store, in front of a
//! fake runtime on TCP (`common::pipe`) that answers every call and, for
//! the sessions created on it, asks `systemMessage.transform` every 20 ms
//! (the sessions' active client is opted in, and answers). CONNECTIONS
//! official clients (`fuzz/worker.rs`) each send, as fast as the bridge
//! takes them (a ping every 100): valid actions on their chats and
//! sessions (turns, drafts, working directories, config, pending messages,
//! truncations, active-client changes with the transform opt-in), mutated
//! variants of them, odd requests, and garbage frames on a raw socket
//! (`fuzz/messages.rs`); each has a home session for the whole run and
//! creates and disposes others so that about SESSIONS are held in all; a
//! connection that fails or closes is opened again.
//!
//! Prints, every 30 s, what was sent, the sessions the bridge holds (its
//! `ahp_bridge_sessions`), the transforms answered and VmRSS; then VmRSS at
//! SAMPLE seconds and at the end, and their ratio. Exits non-zero, with its
//! exit status and the end of its log, if the bridge dies.
//!
//! Run: cargo bench --bench fuzz_rss [-- SECONDS [SAMPLE [CONNECTIONS [SESSIONS [SEED]]]]]
//! (defaults 900, 300, 4, 50, 1).

#[path = "../tests/support/mod.rs"]
mod support;

mod common;

#[path = "fuzz/messages.rs"]
mod messages;
#[path = "fuzz/worker.rs"]
mod worker;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ahp_bridge_join::ScriptedModel;
use common::mib;
use common::pipe::{PipeConn, PipeRuntime};
use serde_json::json;
use support::process::{status_kib, BridgeProcess, LOAD_LIMITS};
use tokio::time::Instant;
use worker::{Stats, Worker};

/// Every report.
const EVERY: Duration = Duration::from_secs(30);
/// How long the workers and the runtime's asks may take to stop after the end.
const STOPPING: Duration = Duration::from_secs(30);

/// The runtime's transform requests: asked, answered (a result), refused
/// (an error), unanswered (none within the deadline).
#[derive(Default)]
struct Asked {
    asked: AtomicU64,
    answered: AtomicU64,
    refused: AtomicU64,
}

/// Plays the runtime's part in transforms on every connection the bridge
/// opens to the fake, until `end`.
async fn runtime_asks(mut fake: PipeRuntime, end: Instant, asked: Arc<Asked>) {
    let mut tasks = Vec::new();
    while Instant::now() < end {
        let wait = end.saturating_duration_since(Instant::now());
        if let Some(conn) = fake.try_next_conn(wait.min(Duration::from_secs(5))).await {
            tasks.push(tokio::spawn(ask_on(conn, end, asked.clone())));
        }
    }
    for t in tasks {
        let _ = tokio::time::timeout(STOPPING, t).await;
    }
}

/// Every 20 ms, `systemMessage.transform` for one of the last 64 sessions
/// created on `conn` (one at a time: the pipe has one request in flight).
async fn ask_on(mut conn: PipeConn, end: Instant, asked: Arc<Asked>) {
    let text = "Prefer small, reviewable changes; never run rm -rf. ".repeat(20);
    let sections = json!({"tone": {"content": text}, "guidelines": {"content": text},
                          "environment_context": {"content": text}});
    let mut recent: VecDeque<String> = VecDeque::new();
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let mut k = 0usize;
    while Instant::now() < end {
        tick.tick().await;
        let Some(ids) = conn.created_so_far() else {
            return;
        };
        for id in ids {
            recent.push_back(id);
            if recent.len() > 64 {
                recent.pop_front();
            }
        }
        if recent.is_empty() {
            continue;
        }
        k += 1;
        let id = &recent[k.wrapping_mul(7919) % recent.len()];
        let ask = json!({"sessionId": id, "sections": sections});
        asked.asked.fetch_add(1, Ordering::Relaxed);
        let answer = conn
            .try_ask("systemMessage.transform", ask, Duration::from_secs(10))
            .await;
        match answer {
            Some(a) if a.get("result").is_some() => &asked.answered,
            Some(_) => &asked.refused,
            None => continue,
        }
        .fetch_add(1, Ordering::Relaxed);
    }
}

/// A gauge or counter of the bridge's `/metrics` (no labels).
async fn metric(admin: SocketAddr, name: &'static str) -> Option<f64> {
    tokio::task::spawn_blocking(move || {
        let a = support::http::get(admin, "/metrics", &[]).ok()?;
        a.body
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    })
    .await
    .ok()
    .flatten()
}

/// Ends the bench when the bridge has died: its exit status and last words.
fn if_dead(b: &mut BridgeProcess) {
    let Ok(Some(status)) = b.child.try_wait() else {
        return;
    };
    let log = b.all_log_lines();
    let tail = &log[log.len().saturating_sub(30)..];
    println!(
        "THE BRIDGE DIED: {status}\nits log ends:\n{}",
        tail.join("\n")
    );
    std::process::exit(1);
}

fn load(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<u64>().ok());
    let secs = args.next().unwrap_or(900);
    let sample = args.next().unwrap_or(300);
    let connections = args.next().unwrap_or(4).max(1) as usize;
    let sessions = args.next().unwrap_or(50) as usize;
    let seed = args.next().unwrap_or(1);
    if sample == 0 || sample >= secs {
        eprintln!("SAMPLE ({sample} s) must be after the start and before the end ({secs} s)");
        std::process::exit(2);
    }
    if sessions < connections {
        eprintln!("SESSIONS ({sessions}) must be at least CONNECTIONS ({connections}): each has a home session");
        std::process::exit(2);
    }
    let model = ScriptedModel::start().await.unwrap();
    let fake = PipeRuntime::start().await;
    let dir = tempfile::tempdir().unwrap();
    let runtime_toml = format!("connect = \"{}\"", fake.addr);
    let mut b =
        BridgeProcess::start_with_runtime(&model, dir.path(), LOAD_LIMITS, &runtime_toml, None);
    let rss = |b: &BridgeProcess| status_kib(b.child.id(), "VmRSS");
    println!(
        "fuzzing for {secs} s: {connections} connections, about {sessions} sessions held, seed {seed}"
    );
    println!("  start   : VmRSS {}", mib(rss(&b)));

    let start = Instant::now();
    let end = start + Duration::from_secs(secs);
    let stats = Arc::new(Stats::default());
    let asked = Arc::new(Asked::default());
    let asks = tokio::spawn(runtime_asks(fake, end, asked.clone()));
    // The churned sessions shared out; each worker has a home one besides.
    let churned = sessions - connections;
    let workers: Vec<_> = (0..connections)
        .map(|w| {
            let share = churned / connections + usize::from(w < churned % connections);
            let worker = Worker::new(w, b.addr, seed, share, stats.clone(), end);
            tokio::spawn(worker.run())
        })
        .collect();

    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let (mut next_report, mut at_sample) = (EVERY, None);
    loop {
        tick.tick().await;
        if_dead(&mut b);
        let t = start.elapsed();
        if at_sample.is_none() && t >= Duration::from_secs(sample) {
            let now = rss(&b);
            at_sample = Some(now);
            println!(
                "  {:>5} s : VmRSS {} (the sample point)",
                t.as_secs(),
                mib(now)
            );
        }
        if t >= next_report || Instant::now() >= end {
            next_report += EVERY;
            let held = metric(b.admin, "ahp_bridge_sessions").await;
            println!(
                "  {:>5} s : sent {} ({} valid, {} mutated, {} requests, {} garbage), \
                 {} refused; sessions held {} ({} created, {} disposed); transforms {} asked, \
                 {} answered ({} by the clients), {} refused; connections dropped {}, failed {}, \
                 raw reopened {}; VmRSS {} (peak {})",
                t.as_secs(),
                stats.sent(),
                load(&stats.valid),
                load(&stats.mutated),
                load(&stats.requests),
                load(&stats.garbage),
                load(&stats.refused),
                held.map_or("?".to_owned(), |h| h.to_string()),
                load(&stats.created),
                load(&stats.disposed),
                load(&asked.asked),
                load(&asked.answered),
                load(&stats.transforms),
                load(&asked.refused),
                load(&stats.dropped),
                load(&stats.failed),
                load(&stats.raw_reopened),
                mib(rss(&b)),
                mib(status_kib(b.child.id(), "VmHWM")),
            );
        }
        if Instant::now() >= end {
            break;
        }
    }
    let at_end = rss(&b);
    for w in workers {
        if tokio::time::timeout(STOPPING, w).await.is_err() {
            println!("  (a worker did not stop within {STOPPING:?})");
        }
    }
    let _ = tokio::time::timeout(STOPPING, asks).await;
    if_dead(&mut b);
    let first = at_sample.unwrap_or(at_end);
    println!(
        "  VmRSS at {sample} s {}, at the end ({secs} s) {}: ratio {:.3} (issue 44's bound: at most 1.15)",
        mib(first),
        mib(at_end),
        at_end as f64 / first as f64
    );
    let status = b.signal_and_wait("TERM", Duration::from_secs(30));
    println!("  the bridge ran throughout; stopped by SIGTERM: {status}");
}
