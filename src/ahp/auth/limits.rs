//! Per-principal rate limits, enforced: the one owner of their state (a
//! token bucket for turns and one for actions, per principal), held by the
//! host and keyed by principal name. Only configured principals have an
//! entry; anyone else (a connection whose principal a reload removed, while
//! it waits to close) shares one entry under the `[server]` defaults, so
//! memory is bounded by the config, never by what clients send.
//!
//! - `max_sessions`: the sessions a principal owns (created, not disposed),
//!   checked at `createSession` by the host, which counts them.
//! - `turns_per_minute`: `chat/turnStarted` and queued messages; a bucket of
//!   that many, refilled at that rate over a minute.
//! - `actions_per_second`: every `dispatchAction`, all of the principal's
//!   connections together; a bucket of `actions_burst`, refilled at that rate.
//!
//! Time is tokio's, so tests can pause it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::{Config, RateLimits};

/// Which limit refused something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    MaxSessions,
    TurnsPerMinute,
    ActionsPerSecond,
}

impl Limit {
    /// Its key, as the config names it (and the metric's label).
    pub fn key(self) -> &'static str {
        match self {
            Self::MaxSessions => "max_sessions",
            Self::TurnsPerMinute => "turns_per_minute",
            Self::ActionsPerSecond => "actions_per_second",
        }
    }
}

/// A refusal: the limit, what it is for this principal, when to retry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Limited {
    pub limit: Limit,
    pub retry_after: Option<Duration>,
    message: String,
}

impl Limited {
    fn new(limit: Limit, principal: &str, what: String, retry_after: Option<Duration>) -> Self {
        crate::telemetry::metrics().rate_limited(limit.key());
        let then = match retry_after {
            Some(d) => format!("; retry in {} s", seconds(d)),
            None => String::new(),
        };
        let message = format!(
            "rate limit {} ({what} for principal {principal:?}) reached{then}",
            limit.key()
        );
        Self {
            limit,
            retry_after,
            message,
        }
    }
}

