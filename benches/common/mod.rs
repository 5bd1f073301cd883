//! Shared by the benches: percentiles, what `/proc` says about a process's
//! CPU time and about the machine (a process's memory and children:
//! `tests/support/process.rs`), and a small
//! fake runtime that times requests at its end of the pipe ([`pipe`]).
#![allow(dead_code)]

pub(crate) mod pipe;
pub(crate) mod sdk_tap;

use std::time::Duration;

/// The `p` quantile (0..=1) of `v`, nearest rank.
pub(crate) fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

pub(crate) fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// CPU time (user + system, every thread) a live process has used, from
/// `/proc/PID/stat`; zero when it is gone.
pub(crate) fn cpu_time(pid: u32) -> Duration {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    // The command name may contain spaces: fields count from after its ')'.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return Duration::ZERO;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line; `rest` starts at field 3.
    let ticks: u64 = f[11].parse::<u64>().unwrap_or(0) + f[12].parse::<u64>().unwrap_or(0);
    Duration::from_secs_f64(ticks as f64 / clock_ticks_per_second())
}

pub(crate) fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// The machine's CPU counters from `/proc/stat`: (busy, all), in ticks of
/// every core together.
pub(crate) fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = stat.lines().next().unwrap_or_default();
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let all: u64 = v.iter().take(8).sum();
    // idle and iowait are fields 4 and 5.
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (all - idle, all)
}

/// How busy the machine's cores were between two [`machine_ticks`] readings
/// (1.0 = every core all the time).
pub(crate) fn busy_between(a: (u64, u64), b: (u64, u64)) -> f64 {
    let (busy, all) = (b.0 - a.0, b.1 - a.1);
    if all == 0 {
        0.0
    } else {
        busy as f64 / all as f64
    }
}

pub(crate) fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// CPU time of each thread of a live process, by thread id, with its name
/// (`/proc/PID/task/TID/stat`).
pub(crate) fn thread_cpu(pid: u32) -> Vec<(u32, String, Duration)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten();
    tasks
        .filter_map(|t| {
            let tid: u32 = t.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            let (head, rest) = stat.rsplit_once(')')?;
            let name = head.split_once('(')?.1.to_owned();
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks: u64 = f[11].parse::<u64>().ok()? + f[12].parse::<u64>().ok()?;
            Some((
                tid,
                name,
                Duration::from_secs_f64(ticks as f64 / clock_ticks_per_second()),
            ))
        })
        .collect()
}

/// What the benches' client answers to `systemMessageTransform`: every
/// section it is asked, with " (house style)" appended.
pub(crate) fn house_style(p: &serde_json::Value) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for (id, s) in p["sections"].as_object().unwrap() {
        let content = format!("{} (house style)", s["content"].as_str().unwrap());
        out.insert(id.clone(), serde_json::json!({ "content": content }));
    }
    serde_json::json!({ "sections": out })
}

/// When a bench client's handler last ran: splits a round trip (one at a
/// time) into its two legs, to the client and back from it.
pub(crate) static HANDLED_AT: std::sync::Mutex<Option<std::time::Instant>> =
    std::sync::Mutex::new(None);

/// The official client over `transport`, initialized as "bench", answering
/// transforms in house style (noting when in [`HANDLED_AT`]), with the
/// session `ahp-session:/bench` it opted in to `tone` and `guidelines` for.
pub(crate) async fn bench_client(transport: ahp_ws::WebSocketTransport) -> ahp::Client {
    use serde_json::{json, Value};
    let c = ahp::Client::connect(transport, ahp::ClientConfig::default())
        .await
        .unwrap();
    c.initialize("bench".into(), vec!["1.0.0".into()], vec![])
        .await
        .unwrap();
    c.set_server_request_handler(|_, p: Value| async move {
        *HANDLED_AT.lock().unwrap() = Some(std::time::Instant::now());
        Ok(house_style(&p))
    });
    let active = json!({"clientId": "bench", "tools": [],
                        "systemMessageTransform": {"sections": ["tone", "guidelines"]}});
    let _: Value = c
        .request(
            "createSession",
            json!({"channel": "ahp-session:/bench", "activeClient": active}),
        )
        .await
        .unwrap();
    c
}
