//! The host's answers at the edges of what it offers: protocol negotiation,
//! the extension advertised in `initialize`, malformed actions of known
//! types, commands it does not offer. The official client over a real
//! socket, no runtime.

use crate::support;

use ahp::SubscriptionEvent;
use ahp_bridge_join::sections::SECTION_CATALOGUE;
use serde_json::{json, Value};
use support::*;

#[tokio::test]
async fn negotiation_picks_the_highest_compatible_version_offered_and_advertises_the_extension() {
    let r = start_host(test_config()).await;
    let c = client(&r).await;
    let res = c
        .initialize("neg".into(), vec!["1.0.0".into(), "0.9.0".into()], vec![])
        .await
        .expect("initialize");
    assert_eq!(res.protocol_version, "1.0.0");
    let meta = res.meta.expect("_meta");
    let ext = &meta["systemMessageTransform"];
    assert_eq!(ext["name"], "systemMessageTransform");
    assert_eq!(ext["version"], "0.1.0");
    assert_eq!(ext["sections"], json!(SECTION_CATALOGUE.len()));
    // `@` asks for file references.
    assert_eq!(
        res.completion_trigger_characters,
        Some(vec!["@".to_string()])
    );

    // A newer compatible minor is the highest within `^1.0.0`: the spec's
    // rule picks it, whatever the order, and names the offered string.
    for (id, offer) in [("neg2", vec!["1.1.0"]), ("neg3", vec!["1.0.0", "1.1.0"])] {
        let c = client(&r).await;
        let offer = offer.into_iter().map(String::from).collect();
        let res = c
            .initialize(id.into(), offer, vec![])
            .await
            .expect("initialize");
        assert_eq!(res.protocol_version, "1.1.0");
    }
    // A malformed version is named, not silently skipped.
    let c = client(&r).await;
    let err = c
        .initialize("neg4".into(), vec!["1.0".into()], vec![])
        .await
        .expect_err("malformed");
    assert!(format!("{err:?}").contains("protocolVersions"), "{err:?}");
}

async fn rejection(c: &ahp::Client, channel: &str, seq: i64, action: Value) -> Option<String> {
    let mut events = c.events();
    dispatch_raw(c, channel, seq, action).await;
    wait_event(&mut events, |e| match e {
        SubscriptionEvent::Action(env)
            if env.origin.as_ref().is_some_and(|o| o.client_seq == seq) =>
        {
            Some(env.rejection_reason.clone())
        }
        _ => None,
    })
    .await
}

#[tokio::test]
async fn a_malformed_action_of_a_known_type_is_refused_naming_the_field() {
    let r = start_host(test_config()).await;
    let c = initialized(&r, "m").await;
    create_session(&c, "ahp-session:/m", None).await;
    c.subscribe(chat_of("ahp-session:/m"))
        .await
        .expect("subscribe");
    let no_turn_id = json!({"type": "chat/turnStarted", "startedAt": "2026-01-01T00:00:00Z",
        "message": {"text": "hi", "origin": {"kind": "user"}}});
    let reason = rejection(&c, &chat_of("ahp-session:/m"), 1, no_turn_id).await;
    assert_eq!(
        reason.as_deref(),
        Some("malformed chat/turnStarted: missing field `turnId`")
    );
    // A working directory must be local, and UTF-8, as in createSession.
    for (seq, dir) in [(3, "https://example.com/w"), (4, "file:///tmp/%FF")] {
        let set = json!({"type": "session/workingDirectorySet", "directory": dir});
        let reason = rejection(&c, "ahp-session:/m", seq, set).await.unwrap();
        assert!(reason.starts_with("field `directory`:"), "{reason}");
    }
    let bad_title = json!({"type": "session/titleChanged", "title": 7});
    let reason = rejection(&c, "ahp-session:/m", 2, bad_title).await.unwrap();
    assert!(
        reason.starts_with("malformed session/titleChanged:"),
        "{reason}"
    );
    // Nothing was applied.
    let snap = raw_subscribe(&c, &chat_of("ahp-session:/m")).await;
    assert_eq!(snap["snapshot"]["state"]["turns"], json!([]));
    assert!(snap["snapshot"]["state"].get("activeTurn").is_none());
    // A well-formed one is applied and echoed without a reason.
    let ok = json!({"type": "chat/turnStarted", "turnId": "t1", "startedAt": "2026-01-01T00:00:00Z",
        "message": {"text": "hi", "origin": {"kind": "user"}}});
    assert_eq!(rejection(&c, &chat_of("ahp-session:/m"), 3, ok).await, None);
}

