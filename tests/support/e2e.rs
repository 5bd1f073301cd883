//! The real Copilot CLI behind the bridge, pointed at the scripted model.

use std::sync::Arc;

use ahp::{Client, SubscriptionEvent};
use ahp_copilot_bridge::app::{self, Agent, Running};
use ahp_copilot_bridge::cli::offline_runtime;
use ahp_copilot_bridge::config::Config;
use ahp_copilot_bridge::demo::model::ScriptedModel;
use ahp_types::actions::StateAction;
use serde_json::{json, Value};

use super::*;

pub struct Stack {
    pub model: ScriptedModel,
    pub bridge: Running,
    pub dir: tempfile::TempDir,
}

pub async fn start_stack(tune: impl FnOnce(&mut Config)) -> Stack {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = test_config();
    offline_runtime(&mut cfg, &model.base_url(), dir.path());
    cfg.runtime.working_directory = Some(dir.path().to_owned());
    cfg.audit.path = Some(dir.path().join("audit.jsonl"));
    tune(&mut cfg);
    let bridge = app::start(Arc::new(cfg), Agent::Copilot)
        .await
        .expect("bridge starts");
    Stack { model, bridge, dir }
}

/// Creates a session and waits until it is ready (the runtime session exists).
pub async fn ready_session(c: &Client, uri: &str, active_client: Option<Value>) {
    let (_, mut sub) = c.subscribe("ahp-root://".into()).await.unwrap();
    create_session(c, uri, active_client).await;
    let (_, mut s) = c.subscribe(uri.into()).await.unwrap();
    let _ = &mut sub;
    let snap = raw_subscribe(c, uri).await;
    if snap["snapshot"]["state"]["lifecycle"] == "ready" {
        return;
    }
    tokio::time::timeout(DEADLINE, async {
        loop {
            match s.recv().await {
                Some(SubscriptionEvent::Action(env)) => match env.action {
                    StateAction::SessionReady(_) => return,
                    StateAction::SessionCreationFailed(f) => {
                        panic!("creation failed: {:?}", f.error)
                    }
                    _ => {}
                },
                None => panic!("subscription ended"),
                _ => {}
            }
        }
    })
    .await
    .expect("session ready within the deadline");
}

/// How a turn ended, and the text streamed in it.
#[derive(Debug)]
pub struct TurnEnd {
    pub kind: &'static str,
    pub text: String,
    pub error: Option<String>,
}

/// Subscribes to the chat of `ahp-session:/{session_id}` and starts a turn;
/// the subscription sees every action of the turn.
pub async fn start_turn(
    c: &Client,
    session_id: &str,
    turn_id: &str,
    prompt: &str,
) -> ahp::SessionSubscription {
    let chat = format!("ahp-chat:/{session_id}");
    let (_, sub) = c.subscribe(chat.clone()).await.unwrap();
    dispatch_raw(c, &chat, 1, json!({"type": "chat/turnStarted", "turnId": turn_id, "startedAt": ahp_copilot_bridge::ahp::host::now_iso(), "message": {"text": prompt, "origin": {"kind": "user"}}})).await;
    sub
}

/// Starts a turn and waits for its end on the chat channel.
pub async fn run_turn(c: &Client, session_id: &str, turn_id: &str, prompt: &str) -> TurnEnd {
    let mut sub = start_turn(c, session_id, turn_id, prompt).await;
    wait_turn_end(&mut sub, turn_id).await
}

pub async fn wait_turn_end(sub: &mut ahp::SessionSubscription, turn_id: &str) -> TurnEnd {
    let mut text = String::new();
    tokio::time::timeout(std::time::Duration::from_secs(90), async {
        loop {
            let Some(SubscriptionEvent::Action(env)) = sub.recv().await else {
                continue;
            };
            match env.action {
                StateAction::ChatDelta(d) if d.turn_id == turn_id => text.push_str(&d.content),
                StateAction::ChatTurnComplete(d) if d.turn_id == turn_id => {
                    return TurnEnd {
                        kind: "complete",
                        text,
                        error: None,
                    }
                }
                StateAction::ChatError(e) if e.turn_id == turn_id => {
                    return TurnEnd {
                        kind: "error",
                        text,
                        error: Some(e.part.error.message),
                    }
                }
                StateAction::ChatTurnCancelled(d) if d.turn_id == turn_id => {
                    return TurnEnd {
                        kind: "cancelled",
                        text,
                        error: None,
                    }
                }
                _ => {}
            }
        }
    })
    .await
    .expect("turn ended within 90s")
}

/// Waits on a subscription for the first action `pick` accepts.
pub async fn wait_action<T>(
    sub: &mut ahp::SessionSubscription,
    mut pick: impl FnMut(&StateAction) -> Option<T>,
) -> T {
    tokio::time::timeout(DEADLINE * 3, async {
        loop {
            match sub.recv().await {
                Some(SubscriptionEvent::Action(env)) => {
                    if let Some(t) = pick(&env.action) {
                        return t;
                    }
                }
                Some(_) => {}
                None => panic!("subscription ended"),
            }
        }
    })
    .await
    .expect("action within the deadline")
}

/// The session waits on nothing: its `inputNeeded` is absent or empty.
pub async fn assert_no_input_needed(c: &Client, session: &str) {
    let snap = raw_subscribe(c, session).await;
    assert!(
        snap["snapshot"]["state"]["inputNeeded"]
            .as_array()
            .map_or(true, |a| a.is_empty()),
        "nothing left in inputNeeded: {snap}"
    );
}
