//! A chat's turns over a long life: the host keeps a window of the newest
//! (`[server] turn_window`), older ones go to the state store, and a client
//! gets every one back through `fetchTurns` and `chat/turnsLoaded`, after a
//! restart too; a truncation to a turn outside the window loads it first.
//! The official client over a real socket and the official reducer; no
//! runtime (the host itself dispatches the turns).

use crate::support;

use ahp::reducers::apply_action_to_chat;
use ahp::{Client, SubscriptionEvent};
use ahp_bridge_join::config::Config;
use ahp_bridge_join::Running;
use ahp_types::actions::StateAction;
use ahp_types::state::ChatState;
use serde_json::{json, Value};
use support::*;

const SESSION: &str = "ahp-session:/long";
const WINDOW: usize = 3;

fn config(store: &std::path::Path) -> Config {
    let mut cfg = test_config();
    cfg.server.turn_window = WINDOW;
    cfg.state.path = Some(store.to_owned());
    cfg
}

fn typed(v: Value) -> StateAction {
    serde_json::from_value(v).unwrap()
}

/// Turns `from..to`, each started and completed by the host.
fn run_turns(r: &Running, from: usize, to: usize) {
    let chat = chat_of(SESSION);
    for i in from..to {
        let id = format!("t{i}");
        r.host
            .dispatch(
                &chat,
                typed(json!({"type": "chat/turnStarted", "turnId": id,
                "startedAt": "2026-01-01T00:00:00Z",
                "message": {"text": format!("prompt {i}"), "origin": {"kind": "user"}}})),
            )
            .unwrap();
        r.host
            .dispatch(
                &chat,
                typed(json!({"type": "chat/turnComplete", "turnId": id, "duration": 5})),
            )
            .unwrap();
    }
}

fn ids(chat: &ChatState) -> Vec<String> {
    chat.turns.iter().map(|t| t.id.clone()).collect()
}

fn host_chat(r: &Running) -> ChatState {
    let snap = r.host.snapshot(&chat_of(SESSION)).unwrap();
    serde_json::from_value(snap["state"].clone()).unwrap()
}

fn all(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("t{i}")).collect()
}

/// The next action on `events` that `wanted` picks.
async fn next_action(
    events: &mut ahp::ClientEventStream,
    wanted: impl Fn(&StateAction) -> bool,
) -> StateAction {
    wait_event(events, |e| match e {
        SubscriptionEvent::Action(env) if wanted(&env.action) => Some(env.action.clone()),
        _ => None,
    })
    .await
}

/// Subscribes to the chat, then asks for older turns with the cursor its
/// state carries until none is left, applying every `chat/turnsLoaded` with
/// the official reducer: the chat as a client sees it in the end.
async fn fetch_everything(c: &Client) -> ChatState {
    let chat = chat_of(SESSION);
    let mut events = c.events();
    let snap = raw_subscribe(c, &chat).await;
    let mut state: ChatState = serde_json::from_value(snap["snapshot"]["state"].clone())
        .or_else(|_| serde_json::from_value(snap["state"].clone()))
        .expect("a chat snapshot");
    assert!(state.turns.len() <= WINDOW, "a snapshot carries the window");
    let mut rounds = 0;
    while let Some(cursor) = state.turns_next_cursor.clone() {
        rounds += 1;
        assert!(rounds < 100, "fetchTurns never ends");
        let ok: Value = c
            .request("fetchTurns", json!({"channel": chat, "cursor": cursor}))
            .await
            .expect("fetchTurns");
        assert_eq!(ok, json!({}));
        // The host dispatched the page before it answered.
        let loaded = next_action(&mut events, |a| {
            matches!(a, StateAction::ChatTurnsLoaded(_))
        })
        .await;
        apply_action_to_chat(&mut state, &loaded);
    }
    state
}

