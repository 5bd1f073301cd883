//! The bridge in front of the real CLI 1.0.102 as an AHP host, offline: a
//! turn streams through it, a tool's permission is the bridge's policy's
//! and then its clients', and the host's GitHub identity is the bridge's.

use ahp_bridge_join::Reply;
use ahp_types::actions::StateAction;
use serde_json::json;

use crate::support::agent_host::{start_agent_host_stack, AgentHostStack, GITHUB_TOKEN};
use crate::support::e2e::{ready_session, run_turn, start_turn, wait_action, wait_turn_end};
use crate::support::*;

/// Scripts the model to run `command` in bash and then say `then`, and
/// starts turn `turn` on `ahp-session:/{session}`: the subscription and the
/// tool call's id, once the client is asked to confirm it.
async fn start_asked(
    st: &AgentHostStack,
    c: &ahp::Client,
    (session, turn): (&str, &str),
    command: String,
    then: &str,
) -> (ahp::SessionSubscription, String) {
    st.model.push(Reply::ToolCall {
        name: "bash".into(),
        arguments: json!({"command": command, "description": "write"}),
    });
    st.model.push(Reply::Text(then.into()));
    let mut sub = start_turn(c, session, turn, "write the file").await;
    let call = wait_action(&mut sub, |a| match a {
        StateAction::ChatToolCallReady(r) if r.confirmed.is_none() => Some(r.tool_call_id.clone()),
        _ => None,
    })
    .await;
    (sub, call)
}

