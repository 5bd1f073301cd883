//! Per-principal rate limits, enforced: the one owner of their state (a
//! token bucket for turns and one for actions, per principal), held by the
//! host and keyed by principal name. Configured principals have an entry
//! each; so does each identity an issuer vouched for (`corp:alice`, named
//! `NAME:CLAIM`), under the `[server]` defaults, at most
//! [`MAX_IDENTITIES`] of them with the least recently used one forgotten
//! first; anyone else (a connection whose principal a reload removed, while
//! it waits to close) shares one entry under the `[server]` defaults. So
//! memory is bounded by the config and that constant, never by what
//! clients send.
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

use ahp_bridge_base::config::{RateLimits, Reloadable};

/// Which limit refused something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    MaxSessions,
    TurnsPerMinute,
    ActionsPerSecond,
}

impl Limit {
    /// Its key, as the config names it (and the metric's label).
    pub(crate) fn key(self) -> &'static str {
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
pub(crate) struct Limited {
    pub limit: Limit,
    pub retry_after: Option<Duration>,
    message: String,
}

impl Limited {
    fn new(limit: Limit, principal: &str, what: String, retry_after: Option<Duration>) -> Self {
        ahp_bridge_telemetry::metrics().rate_limited(limit.key());
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

struct Budget {
    limits: RateLimits,
    turns: Bucket,
    actions: Bucket,
}

impl Budget {
    /// These figures, with what `old` had used.
    fn retuned_from(self, old: &Budget, now: Instant) -> Budget {
        Budget {
            turns: old.turns.retuned(self.turns, now),
            actions: old.actions.retuned(self.actions, now),
            limits: self.limits,
        }
    }
}

impl Budget {
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

/// Identities from issuers (JWT principals) whose use is remembered at once.
pub(crate) const MAX_IDENTITIES: usize = 10_000;

struct PrincipalsUsage {
    by_name: HashMap<String, Budget>,
    /// Identities an issuer vouched for, each with when it was last used (a
    /// count of uses, so the least recent is the smallest).
    by_identity: HashMap<String, (Budget, u64)>,
    uses: u64,
    /// Anyone not configured (see the module's doc).
    others: Budget,
}

impl PrincipalsUsage {
    fn entry(&mut self, principal: &str) -> &mut Budget {
        if self.by_name.contains_key(principal) {
            return self.by_name.get_mut(principal).expect("just looked");
        }
        if principal.contains(':') {
            return self.identity(principal);
        }
        &mut self.others
    }

    /// An issuer's identity's entry: made under the defaults when new, the
    /// least recently used one forgotten when there are too many.
    fn identity(&mut self, principal: &str) -> &mut Budget {
        self.uses += 1;
        let uses = self.uses;
        if !self.by_identity.contains_key(principal) && self.by_identity.len() >= MAX_IDENTITIES {
            let oldest = self
                .by_identity
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(name, _)| name.clone());
            if let Some(name) = oldest {
                self.by_identity.remove(&name);
            }
        }
        let defaults = self.others.limits;
        let (entry, used) = self
            .by_identity
            .entry(principal.to_owned())
            .or_insert_with(|| (Budget::new(defaults, Instant::now()), 0));
        *used = uses;
        entry
    }
}

/// Every principal's limits and what it has used of them.
pub(crate) struct RateLimiter(Mutex<PrincipalsUsage>);

impl RateLimiter {
    pub(crate) fn from_config(cfg: Reloadable<'_>) -> Self {
        let now = Instant::now();
        let by_name = cfg
            .all_rate_limits()
            .into_iter()
            .map(|(name, l)| (name, Budget::new(l, now)))
            .collect();
        let others = Budget::new(cfg.default_rate_limits(), now);
        Self(Mutex::new(PrincipalsUsage {
            by_name,
            by_identity: HashMap::new(),
            uses: 0,
            others,
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PrincipalsUsage> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A reload: the principals and figures of `cfg`. A principal that stays
    /// keeps what it used (a reload is no way around a limit).
    pub(crate) fn replace(&self, cfg: Reloadable<'_>) {
        let now = Instant::now();
        let mut st = self.lock();
        let mut old = std::mem::take(&mut st.by_name);
        for (name, limits) in cfg.all_rate_limits() {
            let fresh = Budget::new(limits, now);
            let entry = match old.remove(&name) {
                Some(e) => fresh.retuned_from(&e, now),
                None => fresh,
            };
            st.by_name.insert(name, entry);
        }
        let defaults = cfg.default_rate_limits();
        st.others = Budget::new(defaults, now).retuned_from(&st.others, now);
        for (e, _) in st.by_identity.values_mut() {
            *e = Budget::new(defaults, now).retuned_from(e, now);
        }
    }

    /// `Ok` unless `principal`, owning `owned` sessions, is at its `max_sessions`.
    pub(crate) fn check_sessions(&self, principal: &str, owned: usize) -> Result<(), Limited> {
        let max = self.lock().entry(principal).limits.max_sessions;
        if owned < max as usize {
            return Ok(());
        }
        let what = format!("{max} sessions; it owns {owned}, dispose one first");
        Err(Limited::new(Limit::MaxSessions, principal, what, None))
    }

    /// Takes one action of `principal`'s.
    pub(crate) fn take_action(&self, principal: &str) -> Result<(), Limited> {
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
    pub(crate) fn check_turn(&self, principal: &str) -> Result<(), Limited> {
        let mut st = self.lock();
        let e = st.entry(principal);
        e.turns.check(Instant::now()).map_err(|wait| {
            let what = format!("{} a minute", e.limits.turns_per_minute);
            Limited::new(Limit::TurnsPerMinute, principal, what, Some(wait))
        })
    }

    /// A turn of `principal`'s started.
    pub(crate) fn take_turn(&self, principal: &str) {
        let _ = self.lock().entry(principal).turns.take(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_bridge_base::config::Config;

    fn limits(server: &str, principal: &str) -> RateLimiter {
        let sha = "a".repeat(64);
        let text = format!(
            "[server]\n{server}\n[[principals]]\nname = \"ide\"\ntoken_sha256 = \"{sha}\"\n\
             roles = [\"participate\"]\n{principal}\n"
        );
        let cfg = Config::parse(&text).unwrap();
        cfg.validate().unwrap();
        RateLimiter::from_config(cfg.reloadable())
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
        let exposed = ahp_bridge_telemetry::metrics().encode(false);
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
        l.replace(Config::parse(&text).unwrap().reloadable());
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

    #[tokio::test(start_paused = true)]
    async fn each_identity_has_its_own_bucket_and_the_oldest_is_forgotten() {
        let l = limits("actions_per_second = 1\nactions_burst = 1", "");
        l.take_action("corp:alice").unwrap();
        let e = l.take_action("corp:alice").unwrap_err();
        assert!(e.to_string().contains("\"corp:alice\""), "{e}");
        l.take_action("corp:bob").unwrap();
        // Unconfigured names without an issuer share one bucket.
        l.take_action("stranger").unwrap();
        assert!(l.take_action("other-stranger").is_err());
        for i in 0..MAX_IDENTITIES {
            let _ = l.take_action(&format!("corp:user{i}"));
        }
        let st = l.lock();
        assert_eq!(st.by_identity.len(), MAX_IDENTITIES);
        assert!(
            !st.by_identity.contains_key("corp:alice"),
            "least recent out"
        );
    }

    #[test]
    fn retry_times_read_as_seconds() {
        assert_eq!(seconds(Duration::from_secs(30)), "30");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5");
        assert_eq!(seconds(Duration::from_nanos(4_000_001)), "0.005");
    }
}
