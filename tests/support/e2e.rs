//! The real Copilot CLI behind the bridge, pointed at the scripted model.

use std::sync::Arc;
use std::time::Duration;

use ahp::{Client, SubscriptionEvent};
use ahp_bridge_join::config::Config;
use ahp_bridge_join::offline_runtime;
use ahp_bridge_join::ScriptedModel;
use ahp_bridge_join::{Agent, Running};
use ahp_types::actions::StateAction;
use serde_json::{json, Value};

use super::*;

pub(crate) struct Stack {
    pub model: ScriptedModel,
    pub bridge: Running,
    /// The config the bridge was started with.
    pub cfg: Arc<Config>,
    pub dir: tempfile::TempDir,
    pub contract: Contract,
}

/// The contract with the real CLI: every conversation an e2e test holds with
/// it (tools, permission, input, transform, MCP, errors) passes the typed
/// wire without one mismatch. Checked as each stack ends, over the whole
/// test binary's count (the metrics are the process's), so a mismatch in any
/// of its tests fails the tests that end after it.
pub(crate) struct Contract;

impl Drop for Contract {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let text = ahp_bridge_join::telemetry::metrics().encode(false);
        // A compatibility run names the kinds its release is known to send
        // (docs/compatibility.md): reported, not failed.
        let allowed = std::env::var("AHP_BRIDGE_WIRE_ALLOW").unwrap_or_default();
        let counted: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("ahp_bridge_runtime_protocol_mismatches_total{"))
            .filter(|l| !l.ends_with(" 0"))
            .filter(|l| {
                let known = allowed
                    .split(',')
                    .any(|k| !k.is_empty() && l.contains(&format!("kind=\"{k}\"")));
                if known {
                    eprintln!("allowed by AHP_BRIDGE_WIRE_ALLOW: {l}");
                }
                !known
            })
            .collect();
        assert!(
            counted.is_empty(),
            "the real CLI sent what its schema does not describe (see the warn log): {counted:?}"
        );
    }
}

pub(crate) async fn start_stack(tune: impl FnOnce(&mut Config)) -> Stack {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = test_config();
    offline_runtime(&mut cfg, &model.base_url(), dir.path());
    cfg.runtime.working_directory = Some(dir.path().to_owned());
    cfg.audit.path = Some(dir.path().join("audit.jsonl"));
    tune(&mut cfg);
    let cfg = Arc::new(cfg);
    let bridge = ahp_bridge_join::start(cfg.clone(), Agent::Copilot)
        .await
        .expect("bridge starts");
    Stack {
        model,
        bridge,
        cfg,
        dir,
        contract: Contract,
    }
}

/// Creates a session and waits until it is ready (the runtime session exists).
pub(crate) async fn ready_session(c: &Client, uri: &str, active_client: Option<Value>) {
    create_session(c, uri, active_client).await;
    if let Some(e) = creation_outcome(c, uri).await {
        panic!("creation failed: {e}");
    }
}

/// Waits for a created session's outcome: None when ready, else the error message.
pub(crate) async fn creation_outcome(c: &Client, uri: &str) -> Option<String> {
    // Subscribed before the snapshot, so an outcome after it is not missed.
    let (_, mut sub) = c.subscribe(uri.into()).await.unwrap();
    let snap = raw_subscribe(c, uri).await;
    let state = &snap["snapshot"]["state"];
    match state["lifecycle"].as_str() {
        Some("ready") => return None,
        Some("failed") => return state["creationError"]["message"].as_str().map(String::from),
        _ => {}
    }
    wait_action_within(&mut sub, DEADLINE, |a| match a {
        StateAction::SessionReady(_) => Some(None),
        StateAction::SessionCreationFailed(f) => Some(Some(f.error.message.clone())),
        _ => None,
    })
    .await
}

/// How a turn ended, and the text streamed in it.
#[derive(Debug)]
pub(crate) struct TurnEnd {
    pub kind: &'static str,
    pub text: String,
    pub error: Option<String>,
}

/// Subscribes to the chat of `ahp-session:/{session_id}` and starts a turn;
/// the subscription sees every action of the turn.
pub(crate) async fn start_turn(
    c: &Client,
    session_id: &str,
    turn_id: &str,
    prompt: &str,
) -> ahp::SessionSubscription {
    let chat = chat_of(&format!("ahp-session:/{session_id}"));
    let (_, sub) = c.subscribe(chat.clone()).await.unwrap();
    dispatch_raw(c, &chat, 1, json!({"type": "chat/turnStarted", "turnId": turn_id, "startedAt": jiff::Timestamp::now().to_string(), "message": {"text": prompt, "origin": {"kind": "user"}}})).await;
    sub
}

