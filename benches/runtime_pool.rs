//! The runtime pool under load: 50 AHP sessions each take one turn at once,
//! and the time until every turn is done is compared between
//! `[runtime] processes = 1` and `processes = 2`.
//!
//! Both bridges are the real binary (`serve --config`) in front of the real
//! Copilot CLI, pointed at the scripted model on loopback (short replies);
//! each client is its own WebSocket connection. Both bridges run for the
//! whole bench; rounds alternate between them (after one warm-up round
//! each, not counted), so machine noise falls on both alike. Each round
//! creates 50 fresh sessions (not timed), starts their first turns at once,
//! and times until the last `chat/turnComplete`; then it disposes them.
//!
//! Besides wall time, each round reports CPU time from `/proc`: the
//! runtimes', the bridge's, and this process's (the 50 clients and the
//! scripted model), and how busy the machine's cores were, so the reader
//! can see what bounds the ratio.
//!
//! Run: cargo bench --bench runtime_pool [-- ROUNDS_PER_SETTING [SESSIONS]]

#[path = "../tests/support/mod.rs"]
mod support;

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ahp::Client;
use ahp_bridge_join::ScriptedModel;
use common::{busy_between, cpu_time, machine_ticks, ms, secs, thread_cpu};
use futures_util::future::join_all;
use serde_json::json;
use support::e2e::{ready_session, wait_turn_end};
use support::process::LOAD_LIMITS;
use support::process::{children_of, descendants};
use support::process::{connect, BridgeProcess};

struct Pool {
    processes: usize,
    bridge: BridgeProcess,
    clients: Vec<Client>,
    _dir: tempfile::TempDir,
}

/// One round's figures.
struct Round {
    processes: usize,
    all_done: Duration,
    p50_turn: Duration,
    /// What each runtime process used.
    runtimes: Vec<RuntimeUse>,
    bridge_cpu: Duration,
    bench_cpu: Duration,
    busy: f64,
}

/// One runtime's CPU counters: all of it (with anything it spawned), and
/// per thread.
struct RuntimeCpu {
    pid: u32,
    total: Duration,
    threads: Vec<(u32, String, Duration)>,
}

/// The CPU counters of each runtime under the bridge, by pid.
fn runtime_cpu(bridge_pid: u32) -> Vec<RuntimeCpu> {
    let mut out: Vec<RuntimeCpu> = children_of(bridge_pid)
        .into_iter()
        .map(|pid| {
            let d = descendants(pid).into_iter().map(cpu_time).sum::<Duration>();
            RuntimeCpu {
                pid,
                total: cpu_time(pid) + d,
                threads: thread_cpu(pid),
            }
        })
        .collect();
    out.sort_by_key(|r| r.pid);
    out
}

/// What one runtime used during a round: all of it, its main (JavaScript)
/// thread, and its busiest other threads by name.
struct RuntimeUse {
    total: Duration,
    main: Duration,
    /// Its other threads by name: how many, and their CPU time.
    others: Vec<(String, usize, Duration)>,
}

fn runtime_use(before: &[RuntimeCpu], after: &[RuntimeCpu]) -> Vec<RuntimeUse> {
    after
        .iter()
        .map(|a| {
            let b = before.iter().find(|b| b.pid == a.pid);
            let was = |tid: u32| {
                b.and_then(|b| b.threads.iter().find(|t| t.0 == tid))
                    .map_or(Duration::ZERO, |t| t.2)
            };
            let mut main = Duration::ZERO;
            let mut others: BTreeMap<String, (usize, Duration)> = BTreeMap::new();
            for (tid, name, d) in &a.threads {
                let used = d.saturating_sub(was(*tid));
                if *tid == a.pid {
                    main = used;
                } else {
                    let e = others.entry(name.clone()).or_default();
                    e.0 += 1;
                    e.1 += used;
                }
            }
            let mut others: Vec<(String, usize, Duration)> =
                others.into_iter().map(|(n, (k, d))| (n, k, d)).collect();
            others.sort_by_key(|o| std::cmp::Reverse(o.2));
            RuntimeUse {
                total: a
                    .total
                    .saturating_sub(b.map_or(Duration::ZERO, |b| b.total)),
                main,
                others,
            }
        })
        .collect()
}

