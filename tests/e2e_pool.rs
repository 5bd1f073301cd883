//! A pool of two real runtimes (`[runtime] processes = 2`): sessions are
//! spread over both, and `kill -9` of one ends only the turns on it.

use crate::support;

use std::time::Duration;

use ahp_bridge_join::Reply;
use ahp_types::actions::StateAction;
use support::e2e::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_runtime_ends_only_its_own_turns() {
    let st = start_stack(|c| c.runtime.processes = 2).await;
    let bridge = st.bridge.bridge.clone().expect("the copilot bridge");
    let c = support::initialized(&st.bridge, "ide").await;
    // Two sessions: the second goes to the other, less loaded runtime.
    for (id, word) in [("p0", "HERON-3"), ("p1", "OTTER-8")] {
        ready_session(&c, &format!("ahp-session:/{id}"), None).await;
        st.model.push(Reply::Text(format!("Noted {word}.")));
        let end = run_turn(&c, id, "t1", &format!("The code word is {word}.")).await;
        assert_eq!(end.kind, "complete", "{end:?}");
    }
    let slot = |id: &str| {
        bridge
            .slot_of_session(&format!("ahp-session:/{id}"))
            .unwrap()
    };
    assert_ne!(slot("p0"), slot("p1"), "one session per runtime");
    let pids = bridge.runtime_pids().await;
    let (victim, survivor) = (pids[slot("p0")].unwrap(), pids[slot("p1")].unwrap());
    assert_ne!(victim, survivor, "two runtime processes");

    // Both sessions stream a slow answer...
    let slow = Reply::Slow {
        chunks: vec!["tick ".into(); 40],
        delay: Duration::from_millis(50),
    };
    let (mut subs, mut first) = (Vec::new(), Vec::new());
    for id in ["p0", "p1"] {
        st.model.push(slow.clone());
        let mut sub = start_turn(&c, id, "t2", "count slowly").await;
        first.push(
            wait_action(&mut sub, |a| match a {
                StateAction::ChatDelta(d) => Some(d.content.clone()),
                _ => None,
            })
            .await,
        );
        subs.push(sub);
    }
    // ...and the runtime of the first dies.
    let killed = std::process::Command::new("kill")
        .args(["-9", &victim.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut sub1 = subs.pop().unwrap();
    let mut sub0 = subs.pop().unwrap();
    let end0 = wait_turn_end(&mut sub0, "t2").await;
    assert_eq!(end0.kind, "error", "the dead runtime's turn ends: {end0:?}");
    assert!(end0.error.unwrap().contains("runtime exited"));
    let end1 = wait_turn_end(&mut sub1, "t2").await;
    assert_eq!(
        end1.kind, "complete",
        "the other runtime's turn goes on: {end1:?}"
    );
    let text = format!("{}{}", first[1], end1.text);
    assert_eq!(text, "tick ".repeat(40), "untouched, every chunk");
    assert!(
        support::process::alive(survivor),
        "the other runtime was not restarted"
    );

    // The dead runtime's session resumes on a new process, with its history.
    st.model.push(Reply::Text("It was HERON-3.".into()));
    let end = run_turn(&c, "p0", "t3", "What was the code word?").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    let sent = st.model.requests().last().unwrap()["messages"].to_string();
    assert!(sent.contains("The code word is HERON-3"), "{sent}");
    assert!(!sent.contains("OTTER-8"), "{sent}");
    let now = bridge.runtime_pids().await;
    assert_eq!(now[slot("p1")], Some(survivor));
    assert!(now[slot("p0")].is_some_and(|p| p != victim), "{now:?}");
}

/// Nothing keeps the bridge alive once its owner lets go: dropping a started
/// stack (no graceful stop) drops the runtime process with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_bridge_takes_its_runtime_with_it() {
    let st = start_stack(|_| {}).await;
    let c = support::initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/drop", None).await;
    let bridge = st.bridge.bridge.clone().expect("the copilot bridge");
    let pid = bridge.runtime_pid().await.expect("a spawned runtime");
    let weak = std::sync::Arc::downgrade(&bridge);
    drop(bridge);
    drop(c);
    let support::e2e::Stack {
        bridge: running,
        model,
        dir,
        contract,
        cfg: _,
    } = st;
    running.shutdown.cancel();
    let host = std::sync::Arc::downgrade(&running.host);
    drop(running);
    support::eventually("the host is dropped", || host.strong_count() == 0).await;
    support::eventually("the bridge is dropped", || weak.strong_count() == 0).await;
    support::eventually("the runtime process is gone", || {
        !support::process::alive(pid)
    })
    .await;
    drop((model, dir, contract));
}
