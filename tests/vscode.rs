//! VS Code's conversation, frame by frame as VS Code's agent host client
//! sends them (its `agentHostProtocolClient` and chat session handler):
//! the token in `?tkn=`, `initialize` offering 0.9.0 with `clientInfo` and
//! `_meta`, eight `root/configChanged` at `clientSeq` 0, `createSession` on a
//! `copilot:/<uuid>` URI, the chat URI derived (never read from state), a
//! turn whose shell command needs permission, confirmed as the user does,
//! and `disposeSession`; in between, a restart. The real binary, the real
//! Copilot CLI, the scripted model.

use crate::support;

use std::time::Duration;

use ahp_bridge_join::ScriptedModel;
use futures_util::StreamExt;
use serde_json::{json, Value};
use support::fixtures;
use support::process::*;
use support::raw::Raw;
use tokio_tungstenite::tungstenite::Message;

/// The session as VS Code names it, and the chat URI VS Code derives from
/// it: `ahp-chat://default/` + base64url without padding of the session URI
/// (this pair is VS Code's own, not computed here).
const SESSION: &str = "copilot:/3b7e1f0a-2c4d-4e5f-8a9b-0c1d2e3f4a5b";
const CHAT: &str =
    "ahp-chat://default/Y29waWxvdDovM2I3ZTFmMGEtMmM0ZC00ZTVmLThhOWItMGMxZDJlM2Y0YTVi";
const CLIENT_ID: &str = "6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f";

/// A hang guard on each wait for the real runtime, not a speed claim.
const HANG_GUARD: Duration = Duration::from_secs(120);
/// A hang guard for the bridge's exit.
const EXIT_GUARD: Duration = Duration::from_secs(60);

/// The actions AHP 1.0 added, which a 0.9.0 client must never be sent.
const ADDED_IN_1_0: &[&str] = &[
    "session/chatsReordered",
    "session/mcpServerBackgroundRequested",
    "chat/backgroundWorkSet",
    "chat/backgroundWorkRemoved",
    "chat/movableChanged",
    "chat/changesetsChanged",
    "chat/canvasesChanged",
    "canvas/stateChanged",
    "chat/isReadChanged",
    "chat/isArchivedChanged",
];

/// One VS Code window's connection: every frame it received is kept, so
/// what it must never have been sent can be checked at the end.
struct Window {
    raw: Raw,
    seen: Vec<Value>,
    next_id: i64,
}

impl Window {
    async fn open(addr: std::net::SocketAddr) -> Self {
        Self::over(Raw::connect(&format!("ws://{addr}/?tkn={TOKEN}")).await)
    }

    /// Over `wss`, trusting what `tls` trusts.
    async fn open_tls(
        addr: std::net::SocketAddr,
        tls: std::sync::Arc<rustls::ClientConfig>,
    ) -> Self {
        let url = format!("wss://127.0.0.1:{}/?tkn={TOKEN}", addr.port());
        Self::over(Raw::connect_tls(&url, tls).await)
    }

    fn over(raw: Raw) -> Self {
        Self {
            raw,
            seen: Vec::new(),
            next_id: 1,
        }
    }

    async fn send(&mut self, frame: Value) {
        self.raw.send_text(frame.to_string()).await;
    }

    /// The next frame the host sent, kept.
    async fn frame(&mut self) -> Value {
        let next = tokio::time::timeout(HANG_GUARD, async {
            loop {
                match self.raw.ws.next().await {
                    Some(Ok(Message::Text(t))) => return serde_json::from_str(t.as_str()).unwrap(),
                    Some(Ok(Message::Close(f))) => panic!("host closed the connection: {f:?}"),
                    Some(Ok(_)) => continue,
                    other => panic!("connection lost: {other:?}"),
                }
            }
        });
        let v: Value = next.await.expect("a frame within the hang guard");
        self.seen.push(v.clone());
        v
    }

    /// Reads frames until `pick` takes one.
    async fn until<T>(&mut self, mut pick: impl FnMut(&Value) -> Option<T>) -> T {
        loop {
            let f = self.frame().await;
            if let Some(t) = pick(&f) {
                return t;
            }
        }
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let answer = self.until(|f| (f["id"] == id).then(|| f.clone())).await;
        assert!(answer.get("error").is_none(), "{method} refused: {answer}");
        answer["result"].clone()
    }

    async fn dispatch(&mut self, channel: &str, client_seq: i64, action: Value) {
        let params = json!({"channel": channel, "clientSeq": client_seq, "action": action});
        self.send(json!({"jsonrpc": "2.0", "method": "dispatchAction", "params": params}))
            .await;
    }