/// Waits until the runtimes are quiet (less than 10 ms of CPU in 250 ms,
/// at most 15 s), so one round's leftovers do not fall into the next.
async fn settle(bridge_pid: u32) {
    let total = || {
        runtime_cpu(bridge_pid)
            .iter()
            .map(|r| r.total)
            .sum::<Duration>()
    };
    let start = Instant::now();
    let mut last = total();
    while start.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = total();
        if now.saturating_sub(last) < Duration::from_millis(10) {
            return;
        }
        last = now;
    }
}

impl Pool {
    async fn start(model: &ScriptedModel, processes: usize, sessions: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bridge = BridgeProcess::start_with_runtime(
            model,
            dir.path(),
            LOAD_LIMITS,
            &format!("processes = {processes}"),
            None,
        );
        let clients = join_all(
            (0..sessions).map(|k| async move { connect(bridge.addr, &format!("u{k}")).await }),
        )
        .await;
        Self {
            processes,
            bridge,
            clients,
            _dir: dir,
        }
    }

    async fn round(&self, name: &str) -> Round {
        let uris: Vec<String> = (0..self.clients.len())
            .map(|k| format!("{name}-{k}"))
            .collect();
        join_all(self.clients.iter().zip(&uris).map(|(c, id)| async move {
            ready_session(c, &format!("ahp-session:/{id}"), None).await
        }))
        .await;
        let mut subs = join_all(self.clients.iter().zip(&uris).map(|(c, id)| async move {
            c.subscribe(ahp_bridge_join::ahp::uri::chat_uri_of(&format!(
                "ahp-session:/{id}"
            )))
            .await
            .unwrap()
            .1
        }))
        .await;
        let pid = self.bridge.child.id();
        settle(pid).await;
        let (rt0, br0, me0, m0) = (
            runtime_cpu(pid),
            cpu_time(pid),
            cpu_time(std::process::id()),
            machine_ticks(),
        );
        let t0 = Instant::now();
        let ends = join_all(self.clients.iter().zip(&uris).zip(subs.iter_mut()).map(
            |((c, id), sub)| async move {
                let chat = ahp_bridge_join::ahp::uri::chat_uri_of(&format!("ahp-session:/{id}"));
                support::dispatch_raw(
                    c,
                    &chat,
                    1,
                    json!({"type": "chat/turnStarted", "turnId": "t1",
                    "startedAt": jiff::Timestamp::now().to_string(),
                    "message": {"text": "Say hello.", "origin": {"kind": "user"}}}),
                )
                .await;
                let end = wait_turn_end(sub, "t1").await;
                assert_eq!(end.kind, "complete", "{id}: {end:?}");
                t0.elapsed()
            },
        ))
        .await;
        let all_done = t0.elapsed();
        let (rt1, br1, me1, m1) = (
            runtime_cpu(pid),
            cpu_time(pid),
            cpu_time(std::process::id()),
            machine_ticks(),
        );
        let runtimes = runtime_use(&rt0, &rt1);
        drop(subs);
        join_all(self.clients.iter().zip(&uris).map(|(c, id)| async move {
            let session = format!("ahp-session:/{id}");
            let chat = ahp_bridge_join::ahp::uri::chat_uri_of(&session);
            for ch in [chat, session] {
                c.unsubscribe(ch).await.unwrap();
            }
            let _: serde_json::Value = c
                .request(
                    "disposeSession",
                    json!({"channel": format!("ahp-session:/{id}")}),
                )
                .await
                .unwrap();
        }))
        .await;
        let mut turns = ends;
        Round {
            processes: self.processes,
            all_done,
            p50_turn: common::pct(&mut turns, 0.5),
            runtimes,
            bridge_cpu: br1.saturating_sub(br0),
            bench_cpu: me1.saturating_sub(me0),
            busy: busy_between(m0, m1),
        }
    }
}

