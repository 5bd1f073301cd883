//! Test support: start the bridge in-process, connect the official `ahp`
//! client over a real WebSocket, and a raw socket for what the client cannot send.
#![allow(dead_code)]

pub(crate) mod agent_host;
pub(crate) mod browser;
pub(crate) mod console;
pub(crate) mod e2e;
pub(crate) mod fake_fixture;
pub(crate) mod fake_runtime;
pub(crate) mod fake_scenario;
pub(crate) mod fixtures;
pub(crate) mod http;
pub(crate) mod jwt;
pub(crate) mod process;
pub(crate) mod prometheus;
pub(crate) mod raw;
pub(crate) mod rsyslog;
pub(crate) mod sdk;
pub(crate) mod sdk_stack;
pub(crate) mod tls;

use std::sync::Arc;
use std::time::Duration;

use ahp::{Client, ClientConfig, ClientEventStream, SubscriptionEvent};
use ahp_bridge_join::audit::sha256_hex;
use ahp_bridge_join::config::{Config, PrincipalConfig, Role};
use ahp_bridge_join::{Agent, Running};
use serde_json::{json, Value};

pub(crate) const DEADLINE: Duration = Duration::from_secs(20);

/// Bridge logs in tests, only when `AHP_BRIDGE_LOG` asks for them
/// (e.g. `AHP_BRIDGE_LOG=debug cargo test -- --nocapture`).
pub(crate) fn init_test_logs() {
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("AHP_BRIDGE_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    }
}

/// The default chat of a session, as the host publishes it (and as a
/// client such as VS Code derives it).
pub(crate) fn chat_of(session: &str) -> String {
    ahp_bridge_join::ahp::uri::chat_uri_of(session)
}

pub(crate) fn test_config() -> Config {
    init_test_logs();
    let mut cfg = Config::default();
    cfg.server.listen = "127.0.0.1:0".parse().unwrap();
    // Tests in one process must not share the admin port.
    cfg.admin.listen = None;
    cfg
}

pub(crate) async fn start_host(cfg: Config) -> Running {
    ahp_bridge_join::start(Arc::new(cfg), Agent::None)
        .await
        .expect("host starts")
}

pub(crate) async fn client(r: &Running) -> Client {
    client_at(r.addr).await
}

/// The official client over a WebSocket to `addr`, not yet initialized.
pub(crate) async fn client_at(addr: std::net::SocketAddr) -> Client {
    client_at_url(&format!("ws://{addr}")).await
}

/// The official client over a WebSocket to `url` (with its query), not yet initialized.
pub(crate) async fn client_at_url(url: &str) -> Client {
    let t = ahp_ws::WebSocketTransport::connect(url)
        .await
        .expect("ws connect");
    Client::connect(t, ClientConfig::default())
        .await
        .expect("client")
}

/// The official client authenticated with `?tkn=` (what browser clients
/// send), not yet initialized.
pub(crate) async fn client_with_token(addr: std::net::SocketAddr, token: &str) -> Client {
    client_at_url(&format!("ws://{addr}/?tkn={token}")).await
}

/// The official client authenticated with `?tkn=`, initialized as `client_id`.
pub(crate) async fn initialized_with_token(
    addr: std::net::SocketAddr,
    token: &str,
    client_id: &str,
) -> Client {
    let c = client_with_token(addr, token).await;
    c.initialize(client_id.into(), vec!["1.0.0".into()], vec![])
        .await
        .expect("initialize");
    c
}

/// A principal named `name`, known by `token`, holding `roles` (the rest
/// as configured by default).
pub(crate) fn token_principal(name: &str, token: &str, roles: &[Role]) -> PrincipalConfig {
    PrincipalConfig {
        name: name.into(),
        token_sha256: Some(sha256_hex(token.as_bytes())),
        roles: roles.to_vec(),
        ..Default::default()
    }
}

pub(crate) async fn initialized(r: &Running, client_id: &str) -> Client {
    let c = client(r).await;
    c.initialize(
        client_id.into(),
        vec!["1.0.0".into()],
        vec!["ahp-root://".into()],
    )
    .await
    .expect("initialize");
    c
}

/// A `systemMessageTransform` answer: each requested section's content with
/// `line(id)` appended on a line of its own.
pub(crate) fn append_to_each(params: &Value, line: impl Fn(&str) -> String) -> Value {
    let mut out = serde_json::Map::new();
    for (id, section) in params["sections"].as_object().expect("sections") {
        let text = section["content"].as_str().expect("a section's content");
        out.insert(
            id.clone(),
            json!({"content": format!("{text}\n{}", line(id))}),
        );
    }
    json!({"sections": out})
}

/// Answers every transform request by appending `line` to each section.
pub(crate) fn answer_by_appending(c: &Client, line: &'static str) {
    c.set_server_request_handler(move |_, p: Value| async move {
        Ok(append_to_each(&p, |_| line.to_owned()))
    });
}

/// Every file under `dir` (recursively) whose extension is `ext`.
pub(crate) fn files_with_ext(dir: &std::path::Path, ext: &str, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            files_with_ext(&p, ext, out);
        } else if p.extension().is_some_and(|e| e == ext) {
            out.push(p);
        }
    }
}