    /// VS Code's start: `initialize` offering what VS Code 1.138-1.140 offer,
    /// then its settings as eight `root/configChanged`, one key each.
    async fn initialize(&mut self) -> Value {
        let init = self
            .request(
                "initialize",
                json!({
                    "channel": "ahp-root://",
                    "protocolVersions": ["0.9.0", "0.7.0", "0.6.0", "0.5.2", "0.5.1"],
                    "clientId": CLIENT_ID,
                    "clientInfo": {"name": "vscode-agents-window", "title": "Visual Studio Code"},
                    "_meta": {"vscode.telemetryLevel": "all", "vscode.clientConnectionKind": "direct_websocket"},
                    "initialSubscriptions": ["ahp-root://"],
                }),
            )
            .await;
        let settings = [
            json!({"telemetryLevel": "all"}),
            json!({"sessionSyncEnabled": false}),
            json!({"terminalAutoApproveEnabled": true}),
            json!({"globalAutoApproveEnabled": false}),
            json!({"autoReplyEnabled": false}),
            json!({"preferLongContextEnabled": false}),
            json!({"systemProxyEnabled": true}),
            json!({"terminalAutoApproveRules": {"ls": true}}),
        ];
        for config in settings {
            self.dispatch(
                "ahp-root://",
                0,
                json!({"type": "root/configChanged", "config": config}),
            )
            .await;
        }
        init
    }

    /// The envelope of the first action of type `ty` on `channel`.
    async fn action(&mut self, channel: &str, ty: &str) -> Value {
        self.until(|f| {
            let env = &f["params"];
            (f["method"] == "action" && env["channel"] == channel && env["action"]["type"] == ty)
                .then(|| env.clone())
        })
        .await
    }

    /// No frame this window received is a rejection of its own actions, an
    /// action 0.9.0 does not define, or a summary in 1.0's shape.
    fn assert_spoken_as_0_9(&self) {
        for f in &self.seen {
            let env = &f["params"];
            if f["method"] == "action" {
                let ty = env["action"]["type"].as_str().unwrap_or_default();
                assert!(!ADDED_IN_1_0.contains(&ty), "a 0.9.0 client was sent {f}");
                assert!(
                    env.get("rejectionReason").is_none(),
                    "an action was rejected: {f}"
                );
            }
            if f["method"] == "root/sessionAdded" {
                assert!(
                    env["summary"].get("defaultChat").is_none(),
                    "1.0 summary sent to 0.9: {f}"
                );
                assert!(
                    env["summary"].get("chats").is_none(),
                    "1.0 summary sent to 0.9: {f}"
                );
            }
        }
    }
}

/// VS Code's session: created in `dir` with its own active-client entry,
/// subscribed, ready, and its derived chat subscribed.
async fn open_session(w: &mut Window, dir: &std::path::Path) {
    let workdir = format!("file://{}", dir.display());
    w.request(
        "createSession",
        json!({"channel": SESSION, "provider": "copilot", "workingDirectories": [workdir],
               "activeClient": {"clientId": CLIENT_ID, "tools": [], "customizations": []}}),
    )
    .await;
    let session = w.request("subscribe", json!({"channel": SESSION})).await;
    if session["snapshot"]["state"]["lifecycle"] != "ready" {
        w.action(SESSION, "session/ready").await;
    }
    w.request("subscribe", json!({"channel": CHAT})).await;
}

