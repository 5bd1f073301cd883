//! A running turn's inactivity deadline (`[runtime] turn_inactivity_timeout`):
//! one waiter per turn, which ends with its turn rather than at its deadline,
//! so that turns that end at once leave no task behind for the timeout's
//! length (at a high turn rate, that many tasks alive). The waiting alone:
//! what it ends is `Bridge::end_if_silent`'s.

use std::time::Duration;

use tokio::time::Instant;

use super::turn::TurnOver;

/// Waits until the turn is over (false) or has heard nothing for `limit`
/// (true). `look` tells how the turn stands (see
/// [`super::session::BridgedSession::last_heard`]); it is asked only at a
/// deadline, while `over` ends the wait the moment the turn ends.
pub(super) async fn silent(
    limit: Duration,
    mut over: TurnOver,
    look: impl Fn() -> Option<Option<Instant>>,
) -> bool {
    let mut deadline = Instant::now() + limit;
    loop {
        tokio::select! {
            _ = &mut over => return false,
            () = tokio::time::sleep_until(deadline) => {}
        }
        let now = Instant::now();
        match look() {
            // Over, or another turn by now.
            None => return false,
            // Waiting on a client: the runtime is quiet for a reason.
            Some(None) => deadline = now + limit,
            Some(Some(heard)) if heard + limit > now => deadline = heard + limit,
            Some(Some(_)) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::bridge::effects::Effects;
    use crate::bridge::session::BridgedSession;
    use crate::bridge::turn_trace::TurnSpans;
    use crate::runtime::RuntimeEvent;

    /// A session with turn "t" running, and what ends with that turn.
    fn running() -> (Arc<Mutex<BridgedSession>>, TurnOver) {
        let mut s = BridgedSession::new("r".into(), 0, false);
        let spans = TurnSpans::start("ahp-session:/s", "t", "m", None);
        let over = s.begin("t", "ahp-chat:/x", None, spans, None);
        (Arc::new(Mutex::new(s)), over)
    }

    fn waiter(
        s: &Arc<Mutex<BridgedSession>>,
        limit: Duration,
        over: TurnOver,
    ) -> tokio::task::JoinHandle<bool> {
        // Held weakly, as the bridge holds its sessions for the waiter.
        let s = Arc::downgrade(s);
        tokio::spawn(silent(limit, over, move || {
            let s = s.upgrade()?;
            let heard = s.lock().unwrap().last_heard("t");
            heard
        }))
    }

    #[tokio::test]
    async fn the_waiter_ends_with_its_turn_not_at_its_deadline() {
        let (s, over) = running();
        let w = waiter(&s, Duration::from_secs(3600), over);
        s.lock()
            .unwrap()
            .on_event(&RuntimeEvent::Idle, &mut Effects::new("s", 0, "r"));
        let silent = tokio::time::timeout(Duration::from_secs(10), w)
            .await
            .expect("the waiter ends when its turn does")
            .unwrap();
        assert!(!silent);
    }

    #[tokio::test]
    async fn the_waiter_ends_when_its_session_goes() {
        let (s, over) = running();
        let w = waiter(&s, Duration::from_secs(3600), over);
        drop(s);
        let silent = tokio::time::timeout(Duration::from_secs(10), w)
            .await
            .expect("the waiter ends with its session")
            .unwrap();
        assert!(!silent);
    }

    /// The clock paused: the deadline still comes for a turn that runs on
    /// and hears nothing.
    #[tokio::test(start_paused = true)]
    async fn a_turn_that_hears_nothing_is_silent_at_the_limit() {
        let (s, over) = running();
        assert!(waiter(&s, Duration::from_secs(600), over).await.unwrap());
        assert!(s.lock().unwrap().last_heard("t").is_some(), "still running");
    }
}