/// `subscribe` answered as raw JSON, so extension fields are visible.
pub(crate) async fn raw_subscribe(c: &Client, uri: &str) -> Value {
    c.request::<_, Value>("subscribe", json!({"channel": uri}))
        .await
        .expect("subscribe")
}

/// `dispatchAction` with a raw action (the typed API would drop extension fields).
pub(crate) async fn dispatch_raw(c: &Client, channel: &str, seq: i64, action: Value) {
    c.notify(
        "dispatchAction",
        json!({"channel": channel, "clientSeq": seq, "action": action}),
    )
    .await
    .expect("dispatch");
}

/// Dispatches `action` on `channel` and returns the rejection reason it
/// comes back with.
pub(crate) async fn reject_reason(c: &Client, channel: &str, action: Value) -> String {
    let mut events = c.events();
    dispatch_raw(c, channel, 99, action).await;
    wait_event(&mut events, |e| match e {
        SubscriptionEvent::Action(env) if env.rejection_reason.is_some() => {
            env.rejection_reason.clone()
        }
        _ => None,
    })
    .await
}

/// As [`dispatch_raw`], with a `_meta` (e.g. a W3C `traceparent`).
pub(crate) async fn dispatch_raw_with_meta(
    c: &Client,
    channel: &str,
    seq: i64,
    action: Value,
    meta: Value,
) {
    c.notify(
        "dispatchAction",
        json!({"channel": channel, "clientSeq": seq, "action": action, "_meta": meta}),
    )
    .await
    .expect("dispatch");
}

pub(crate) async fn create_session(c: &Client, uri: &str, active_client: Option<Value>) {
    let mut p = json!({"channel": uri, "provider": "copilot"});
    if let Some(a) = active_client {
        p["activeClient"] = a;
    }
    c.request::<_, Value>("createSession", p)
        .await
        .expect("createSession");
}

/// The JSON-RPC error code of a request the host refused; panics on any other
/// failure (a closed transport is no refusal).
pub(crate) fn rpc_code(e: &ahp::ClientError) -> i32 {
    match e {
        ahp::ClientError::Rpc(rpc) => rpc.code,
        other => panic!("expected a JSON-RPC error, got: {other}"),
    }
}

/// Waits for the first event that `pick` accepts, up to the deadline.
pub(crate) async fn wait_event<T>(
    events: &mut ClientEventStream,
    mut pick: impl FnMut(&SubscriptionEvent) -> Option<T>,
) -> T {
    tokio::time::timeout(DEADLINE, async {
        loop {
            let ev = events.recv().await.expect("client event stream ended");
            if let Some(t) = pick(&ev.event) {
                return t;
            }
        }
    })
    .await
    .expect("event within the deadline")
}

/// Polls `cond` until true or the deadline: for facts with no event to wait on.
pub(crate) async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