/// The client approves tool call `call` of `turn` on `ahp-session:/{session}`.
async fn approve(c: &ahp::Client, session: &str, seq: i64, turn: &str, call: &str) {
    let chat = chat_of(&format!("ahp-session:/{session}"));
    dispatch_raw(c, &chat, seq, json!({"type": "chat/toolCallConfirmed", "turnId": turn, "toolCallId": call, "approved": true, "confirmed": "user-action"})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_streams_through_the_bridge_to_the_agent_host() {
    let st = start_agent_host_stack(|_| {}).await;
    // The host checked the bridge's token with GitHub, and only that one.
    let seen = st.github.seen();
    assert!(
        !seen.is_empty() && seen.iter().all(|a| a.ends_with(GITHUB_TOKEN)),
        "{seen:?}"
    );
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/relay-1", None).await;
    st.model
        .push(Reply::Text("Hello through the relay.".into()));
    let end = run_turn(&c, "relay-1", "t-1", "Say hello").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert_eq!(end.text, "Hello through the relay.");
    // The model heard the client's words, through the host.
    let asked = st.model.requests();
    let last = asked.last().expect("the model was asked").to_string();
    assert!(last.contains("Say hello"), "{last}");
    // A second turn on the same session.
    st.model.push(Reply::Text("Again.".into()));
    let end = run_turn(&c, "relay-1", "t-2", "Once more").await;
    assert_eq!((end.kind, end.text.as_str()), ("complete", "Again."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_command_asks_the_client_and_runs_once_confirmed() {
    let st = start_agent_host_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/relay-2", None).await;
    let file = st.dir.path().join("made-by-the-tool.txt");
    let command = format!("echo relayed > {}", file.display());
    let (mut sub, call) = start_asked(&st, &c, ("relay-2", "t-1"), command, "Done.").await;
    approve(&c, "relay-2", 2, "t-1", &call).await;
    let end = wait_turn_end(&mut sub, "t-1").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "relayed");
}

/// `[policy] auto_approve_read_only`: the host asks about a read outside
/// the workspace (it marks it `readOnly: false`); the bridge approves it,
/// the client never sees it pending, and the model reads the file. A write
/// still asks the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_command_is_approved_by_the_policy_and_a_write_still_asks() {
    let st = start_agent_host_stack(|c| c.policy.auto_approve_read_only = true).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/relay-9", None).await;
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("notes.txt");
    std::fs::write(&file, "READ-OUTSIDE-THE-WORKSPACE").unwrap();
    st.model.push(Reply::ToolCall {
        name: "bash".into(),
        arguments: json!({"command": format!("cat {}", file.display()), "description": "read the notes"}),
    });
    st.model.push(Reply::Text("Read.".into()));
    let mut sub = start_turn(&c, "relay-9", "t-1", "read the notes").await;
    let confirmed = wait_action(&mut sub, |a| match a {
        StateAction::ChatToolCallReady(r) => Some(r.confirmed.clone()),
        _ => None,
    })
    .await;
    assert_eq!(
        confirmed,
        Some(ahp_types::state::ToolCallConfirmationReason::Setting),
        "approved by the policy, never pending"
    );
    let end = wait_turn_end(&mut sub, "t-1").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    let asked = st.model.requests().last().unwrap().to_string();
    assert!(asked.contains("READ-OUTSIDE-THE-WORKSPACE"), "{asked}");
    // A write is not a read: the client is asked.
    let written = st.dir.path().join("w.txt");
    st.model.push(Reply::ToolCall {
        name: "bash".into(),
        arguments: json!({"command": format!("echo w > {}", written.display()), "description": "write"}),
    });
    st.model.push(Reply::Text("Wrote.".into()));
    let mut sub = start_turn(&c, "relay-9", "t-2", "write it").await;
    let call = wait_action(&mut sub, |a| match a {
        StateAction::ChatToolCallReady(r) if r.turn_id == "t-2" => {
            Some((r.confirmed.clone(), r.tool_call_id.clone()))
        }
        _ => None,
    })
    .await;
    assert_eq!(call.0, None, "a write waits on the client");
    approve(&c, "relay-9", 2, "t-2", &call.1).await;
    assert_eq!(wait_turn_end(&mut sub, "t-2").await.kind, "complete");
}

/// A client's steering message reaches the host's running turn: left
/// while a tool call waits on the client, it leaves the bridge's state, and
/// the host takes it up after the tool (as a turn of its own, which the
/// clients see stream and complete); the model reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steering_message_reaches_the_running_turn() {
    let st = start_agent_host_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/relay-10", None).await;
    let file = st.dir.path().join("steered.txt");
    let command = format!("echo s > {}", file.display());
    let (mut sub, call) = start_asked(&st, &c, ("relay-10", "t-1"), command, "Steered.").await;
    let chat = chat_of("ahp-session:/relay-10");
    dispatch_raw(&c, &chat, 2, json!({"type": "chat/pendingMessageSet", "kind": "steering", "id": "steer-1", "message": {"text": "STEER-THIS-WAY", "origin": {"kind": "user"}}})).await;
    wait_action(&mut sub, |a| match a {
        StateAction::ChatPendingMessageRemoved(r) if r.id == "steer-1" => Some(()),
        _ => None,
    })
    .await;
    approve(&c, "relay-10", 3, "t-1", &call).await;
    let mut text: std::collections::HashMap<String, String> = Default::default();
    wait_action(&mut sub, |a| match a {
        StateAction::ChatDelta(d) => {
            text.entry(d.turn_id.clone())
                .or_default()
                .push_str(&d.content);
            None
        }
        StateAction::ChatTurnComplete(t)
            if text.get(&t.turn_id).is_some_and(|s| s == "Steered.") =>
        {
            Some(())
        }
        StateAction::ChatError(e) => panic!("{e:?}"),
        _ => None,
    })
    .await;
    let asked = st.model.requests().last().unwrap().to_string();
    assert!(asked.contains("STEER-THIS-WAY"), "{asked}");
}

const PERMISSION: &str = r#"
package ahp.permission

deny contains "no writes to denied.txt" if {
	input.request.kind == "shell"
	contains(input.request.fullCommandText, "denied.txt")
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rego_deny_never_reaches_the_client_and_the_model_reads_it() {
    let policy = tempfile::tempdir().unwrap();
    std::fs::write(policy.path().join("permission.rego"), PERMISSION).unwrap();
    let rego = ahp_bridge_join::config::Config::parse(&format!(
        "[policy.rego]\nmodules = [{:?}]\n",
        policy.path().join("*.rego").display().to_string()
    ))
    .unwrap()
    .policy
    .rego;
    let st = start_agent_host_stack(|c| c.policy.rego = rego).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/relay-3", None).await;
    let file = st.dir.path().join("denied.txt");
    st.model.push(Reply::ToolCall {
        name: "bash".into(),
        arguments: json!({"command": format!("echo no > {}", file.display()), "description": "write"}),
    });
    st.model.push(Reply::Text("Understood.".into()));
    let mut sub = start_turn(&c, "relay-3", "t-1", "write the denied file").await;
    let end = wait_action(&mut sub, |a| match a {
        StateAction::ChatToolCallReady(r) if r.confirmed.is_none() => {
            panic!("a pending confirmation reached the client: {a:?}")
        }
        StateAction::ChatTurnComplete(t) if t.turn_id == "t-1" => Some("complete"),
        StateAction::ChatError(e) if e.turn_id == "t-1" => Some("error"),
        _ => None,
    })
    .await;
    assert_eq!(end, "complete");
    assert!(!file.exists(), "the denied command did not run");
    // The model's next request carries the policy's reason.
    let asked = st.model.requests();
    let after = asked.last().unwrap().to_string();
    assert!(
        after.contains("Denied by policy: no writes to denied.txt"),
        "{after}"
    );
    // The decision is in the audit chain.
    let audit = std::fs::read_to_string(st.dir.path().join("audit.jsonl")).unwrap();
    ahp_bridge_join::audit::verify_text(&audit).expect("the chain holds");
    assert!(
        audit.lines().any(|l| l.contains("\"point\":\"permission\"") && l.contains("\"outcome\":\"denied\"")),
        "{audit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_github_does_not_know_stops_the_start_in_the_hosts_words() {
    use crate::support::agent_host::agent_host_config;
    let (model, github) = crate::support::agent_host::start_fakes().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = agent_host_config(&model, &github, dir.path());
    std::fs::write(
        dir.path().join("github-token"),
        "ghu_not0a0token0github0knows000000",
    )
    .unwrap();
    let e = ahp_bridge_join::start(std::sync::Arc::new(cfg), ahp_bridge_join::Agent::Copilot)
        .await
        .err()
        .expect("the start fails")
        .to_string();
    assert!(
        e.contains("the supplied GitHub token could not be validated"),
        "{e}"
    );
    assert!(
        !e.contains("ghu_not0a0token"),
        "the token is not in the error: {e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_killed_mid_turn_comes_back_and_the_next_turn_works() {
    let st = start_agent_host_stack(|_| {}).await;
    let relay = st.bridge.relay.clone().expect("a relay");
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/relay-4", None).await;
    st.model.push(Reply::Slow {
        chunks: (0..200).map(|i| format!("slow {i} ")).collect(),
        delay: std::time::Duration::from_millis(50),
    });
    let mut sub = start_turn(&c, "relay-4", "t-1", "talk slowly").await;
    wait_action(&mut sub, |a| {
        matches!(a, StateAction::ChatDelta(_)).then_some(())
    })
    .await;
    let pid = relay.host_pid().await.expect("the bridge runs the host");
    // SAFETY: a signal to the host process this test's bridge started.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
    let end = wait_turn_end(&mut sub, "t-1").await;
    assert_eq!(end.kind, "error", "{end:?}");
    assert!(end
        .error
        .unwrap()
        .contains("connection was lost during the turn"));
    // Polled: the relay's link state has no event to wait on.
    let started = std::time::Instant::now();
    while !(relay.linked() && relay.host_pid().await.is_some_and(|p| p != pid)) {
        assert!(
            started.elapsed() < DEADLINE * 3,
            "the bridge did not link to a new host: linked {}, pid {:?} (was {pid})",
            relay.linked(),
            relay.host_pid().await
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    st.model.clear_script();
    st.model.push(Reply::Text("Back again.".into()));
    let end = run_turn(&c, "relay-4", "t-2", "are you there").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert!(st
        .model
        .requests()
        .last()
        .unwrap()
        .to_string()
        .contains("are you there"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_the_host_goes_silent_on_ends_naming_the_key_and_the_next_works() {
    let st = start_agent_host_stack(|c| {
        // Long enough that a loaded machine's host still speaks within it
        // on a normal turn; the stalled one says nothing for an hour.
        c.runtime.turn_inactivity_timeout = std::time::Duration::from_secs(8)
    })
    .await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/relay-5", None).await;
    // One word, then the model says nothing for an hour.
    st.model.push(Reply::Slow {
        chunks: vec!["Thinking".into(), " more".into()],
        delay: std::time::Duration::from_secs(3600),
    });
    let end = run_turn(&c, "relay-5", "t-1", "take your time").await;
    assert_eq!(end.kind, "error", "{end:?}");
    let said = end.error.unwrap();
    assert!(said.contains("[runtime] turn_inactivity_timeout"), "{said}");
    st.model.clear_script();
    st.model.push(Reply::Text("Awake.".into()));
    let end = run_turn(&c, "relay-5", "t-2", "still there?").await;
    assert_eq!(end.kind, "complete", "{end:?}");
}

/// A client cancels a turn whose model hangs and starts the next at once:
/// the host refuses a turn while it still finishes the cancel ("the
/// previous turn is still being cancelled"), and says nothing when it is
/// done, so the bridge sends the turn again; the client sees it complete.
/// The host's timing decides whether it refuses (about one time in three
/// here), so the test goes round four times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_started_right_after_a_cancel_completes() {
    let st = start_agent_host_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/relay-11", None).await;
    let chat = chat_of("ahp-session:/relay-11");
    let (_, mut sub) = c.subscribe(chat.clone()).await.unwrap();
    let mut seq = 0;
    for round in 0..4 {
        let (hung, next) = (format!("hung-{round}"), format!("next-{round}"));
        st.model.clear_script();
        st.model.push(Reply::Slow {
            chunks: vec!["Thinking".into(), " more".into()],
            delay: std::time::Duration::from_secs(3600),
        });
        seq += 1;
        dispatch_raw(&c, &chat, seq, json!({"type": "chat/turnStarted", "turnId": hung, "startedAt": jiff::Timestamp::now().to_string(), "message": {"text": "take your time", "origin": {"kind": "user"}}})).await;
        wait_action(&mut sub, |a| match a {
            StateAction::ChatDelta(d) if d.turn_id == hung => Some(()),
            _ => None,
        })
        .await;
        st.model.clear_script();
        st.model.push(Reply::Text("Next.".into()));
        dispatch_raw(
            &c,
            &chat,
            seq + 1,
            json!({"type": "chat/turnCancelled", "turnId": hung, "duration": 0}),
        )
        .await;
        dispatch_raw(&c, &chat, seq + 2, json!({"type": "chat/turnStarted", "turnId": next, "startedAt": jiff::Timestamp::now().to_string(), "message": {"text": "never mind", "origin": {"kind": "user"}}})).await;
        seq += 2;
        let end = wait_turn_end(&mut sub, &next).await;
        assert_eq!(end.kind, "complete", "round {round}: {end:?}");
        assert_eq!(end.text, "Next.");
    }
}

/// `[runtime] connect` to a host already running, its token from
/// `[runtime.ahp] connection_token_file`: the bridge starts no host of its
/// own, and a turn goes through the one that runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_already_running_is_reached_with_its_token_file() {
    let home = tempfile::tempdir().unwrap();
    let mut host_cfg = None;
    let st = start_agent_host_stack(|c| host_cfg = Some(c.clone())).await;
    // A second host, started here as an operator would, on the same fakes.
    let running = ahp_bridge_join::runtime::spawn_ahp_host(&host_cfg.unwrap().runtime, home.path())
        .await
        .expect("a host runs");
    let token_file = home.path().join("host-token");
    std::fs::write(&token_file, &running.token.0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = crate::support::agent_host::agent_host_config(&st.model, &st.github, dir.path());
    cfg.runtime.connect = Some(running.url.clone().into());
    cfg.runtime.ahp.connection_token_file = Some(token_file);
    let bridge = ahp_bridge_join::start(std::sync::Arc::new(cfg), ahp_bridge_join::Agent::Copilot)
        .await
        .expect("the bridge links to the running host");
    let relay = bridge.relay.clone().unwrap();
    assert!(relay.linked());
    assert_eq!(relay.host_pid().await, None, "the bridge started no host");
    let c = initialized(&bridge, "ide").await;
    ready_session(&c, "ahp-session:/relay-6", None).await;
    st.model.push(Reply::Text("From the running host.".into()));
    let end = run_turn(&c, "relay-6", "t-1", "hello").await;
    assert_eq!(
        (end.kind, end.text.as_str()),
        ("complete", "From the running host.")
    );
    drop(running);
}

/// A restart of the bridge: the host it starts again on the same HOME
/// keeps its sessions, the bridge restores its own and links each to the
/// same upstream session, and the next turn goes on with the history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_of_the_bridge_a_session_goes_on() {
    let (asked, _st, _bridge) = a_turn_after_a_restart("relay-7", |_| {}).await;
    assert!(
        asked.contains("REMEMBER-THIS"),
        "the host kept the history: {asked}"
    );
}

/// A host that lost a session (stopped before it stored it, or its state
/// wiped, as here) gets it created afresh: the session goes on without its
/// history, and the link is not held up by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_the_host_lost_is_started_afresh_and_goes_on() {
    let (asked, _st, bridge) = a_turn_after_a_restart("relay-8", |st| {
        // The host's state, beside the bridge's store, is gone.
        let store = st.cfg.state_path().expect("a state store");
        std::fs::remove_dir_all(store.parent().unwrap().join("copilot-ahp-host")).unwrap();
    })
    .await;
    assert!(asked.contains("what did I say?"), "{asked}");
    assert!(
        !asked.contains("REMEMBER-THIS"),
        "a session started afresh has no history: {asked}"
    );
    assert!(bridge.relay.as_ref().unwrap().linked());
}

/// A turn ("REMEMBER-THIS") in `session`, the bridge stopped cleanly,
/// `meanwhile`, the bridge started again and a second turn there, which
/// completes: what the model was asked for it, the stack, and the bridge
/// started again on it (last, so that it is dropped first).
async fn a_turn_after_a_restart(
    session: &str,
    meanwhile: impl FnOnce(&AgentHostStack),
) -> (String, AgentHostStack, ahp_bridge_join::Running) {
    let st = start_agent_host_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, &format!("ahp-session:/{session}"), None).await;
    st.model.push(Reply::Text("First.".into()));
    assert_eq!(
        run_turn(&c, session, "t-1", "REMEMBER-THIS").await.kind,
        "complete"
    );
    drop(c);
    assert!(
        st.bridge.stop(std::time::Duration::from_secs(30)).await,
        "a clean stop"
    );
    meanwhile(&st);
    let again = ahp_bridge_join::start(st.cfg.clone(), ahp_bridge_join::Agent::Copilot)
        .await
        .expect("the bridge starts again");
    let c = initialized(&again, "ide").await;
    st.model.push(Reply::Text("Second.".into()));
    let end = run_turn(&c, session, "t-2", "what did I say?").await;
    assert_eq!(
        (end.kind, end.text.as_str()),
        ("complete", "Second."),
        "{end:?}"
    );
    let asked = st.model.requests().last().unwrap().to_string();
    (asked, st, again)
}