/// The turn: the model runs a shell command, the runtime asks permission,
/// the window confirms it as the user does; the turn completes and the
/// command has run. Returns the call's state transitions as announced.
async fn conversation(w: &mut Window, turn_id: &str, client_seq: i64) -> Vec<Value> {
    w.dispatch(
        CHAT,
        client_seq,
        json!({"type": "chat/turnStarted", "turnId": turn_id, "startedAt": "2026-11-23T12:00:00.000Z",
               "message": {"text": "Write the file", "origin": {"kind": "user"}}}),
    )
    .await;
    let mut readies = Vec::new();
    let pending = loop {
        let env = w.action(CHAT, "chat/toolCallReady").await;
        readies.push(env["action"].clone());
        if env["action"].get("confirmed").is_none() {
            break env["action"].clone();
        }
    };
    w.dispatch(
        CHAT,
        client_seq + 1,
        json!({"type": "chat/toolCallConfirmed", "turnId": turn_id, "toolCallId": pending["toolCallId"],
               "approved": true, "confirmed": "user-action"}),
    )
    .await;
    let end = w
        .until(|f| {
            let ty = f["params"]["action"]["type"].as_str()?;
            (f["method"] == "action"
                && matches!(
                    ty,
                    "chat/turnComplete" | "chat/error" | "chat/turnCancelled"
                ))
            .then(|| f["params"]["action"].clone())
        })
        .await;
    assert_eq!(end["type"], "chat/turnComplete", "{end}");
    assert_eq!(end["turnId"], turn_id);
    readies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vs_code_holds_a_conversation_that_survives_a_restart() {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut first = BridgeProcess::start_in(&model, dir.path(), "", None);
    let mut w = Window::open(first.addr).await;
    let init = w.initialize().await;
    assert_eq!(init["protocolVersion"], "0.9.0", "{init}");

    let workdir = format!("file://{}", dir.path().display());
    let created = w
        .request(
            "createSession",
            json!({"channel": SESSION, "provider": "copilot", "workingDirectories": [workdir],
                   "activeClient": {"clientId": CLIENT_ID, "tools": [], "customizations": []}}),
        )
        .await;
    assert!(created.is_null() || created.is_object(), "{created}");
    let session = w.request("subscribe", json!({"channel": SESSION})).await;
    assert_eq!(
        session["snapshot"]["state"]["defaultChat"], CHAT,
        "{session}"
    );
    if session["snapshot"]["state"]["lifecycle"] != "ready" {
        w.action(SESSION, "session/ready").await;
    }
    let chat = w.request("subscribe", json!({"channel": CHAT})).await;
    assert_eq!(chat["snapshot"]["resource"], CHAT, "{chat}");

    fixtures::script(&model, "shell-permission");
    let readies = conversation(&mut w, "request_9d1c0c3e-7a51-4b8e-9c52-1f0e2d3c4b5a", 1).await;
    // Streaming, then pending confirmation: never announced as running first.
    assert!(
        readies.iter().all(|r| r.get("confirmed").is_none()),
        "a call that needs permission was announced running: {readies:?}"
    );
    let ran = std::fs::read_to_string(dir.path().join("ran.txt")).expect("the command ran");
    assert_eq!(ran.trim(), "42-ran");
    w.assert_spoken_as_0_9();

    let status = first.signal_and_wait("TERM", EXIT_GUARD);
    assert_eq!(status.code(), Some(0), "{status:?}");
    let second = BridgeProcess::start_in(&model, dir.path(), "", None);
    let mut w = Window::open(second.addr).await;
    w.initialize().await;
    let listed = w.request("listSessions", json!({})).await;
    let item = listed["items"]
        .as_array()
        .and_then(|items| items.iter().find(|s| s["resource"] == SESSION))
        .unwrap_or_else(|| panic!("{SESSION} listed after the restart: {listed}"))
        .clone();
    assert!(item.get("defaultChat").is_none(), "0.9 summary: {item}");
    let chat = w.request("subscribe", json!({"channel": CHAT})).await;
    let turns = &chat["snapshot"]["state"]["turns"];
    assert_eq!(turns.as_array().map(Vec::len), Some(1), "{chat}");

    // The restored session holds the next conversation too.
    std::fs::remove_file(dir.path().join("ran.txt")).unwrap();
    fixtures::script(&model, "shell-permission");
    w.request("subscribe", json!({"channel": SESSION})).await;
    conversation(&mut w, "request_2", 1).await;
    assert!(dir.path().join("ran.txt").exists(), "the command ran again");

    let disposed = w
        .request("disposeSession", json!({"channel": SESSION}))
        .await;
    assert!(disposed.is_null() || disposed.is_object(), "{disposed}");
    let listed = w.request("listSessions", json!({})).await;
    assert_eq!(listed["items"], json!([]), "{listed}");
    w.assert_spoken_as_0_9();
}

/// The same frames over `wss`, to a bridge serving a certificate made here
/// that the window trusts: the conversation holds as it does in clear.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vs_code_holds_a_conversation_over_wss() {
    let pki = support::tls::Pki::new();
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let b = BridgeProcess::start_in(&model, dir.path(), &pki.server_toml("server", ""), None);
    let mut w = Window::open_tls(b.addr, pki.client_config(None)).await;
    let init = w.initialize().await;
    assert_eq!(init["protocolVersion"], "0.9.0", "{init}");
    open_session(&mut w, dir.path()).await;
    fixtures::script(&model, "shell-permission");
    conversation(&mut w, "request_tls", 1).await;
    assert!(dir.path().join("ran.txt").exists(), "the command ran");
    w.assert_spoken_as_0_9();
}

/// VS Code's frames to the bridge in front of the runtime's own AHP host
/// (`[runtime] protocol = "ahp"`): the same conversation holds, the shell
/// command asks VS Code and runs; and neither the bridge's GitHub token
/// nor the host's connection token is in the bridge's log or audit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vs_code_holds_a_conversation_through_the_agent_host() {
    use crate::support::agent_host::{agent_host_toml, start_fakes, GITHUB_TOKEN};
    let (model, github) = start_fakes().await;
    let dir = tempfile::tempdir().unwrap();
    let config = agent_host_toml(&model, &github, dir.path(), ("", "", ""));
    let b = BridgeProcess::start_config(dir.path(), &config);
    let mut w = Window::open(b.addr).await;
    let init = w.initialize().await;
    assert_eq!(init["protocolVersion"], "0.9.0", "{init}");
    open_session(&mut w, dir.path()).await;
    fixtures::script(&model, "shell-permission");
    conversation(&mut w, "request_relay", 1).await;
    let ran = std::fs::read_to_string(dir.path().join("ran.txt")).expect("the command ran");
    assert_eq!(ran.trim(), "42-ran");
    w.assert_spoken_as_0_9();

    let log = b.all_log_lines().join("\n");
    assert!(log.contains("linked to the agent host"), "{log}");
    let audit = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    for (what, text) in [("log", &log), ("audit", &audit)] {
        assert!(
            !text.contains(GITHUB_TOKEN),
            "the GitHub token is in the {what}"
        );
        assert!(
            !text.contains("tkn="),
            "a connection token is in the {what}"
        );
        assert!(
            !text.contains("copilot-sealed"),
            "a sealed token is in the {what}"
        );
    }
}