/// A client's `session/configChanged` is held to the schema
/// `resolveSessionConfig` offers, as `createSession.config` is: the reducer
/// would keep any key for good, so a client changing keys grew the session
/// (and its stored row) with every message (issue 44).
#[tokio::test]
async fn a_session_config_change_outside_the_schema_is_refused() {
    let mut cfg = test_config();
    cfg.runtime.models = vec!["other-model".into()];
    let r = start_host(cfg).await;
    let c = initialized(&r, "cfg").await;
    create_session(&c, "ahp-session:/cfg", None).await;
    c.subscribe("ahp-session:/cfg".into())
        .await
        .expect("subscribe");
    let change = |config: Value| json!({"type": "session/configChanged", "config": config});
    for (seq, config, says) in [
        (
            1,
            json!({"k0001": "v"}),
            "config.\"k0001\" is not a setting of this host",
        ),
        (2, json!({"model": 7}), "config.model must be a string"),
        (
            3,
            json!({"model": "no-such-model"}),
            "model \"no-such-model\" is not offered here",
        ),
    ] {
        let reason = rejection(&c, "ahp-session:/cfg", seq, change(config)).await;
        let reason = reason.expect("refused");
        assert!(reason.starts_with(says), "{reason}");
    }
    // A model the host offers is applied, and nothing else was kept.
    let ok = change(json!({"model": "other-model"}));
    assert_eq!(rejection(&c, "ahp-session:/cfg", 4, ok).await, None);
    let snap = raw_subscribe(&c, "ahp-session:/cfg").await;
    let values = &snap["snapshot"]["state"]["config"]["values"];
    assert_eq!(values, &json!({"model": "other-model"}), "{snap}");
}

/// A session's working directories are held to `[server]
/// max_working_directories`: the reducer appends every new one for the
/// session's life (stored at each boundary), so a client adding directories
/// grew the session with every message (issue 44).
#[tokio::test]
async fn working_directories_past_the_bound_are_refused_naming_the_key() {
    let mut cfg = test_config();
    cfg.server.max_working_directories = 2;
    let r = start_host(cfg).await;
    let c = initialized(&r, "wd").await;
    let dir = |i: u32| format!("file:///tmp/wd-{i}");
    let create = |uri: &str, dirs: Vec<String>| json!({"channel": uri, "provider": "copilot", "workingDirectories": dirs});
    // createSession is held to it too.
    let e = c
        .request::<_, Value>(
            "createSession",
            create("ahp-session:/wd0", vec![dir(1), dir(2), dir(3)]),
        )
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&e), -32602, "{e}");
    assert!(
        e.to_string()
            .contains("[server] max_working_directories (2)"),
        "{e}"
    );
    c.request::<_, Value>("createSession", create("ahp-session:/wd", vec![dir(1)]))
        .await
        .expect("createSession within the bound");
    let uri = "ahp-session:/wd";
    c.subscribe(uri.into()).await.expect("subscribe");
    let set = |d: String| json!({"type": "session/workingDirectorySet", "directory": d});
    assert_eq!(rejection(&c, uri, 1, set(dir(2))).await, None);
    // One already held changes nothing: not refused at the bound.
    assert_eq!(rejection(&c, uri, 2, set(dir(1))).await, None);
    let reason = rejection(&c, uri, 3, set(dir(3))).await.expect("refused");
    assert!(
        reason.contains("holds 2 working directories")
            && reason.contains("[server] max_working_directories (2)"),
        "{reason}"
    );
    // Removing one makes room again.
    let removed = json!({"type": "session/workingDirectoryRemoved", "directory": dir(1)});
    assert_eq!(rejection(&c, uri, 4, removed).await, None);
    assert_eq!(rejection(&c, uri, 5, set(dir(3))).await, None);
    let snap = raw_subscribe(&c, uri).await;
    let held = &snap["snapshot"]["state"]["workingDirectories"];
    assert_eq!(held, &json!([dir(2), dir(3)]), "{snap}");
    // A chat's list is not a client's to grow at all.
    let chat = chat_of(uri);
    c.subscribe(chat.clone()).await.expect("subscribe");
    let chat_set = json!({"type": "chat/workingDirectorySet", "directory": dir(4)});
    let reason = rejection(&c, &chat, 6, chat_set).await.expect("refused");
    assert!(
        reason.contains("may only be dispatched by the host"),
        "{reason}"
    );
}

