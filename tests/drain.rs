//! SIGTERM drains before it stops (`[server] drain`): `/readyz` says 503 at
//! once, a new WebSocket upgrade is answered 503 (a load balancer gets a
//! clear answer, not a refused connection), an open connection's running
//! turn completes whole, and the process exits within the drain plus the
//! shutdown's 10 s. The real binary, the real Copilot CLI.

use crate::support;

use std::time::{Duration, Instant};

use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;
use ahp_types::actions::StateAction;
use support::e2e::{ready_session, start_turn, wait_action, wait_turn_end};
use support::process::*;
use support::*;

const DRAIN: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_new_connections_get_503_and_a_running_turn_completes() {
    let model = ScriptedModel::start().await.unwrap();
    let drain = format!("drain = \"{}s\"", DRAIN.as_secs());
    let mut bridge = BridgeProcess::start(&model, &drain, None);
    http::readyz_until(bridge.admin, DEADLINE, "said 200", |s, _| s == 200).await;
    let c = connect(bridge.addr, "ide").await;
    ready_session(&c, "ahp-session:/d1", None).await;
    // A turn of about two seconds: it fits in the drain.
    model.push(Reply::Slow {
        chunks: (0..10).map(|i| format!("part{i} ")).collect(),
        delay: Duration::from_millis(200),
    });
    let mut sub = start_turn(&c, "d1", "t1", "take your time").await;
    wait_action(&mut sub, |a| {
        matches!(a, StateAction::ChatDelta(_)).then_some(())
    })
    .await;

    bridge.signal("TERM");
    let signalled = Instant::now();
    http::readyz_until(bridge.admin, DEADLINE, "said 503", |s, _| s == 503).await;
    assert_eq!(
        raw::token_status(bridge.addr, TOKEN).await,
        503,
        "a new upgrade while draining"
    );
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    // Every part after the first (which `wait_action` took).
    let rest: String = (1..10).map(|i| format!("part{i} ")).collect();
    assert_eq!(end.text, rest, "the running turn completed whole");
    assert!(
        signalled.elapsed() < DRAIN,
        "the turn ended inside the drain, not by the shutdown"
    );
    let limit = (DRAIN + Duration::from_secs(10)).saturating_sub(signalled.elapsed());
    let status = tokio::task::spawn_blocking(move || bridge.wait_exit("TERM", limit))
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
}