/// A duration in seconds, rounded up to the millisecond, without trailing zeros.
fn seconds(d: Duration) -> String {
    let ms = d.as_nanos().div_ceil(1_000_000);
    let s = format!("{}.{:03}", ms / 1000, ms % 1000);
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A token bucket, kept as the time it would be full again (the generic
/// cell rate algorithm): each use costs `interval`, and a use is allowed
/// while that time is at most `burst - 1` intervals ahead. Exact, in
/// integer time.
#[derive(Debug, Clone)]
struct Bucket {
    interval: Duration,
    burst: u32,
    /// When the uses so far are paid off.
    paid_off: Instant,
}

impl Bucket {
    /// `burst` uses at once, then one per `interval`.
    fn new(burst: u32, interval: Duration, now: Instant) -> Self {
        Self {
            interval,
            burst,
            paid_off: now,
        }
    }

    /// `Ok` when a use is allowed now (nothing is taken), else how long until it is.
    fn check(&self, now: Instant) -> Result<(), Duration> {
        let ahead = self.paid_off.saturating_duration_since(now);
        let tolerance = self.interval * self.burst.saturating_sub(1);
        match ahead.checked_sub(tolerance) {
            Some(wait) if !wait.is_zero() => Err(wait),
            _ => Ok(()),
        }
    }

    fn take(&mut self, now: Instant) -> Result<(), Duration> {
        self.check(now)?;
        self.paid_off = self.paid_off.max(now) + self.interval;
        Ok(())
    }

    /// The same bucket under new figures: the uses it holds are kept, at
    /// the new cost.
    fn retuned(&self, new: Bucket, now: Instant) -> Bucket {
        let ahead = self.paid_off.saturating_duration_since(now);
        let used = ahead.as_secs_f64() / self.interval.as_secs_f64();
        Bucket {
            paid_off: now + new.interval.mul_f64(used),
            ..new
        }
    }
}

struct Entry {
    limits: RateLimits,
    turns: Bucket,
    actions: Bucket,
}

impl Entry {
    fn new(limits: RateLimits, now: Instant) -> Self {
        Self {
            turns: Bucket::new(
                limits.turns_per_minute,
                Duration::from_secs(60) / limits.turns_per_minute,
                now,
            ),
            actions: Bucket::new(
                limits.actions_burst,
                Duration::from_secs(1) / limits.actions_per_second,
                now,
            ),
            limits,
        }
    }
}

struct State {
    by_name: HashMap<String, Entry>,
    /// Anyone not configured (see the module's doc).
    others: Entry,
}

impl State {
    fn entry(&mut self, principal: &str) -> &mut Entry {
        match self.by_name.get_mut(principal) {
            Some(e) => e,
            None => &mut self.others,
        }
    }
}

/// Every principal's limits and what it has used of them.
pub struct Limits(Mutex<State>);

impl Limits {
    pub fn from_config(cfg: &Config) -> Self {
        let now = Instant::now();
        let by_name = cfg
            .all_rate_limits()
            .into_iter()
            .map(|(name, l)| (name, Entry::new(l, now)))
            .collect();
        let others = Entry::new(cfg.default_rate_limits(), now);
        Self(Mutex::new(State { by_name, others }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A reload: the principals and figures of `cfg`. A principal that stays
    /// keeps what it used (a reload is no way around a limit).
    pub fn replace(&self, cfg: &Config) {
        let now = Instant::now();
        let mut st = self.lock();
        let mut old = std::mem::take(&mut st.by_name);
        for (name, limits) in cfg.all_rate_limits() {
            let fresh = Entry::new(limits, now);
            let entry = match old.remove(&name) {
                Some(e) => Entry {
                    turns: e.turns.retuned(fresh.turns, now),
                    actions: e.actions.retuned(fresh.actions, now),
                    limits,
                },
                None => fresh,
            };
            st.by_name.insert(name, entry);
        }
        let others = Entry::new(cfg.default_rate_limits(), now);
        st.others = Entry {
            turns: st.others.turns.retuned(others.turns, now),
            actions: st.others.actions.retuned(others.actions, now),
            limits: others.limits,
        };
    }

    /// `Ok` unless `principal`, owning `owned` sessions, is at its `max_sessions`.
    pub fn check_sessions(&self, principal: &str, owned: usize) -> Result<(), Limited> {
        let max = self.lock().entry(principal).limits.max_sessions;
        if owned < max as usize {
            return Ok(());
        }
        let what = format!("{max} sessions; it owns {owned}, dispose one first");
        Err(Limited::new(Limit::MaxSessions, principal, what, None))
    }

    /// Takes one action of `principal`'s.
    pub fn take_action(&self, principal: &str) -> Result<(), Limited> {
        let mut st = self.lock();
        let e = st.entry(principal);
        e.actions.take(Instant::now()).map_err(|wait| {
            let l = e.limits;
            let what = format!(
                "{} a second, {} at once,",
                l.actions_per_second, l.actions_burst
            );
            Limited::new(Limit::ActionsPerSecond, principal, what, Some(wait))
        })
    }

    /// Whether `principal` may start a turn now (nothing is taken: see
    /// [`Self::take_turn`], once the turn is applied).
    pub fn check_turn(&self, principal: &str) -> Result<(), Limited> {
        let mut st = self.lock();
        let e = st.entry(principal);
        e.turns.check(Instant::now()).map_err(|wait| {
            let what = format!("{} a minute", e.limits.turns_per_minute);
            Limited::new(Limit::TurnsPerMinute, principal, what, Some(wait))
        })
    }

    /// A turn of `principal`'s started.
    pub fn take_turn(&self, principal: &str) {
        let _ = self.lock().entry(principal).turns.take(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(server: &str, principal: &str) -> Limits {
        let sha = "a".repeat(64);
        let text = format!(
            "[server]\n{server}\n[[principals]]\nname = \"ide\"\ntoken_sha256 = \"{sha}\"\n\
             roles = [\"participate\"]\n{principal}\n"
        );
        let cfg = Config::parse(&text).unwrap();
        cfg.validate().unwrap();
        Limits::from_config(&cfg)
    }

    #[tokio::test(start_paused = true)]
    async fn actions_burst_then_refill_at_their_rate_per_principal() {
        let l = limits("", "actions_per_second = 10\nactions_burst = 3");
        for _ in 0..3 {
            l.take_action("ide").unwrap();
        }
        let e = l.take_action("ide").unwrap_err();
        assert_eq!(e.limit, Limit::ActionsPerSecond);
        assert_eq!(e.retry_after, Some(Duration::from_millis(100)));
        let m = e.to_string();
        assert!(
            m.contains("actions_per_second")
                && m.contains("\"ide\"")
                && m.contains("retry in 0.1 s"),
            "{m}"
        );
        let exposed = crate::telemetry::metrics().encode(false);
        assert!(
            exposed.contains("limit=\"actions_per_second\""),
            "counted: {exposed}"
        );
        // Another principal (here: one nobody configured) has its own bucket.
        l.take_action("someone-else").unwrap();
        tokio::time::advance(Duration::from_millis(99)).await;
        assert!(l.take_action("ide").is_err(), "not yet");
        tokio::time::advance(Duration::from_millis(1)).await;
        l.take_action("ide").unwrap();
        // Idle for long, it holds the burst again and no more.
        tokio::time::advance(Duration::from_secs(60)).await;
        for _ in 0..3 {
            l.take_action("ide").unwrap();
        }
        assert!(l.take_action("ide").is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn turns_are_checked_then_taken_and_refill_over_the_minute() {
        let l = limits("turns_per_minute = 2", "");
        l.check_turn("ide").unwrap();
        l.take_turn("ide");
        l.check_turn("ide").unwrap();
        l.check_turn("ide").unwrap();
        l.take_turn("ide");
        let e = l.check_turn("ide").unwrap_err();
        assert_eq!(e.limit, Limit::TurnsPerMinute);
        assert_eq!(e.retry_after, Some(Duration::from_secs(30)));
        assert!(e.to_string().contains("retry in 30 s"), "{e}");
        tokio::time::advance(Duration::from_secs(30)).await;
        l.check_turn("ide").unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn sessions_are_refused_at_the_maximum_without_a_retry_time() {
        let l = limits("max_sessions = 5", "max_sessions = 2");
        l.check_sessions("ide", 1).unwrap();
        let e = l.check_sessions("ide", 2).unwrap_err();
        assert_eq!((e.limit, e.retry_after), (Limit::MaxSessions, None));
        assert!(e.to_string().contains("max_sessions"), "{e}");
        l.check_sessions("someone-else", 4).unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_reload_keeps_what_a_principal_used() {
        let l = limits("", "actions_per_second = 1\nactions_burst = 2");
        l.take_action("ide").unwrap();
        l.take_action("ide").unwrap();
        let sha = "a".repeat(64);
        let text = format!(
            "[[principals]]\nname = \"ide\"\ntoken_sha256 = \"{sha}\"\nroles = [\"participate\"]\n\
             actions_per_second = 1\nactions_burst = 5\n"
        );
        l.replace(&Config::parse(&text).unwrap());
        for _ in 0..3 {
            l.take_action("ide").unwrap();
        }
        assert!(l.take_action("ide").is_err(), "the two it used stay used");
        tokio::time::advance(Duration::from_secs(10)).await;
        for _ in 0..5 {
            l.take_action("ide").unwrap();
        }
        assert!(l.take_action("ide").is_err(), "the new burst applies");
    }

    #[test]
    fn retry_times_read_as_seconds() {
        assert_eq!(seconds(Duration::from_secs(30)), "30");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5");
        assert_eq!(seconds(Duration::from_nanos(4_000_001)), "0.005");
    }
}