fn print_round(label: &str, r: &Round) {
    let rt: Duration = r.runtimes.iter().map(|u| u.total).sum();
    let per: Vec<String> = r.runtimes.iter().map(|u| secs(u.total)).collect();
    println!(
        "{label:<8} processes={}  all done {:>8}  turn p50 {:>8}  runtime CPU {:>7} [{}]  bridge CPU {:>7}  clients+model CPU {:>7}  cores busy {:>3.0}%",
        r.processes,
        ms(r.all_done),
        ms(r.p50_turn),
        secs(rt),
        per.join(" + "),
        secs(r.bridge_cpu),
        secs(r.bench_cpu),
        r.busy * 100.0
    );
    for (i, u) in r.runtimes.iter().enumerate() {
        let top: Vec<String> = u
            .others
            .iter()
            .take(4)
            .map(|(n, k, d)| format!("{k} x {n} {}", secs(*d)))
            .collect();
        println!(
            "           runtime {i}: main thread {} ({:.0}% of the wall time), other threads {} ({})",
            secs(u.main),
            u.main.as_secs_f64() / r.all_done.as_secs_f64() * 100.0,
            secs(u.total.saturating_sub(u.main)),
            top.join(", ")
        );
    }
}

/// The median; of an even count, the mean of the middle two.
fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let sessions: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(50);
    let model = ScriptedModel::start().await.unwrap();
    let one = Pool::start(&model, 1, sessions).await;
    let two = Pool::start(&model, 2, sessions).await;
    println!(
        "{sessions} sessions, one turn each at once; real Copilot CLI, scripted model on loopback; {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    print_round("warm-up", &one.round("w1").await);
    print_round("warm-up", &two.round("w2").await);
    let (mut ones, mut twos) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        // Alternate which goes first, so neither always follows the other.
        let order = if i % 2 == 0 {
            [&one, &two]
        } else {
            [&two, &one]
        };
        for p in order {
            let r = p.round(&format!("r{i}p{}", p.processes)).await;
            print_round(&format!("round {}", i + 1), &r);
            let rounds = if p.processes == 1 {
                &mut ones
            } else {
                &mut twos
            };
            rounds.push(r);
        }
    }
    let pairs: Vec<String> = ones
        .iter()
        .zip(&twos)
        .map(|(a, b)| format!("{:.2}", b.all_done.as_secs_f64() / a.all_done.as_secs_f64()))
        .collect();
    let summary = |rs: &[Round]| {
        let done = median(rs.iter().map(|r| r.all_done).collect());
        let mean = rs.iter().map(|r| r.all_done).sum::<Duration>() / rs.len() as u32;
        let cpu: Duration = rs.iter().flat_map(|r| &r.runtimes).map(|u| u.total).sum();
        let per_turn = cpu / (rs.len() * sessions) as u32;
        let busy = rs.iter().map(|r| r.busy).sum::<f64>() / rs.len() as f64;
        (done, mean, per_turn, busy)
    };
    let (d1, a1, c1, b1) = summary(&ones);
    let (d2, a2, c2, b2) = summary(&twos);
    for (n, d, a, c, b) in [(1, d1, a1, c1, b1), (2, d2, a2, c2, b2)] {
        println!(
            "processes={n}: all done median {} mean {}; runtime CPU per turn {}; cores busy {:.0}%",
            ms(d),
            ms(a),
            ms(c),
            b * 100.0
        );
    }
    println!(
        "ratio (2 vs 1): medians {:.2}, means {:.2}; per round {}",
        d2.as_secs_f64() / d1.as_secs_f64(),
        a2.as_secs_f64() / a1.as_secs_f64(),
        pairs.join(", ")
    );
}