#[tokio::test]
async fn old_turns_leave_the_window_and_come_back_through_fetch_turns_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("state.sqlite3");
    let r = start_host(config(&store)).await;
    let c = initialized(&r, "reader").await;
    create_session(&c, SESSION, None).await;
    run_turns(&r, 0, 10);

    let held = host_chat(&r);
    assert_eq!(ids(&held), ["t7", "t8", "t9"], "the host keeps the window");
    assert!(
        held.turns_next_cursor.is_some(),
        "and says older turns exist"
    );
    let seen = fetch_everything(&c).await;
    assert_eq!(ids(&seen), all(10), "every turn comes back, in order");
    assert_eq!(seen.turns_next_cursor, None);
    assert_eq!(
        ids(&host_chat(&r)),
        ["t7", "t8", "t9"],
        "loading does not grow the host"
    );

    // Without a cursor, the page before the window; a stranger's cursor is refused.
    let chat = chat_of(SESSION);
    let _: Value = c
        .request("fetchTurns", json!({"channel": chat}))
        .await
        .unwrap();
    let e = c
        .request::<_, Value>(
            "fetchTurns",
            json!({"channel": chat, "cursor": "turns-before:x"}),
        )
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&e), -32602);

    drop(c);
    assert!(r.stop(std::time::Duration::from_secs(10)).await);
    let r = start_host(config(&store)).await;
    assert_eq!(
        ids(&host_chat(&r)),
        ["t7", "t8", "t9"],
        "the window is restored"
    );
    let c = initialized(&r, "reader").await;
    assert_eq!(
        ids(&fetch_everything(&c).await),
        all(10),
        "and the rest is in the store"
    );
    run_turns(&r, 10, 12);
    assert_eq!(ids(&host_chat(&r)), ["t9", "t10", "t11"]);
    let c2 = initialized(&r, "late").await;
    assert_eq!(
        ids(&fetch_everything(&c2).await),
        all(12),
        "numbering goes on after a restart"
    );
}

#[tokio::test]
async fn a_truncation_to_a_turn_outside_the_window_loads_it_first() {
    let dir = tempfile::tempdir().unwrap();
    let r = start_host(config(&dir.path().join("state.sqlite3"))).await;
    let c = initialized(&r, "owner").await;
    create_session(&c, SESSION, None).await;
    run_turns(&r, 0, 8);
    let chat = chat_of(SESSION);
    let mut state = fetch_everything(&c).await;
    let mut events = c.events();
    dispatch_raw(
        &c,
        &chat,
        1,
        json!({"type": "chat/truncated", "turnId": "t2"}),
    )
    .await;
    // The subscriber sees t2 loaded, then the truncation.
    for _ in 0..2 {
        let a = next_action(&mut events, |a| {
            matches!(
                a,
                StateAction::ChatTurnsLoaded(_) | StateAction::ChatTruncated(_)
            )
        })
        .await;
        apply_action_to_chat(&mut state, &a);
    }
    assert_eq!(ids(&state), all(3), "the client's chat ends at t2");
    let held = host_chat(&r);
    assert_eq!(
        ids(&held),
        ["t2"],
        "the host's window starts at the truncation's turn"
    );
    let c2 = initialized(&r, "late").await;
    assert_eq!(
        ids(&fetch_everything(&c2).await),
        all(3),
        "what follows t2 is gone from the store too"
    );
    // New turns after the truncation take the places of the dropped ones.
    run_turns(&r, 3, 8);
    let c3 = initialized(&r, "later").await;
    assert_eq!(ids(&fetch_everything(&c3).await), all(8));

    let mut events = c.events();
    dispatch_raw(&c, &chat, 2, json!({"type": "chat/truncated"})).await;
    // Its echo: applied, and stored.
    next_action(
        &mut events,
        |a| matches!(a, StateAction::ChatTruncated(t) if t.turn_id.is_none()),
    )
    .await;
    let c4 = initialized(&r, "last").await;
    assert!(
        ids(&fetch_everything(&c4).await).is_empty(),
        "a truncation of all drops the store's"
    );
}

#[tokio::test]
async fn without_a_state_store_old_turns_still_come_back() {
    let mut cfg = test_config();
    cfg.server.turn_window = WINDOW;
    cfg.state.enabled = false;
    let r = start_host(cfg).await;
    let c = initialized(&r, "reader").await;
    create_session(&c, SESSION, None).await;
    run_turns(&r, 0, 10);
    assert_eq!(
        ids(&host_chat(&r)),
        ["t7", "t8", "t9"],
        "memory holds the window"
    );
    assert_eq!(
        ids(&fetch_everything(&c).await),
        all(10),
        "a temporary store the rest"
    );
}