/// The session still works: a turn answered with `reply` completes with it.
pub(crate) async fn assert_next_turn_works(
    st: &Stack,
    c: &Client,
    session_id: &str,
    turn_id: &str,
    prompt: &str,
    reply: &str,
) {
    st.model.push(ahp_bridge_join::Reply::Text(reply.into()));
    let end = run_turn(c, session_id, turn_id, prompt).await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert_eq!(end.text, reply);
}

/// Starts a turn and waits for its end on the chat channel.
pub(crate) async fn run_turn(c: &Client, session_id: &str, turn_id: &str, prompt: &str) -> TurnEnd {
    let mut sub = start_turn(c, session_id, turn_id, prompt).await;
    wait_turn_end(&mut sub, turn_id).await
}

pub(crate) async fn wait_turn_end(sub: &mut ahp::SessionSubscription, turn_id: &str) -> TurnEnd {
    let mut text = String::new();
    let end = |kind, error| Some((kind, error));
    let (kind, error) = wait_action_within(sub, Duration::from_secs(90), |a| match a {
        StateAction::ChatDelta(d) if d.turn_id == turn_id => {
            text.push_str(&d.content);
            None
        }
        StateAction::ChatTurnComplete(d) if d.turn_id == turn_id => end("complete", None),
        StateAction::ChatError(e) if e.turn_id == turn_id => {
            end("error", Some(e.part.error.message.clone()))
        }
        StateAction::ChatTurnCancelled(d) if d.turn_id == turn_id => end("cancelled", None),
        _ => None,
    })
    .await;
    TurnEnd { kind, text, error }
}

/// Waits on a subscription for the first action `pick` accepts.
pub(crate) async fn wait_action<T>(
    sub: &mut ahp::SessionSubscription,
    pick: impl FnMut(&StateAction) -> Option<T>,
) -> T {
    wait_action_within(sub, DEADLINE * 3, pick).await
}

/// As [`wait_action`], with its own deadline.
pub(crate) async fn wait_action_within<T>(
    sub: &mut ahp::SessionSubscription,
    deadline: Duration,
    mut pick: impl FnMut(&StateAction) -> Option<T>,
) -> T {
    tokio::time::timeout(deadline, async {
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
    .unwrap_or_else(|_| panic!("no such action within {deadline:?}"))
}

/// Waits on a subscription to an `ahp-session:` channel for the bridge's
/// `session/inputNeededSet`; returns the request it sets, as JSON. Subscribe
/// before the action that leads to it, so the action is not missed.
pub(crate) async fn wait_input_needed(sub: &mut ahp::SessionSubscription) -> Value {
    let request = wait_action(sub, |a| match a {
        StateAction::SessionInputNeededSet(s) => Some(s.request.clone()),
        _ => None,
    })
    .await;
    serde_json::to_value(request).unwrap()
}

/// The session waits on nothing: its `inputNeeded` is absent or empty.
pub(crate) async fn assert_no_input_needed(c: &Client, session: &str) {
    let snap = raw_subscribe(c, session).await;
    assert!(
        snap["snapshot"]["state"]["inputNeeded"]
            .as_array()
            .is_none_or(|a| a.is_empty()),
        "nothing left in inputNeeded: {snap}"
    );
}

/// A runtime connection's handler that answers every request as if nobody
/// were there (the text back, no user answers) and ignores events: for a
/// connection that starts no session, or one that needs no answers.
pub(crate) struct Silent;

impl ahp_bridge_join::runtime::RuntimeHandler for Silent {
    fn event(&self, _: &str, _: Option<&str>, _: ahp_bridge_join::runtime::RuntimeEvent) {}
    fn request(
        &self,
        request: ahp_bridge_join::runtime::RuntimeRequest,
    ) -> ahp_bridge_join::runtime::RuntimeReplyFuture {
        use ahp_bridge_join::runtime::{RuntimeAnswer, RuntimeRequest, UserInputAnswer};
        let answer = match request {
            RuntimeRequest::Transform { sections, .. } => RuntimeAnswer::Transformed(sections),
            RuntimeRequest::UserInput { .. } => {
                RuntimeAnswer::UserInput(UserInputAnswer::NoResponse)
            }
            RuntimeRequest::Hooks => RuntimeAnswer::Hooks,
        };
        Box::pin(async move { answer })
    }
}

/// The system prompt of the model's last request.
pub(crate) fn last_system_prompt(model: &ScriptedModel) -> String {
    ScriptedModel::system_prompt(model.requests().last().expect("a model request"))
        .expect("a system prompt")
}