/// A chat's queue is held to `[server] max_queued_messages`: each queued
/// message with a new id was appended while a turn ran, with nothing but
/// `turns_per_minute` to slow it (issue 44).
#[tokio::test]
async fn queued_messages_past_the_bound_are_refused_naming_the_key() {
    let mut cfg = test_config();
    cfg.server.max_queued_messages = 2;
    let r = start_host(cfg).await;
    let c = initialized(&r, "q").await;
    create_session(&c, "ahp-session:/q", None).await;
    let chat = chat_of("ahp-session:/q");
    c.subscribe(chat.clone()).await.expect("subscribe");
    // A turn runs (no runtime ends it), so the queue waits.
    let turn = json!({"type": "chat/turnStarted", "turnId": "t1", "startedAt": "2026-01-01T00:00:00Z",
        "message": {"text": "hi", "origin": {"kind": "user"}}});
    assert_eq!(rejection(&c, &chat, 1, turn).await, None);
    let queued = |id: &str, text: &str| {
        json!({"type": "chat/pendingMessageSet", "kind": "queued", "id": id,
            "message": {"text": text, "origin": {"kind": "user"}}})
    };
    assert_eq!(rejection(&c, &chat, 2, queued("q1", "one")).await, None);
    assert_eq!(rejection(&c, &chat, 3, queued("q2", "two")).await, None);
    // A queued id is replaced in place: not refused at the bound.
    assert_eq!(
        rejection(&c, &chat, 4, queued("q1", "one again")).await,
        None
    );
    let reason = rejection(&c, &chat, 5, queued("q3", "three"))
        .await
        .expect("refused");
    assert!(
        reason.contains("holds 2 queued messages")
            && reason.contains("[server] max_queued_messages (2)"),
        "{reason}"
    );
    // Removing one makes room again.
    let removed = json!({"type": "chat/pendingMessageRemoved", "kind": "queued", "id": "q1"});
    assert_eq!(rejection(&c, &chat, 6, removed).await, None);
    assert_eq!(rejection(&c, &chat, 7, queued("q3", "three")).await, None);
    let snap = raw_subscribe(&c, &chat).await;
    let ids: Vec<&str> = snap["snapshot"]["state"]["queuedMessages"]
        .as_array()
        .expect("queued messages")
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["q2", "q3"], "{snap}");
}

#[tokio::test]
async fn commands_not_offered_are_32601_naming_the_method_and_writes_are_refused() {
    let r = start_host(test_config()).await;
    let c = initialized(&r, "n").await;
    create_session(&c, "ahp-session:/n", None).await;
    for (method, params) in [
        (
            "createChat",
            json!({"channel": "ahp-session:/n", "chat": "ahp-chat:/other"}),
        ),
        ("disposeChat", json!({"channel": chat_of("ahp-session:/n")})),
        (
            "createTerminal",
            json!({"channel": "ahp-root://", "claim": {"kind": "client", "clientId": "n"}}),
        ),
        ("disposeTerminal", json!({"channel": "ahp-terminal:/x"})),
        (
            "createResourceWatch",
            json!({"channel": "ahp-root://", "uri": "file:///tmp"}),
        ),
    ] {
        let e = c.request::<_, Value>(method, params).await.unwrap_err();
        assert_eq!(rpc_code(&e), -32601, "{method}");
        assert!(e.to_string().contains(method), "{method}: {e}");
        assert!(e.to_string().contains("not offered"), "{method}: {e}");
    }
    for method in [
        "resourceWrite",
        "resourceCopy",
        "resourceDelete",
        "resourceMove",
        "resourceMkdir",
    ] {
        let e = c
            .request::<_, Value>(
                method,
                json!({"channel": "ahp-root://", "uri": "file:///tmp/x"}),
            )
            .await
            .unwrap_err();
        assert_eq!(rpc_code(&e), -32009, "{method}");
        assert!(e.to_string().contains(method), "{method}: {e}");
        assert!(e.to_string().contains("read-only"), "{method}: {e}");
    }
    // The session and its one chat are untouched.
    let snap = raw_subscribe(&c, "ahp-session:/n").await;
    assert_eq!(
        snap["snapshot"]["state"]["chats"].as_array().unwrap().len(),
        1
    );
}

#[tokio::test]
async fn the_demo_lets_loopback_browsers_in_and_serve_does_not() {
    let mut cfg = test_config();
    cfg.server.allowed_origins = ahp_bridge_join::demo_origins(&["https://ui.example".into()]);
    let demo = start_host(cfg).await;
    for ok in [
        "http://localhost:5173",
        "http://127.0.0.1:3000",
        "http://[::1]:8080",
        "https://ui.example",
    ] {
        assert_eq!(
            support::raw::upgrade_status(demo.addr, ok).await,
            101,
            "{ok}"
        );
    }
    for bad in [
        "http://evil.example",
        "http://localhost.evil.example:5173",
        "https://ui.example:444",
    ] {
        assert_eq!(
            support::raw::upgrade_status(demo.addr, bad).await,
            403,
            "{bad}"
        );
    }
    // `serve` keeps its explicit list: by default no browser at all.
    let serve = start_host(test_config()).await;
    assert_eq!(
        support::raw::upgrade_status(serve.addr, "http://localhost:5173").await,
        403
    );
}
