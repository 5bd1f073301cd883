//! A first turn with one transform: through the bridge vs the runtime
//! driven directly.
//!
//! Both sides run the real Copilot CLI (each its own process and home),
//! pointed at the same scripted model on loopback (short replies).
//! - Bridged: the bridge (in this process, with an audit log and the state
//!   store next to it, as an operator runs it) and an official `ahp` client
//!   over a real WebSocket, opted in to `tone`, answering its
//!   `systemMessageTransform` request at once. Timed from dispatching
//!   `chat/turnStarted` to receiving `chat/turnComplete`.
//! - Direct: a JSON-RPC client on the CLI's stdio creates a session with the
//!   same parameters the bridge sends (`tone` registered for `transform`),
//!   answers `systemMessage.transform` itself, and is timed from
//!   `session.send` to `session.idle`.
//!
//! Each round makes a fresh session on each side (the transform fires on a
//! session's first turn), runs its first turn, and disposes it; rounds
//! alternate which side goes first. The session's creation is timed apart:
//! direct, the `session.create` call; through the bridge, from sending
//! `createSession` to the client's receiving `session/ready` (the moment a
//! user can start a turn; the bridge answers `createSession` at once and
//! creates the runtime session after).
//!
//! Run: cargo bench --bench first_turn_transform [-- ROUNDS]

#[path = "../tests/support/mod.rs"]
mod support;

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahp::Client;
use ahp_bridge_join::config::Config;
use ahp_bridge_join::offline_runtime;
use ahp_bridge_join::runtime::start_runtime;
use ahp_bridge_join::runtime::RuntimeEvent;
use ahp_bridge_join::runtime::{
    send_params, SessionCreate, SessionDestroy, SessionRef, SessionSend,
};
use ahp_bridge_join::runtime::{
    ModelProvider, SectionAction, SectionOverride, SessionConfig, SystemMessage,
};
use ahp_bridge_join::runtime::{RuntimeAnswer, RuntimeRequest, UserInputAnswer};
use ahp_bridge_join::runtime::{RuntimeConn, RuntimeHandler, RuntimeReplyFuture};
use ahp_bridge_join::Agent;
use ahp_bridge_join::{ScriptedModel, DEFAULT_REPLY};
use ahp_types::actions::StateAction;
use common::{ms, pct};
use serde_json::{json, Value};
use support::create_session;
use support::e2e::{wait_action, wait_turn_end};
use tokio::sync::mpsc;

const SECTION: &str = "tone";
const PROMPT: &str = "Say hello.";

fn house_style(sections: BTreeMap<String, String>) -> BTreeMap<String, String> {
    sections
        .into_iter()
        .map(|(k, v)| (k, format!("{v} (house style)")))
        .collect()
}

/// The direct client's side of the runtime connection: transforms answered
/// at once, the end of each turn reported.
struct Direct {
    idle: mpsc::UnboundedSender<String>,
    transforms: Arc<AtomicUsize>,
}

impl RuntimeHandler for Direct {
    fn event(&self, session_id: &str, _id: Option<&str>, event: RuntimeEvent) {
        if matches!(event, RuntimeEvent::Idle) {
            let _ = self.idle.send(session_id.to_owned());
        }
    }

    fn request(&self, request: RuntimeRequest) -> RuntimeReplyFuture {
        let answer = match request {
            RuntimeRequest::Transform { sections, .. } => {
                self.transforms.fetch_add(1, Ordering::Relaxed);
                RuntimeAnswer::Transformed(house_style(sections))
            }
            RuntimeRequest::UserInput { .. } => {
                RuntimeAnswer::UserInput(UserInputAnswer::NoResponse)
            }
            RuntimeRequest::Hooks => RuntimeAnswer::Hooks,
        };
        Box::pin(async move { answer })
    }
}

struct DirectSide {
    conn: Arc<RuntimeConn>,
    idle: mpsc::UnboundedReceiver<String>,
    transforms: Arc<AtomicUsize>,
    cfg: Config,
    _child: Option<tokio::process::Child>,
}

impl DirectSide {
    async fn start(cfg: Config) -> Self {
        let (tx, idle) = mpsc::unbounded_channel();
        let transforms = Arc::new(AtomicUsize::new(0));
        let handler = Arc::new(Direct {
            idle: tx,
            transforms: transforms.clone(),
        });
        let rt = start_runtime(&cfg.runtime, 0, handler, false)
            .await
            .unwrap();
        Self {
            conn: rt.conn,
            idle,
            transforms,
            cfg,
            _child: rt.child,
        }
    }

    /// The `session.create` params the bridge sends for a session whose
    /// one active client opted in to [`SECTION`].
    fn create_params(&self, id: &str) -> SessionConfig {
        let r = &self.cfg.runtime;
        SessionConfig {
            session_id: id.to_owned(),
            model: r.model.clone(),
            working_directory: r.working_directory.as_ref().unwrap().display().to_string(),
            tools: vec![],
            provider: r.provider.as_ref().map(|p| ModelProvider {
                kind: p.kind.clone(),
                base_url: p.base_url.clone(),
                api_key: p.resolved_api_key(),
            }),
            system_message: Some(SystemMessage {
                sections: BTreeMap::from([(
                    SECTION.to_owned(),
                    SectionOverride {
                        action: SectionAction::Transform,
                        content: None,
                    },
                )]),
            }),
            github_token: None,
            customizations: Default::default(),
        }
    }

    /// The session's creation and its first turn, each timed.
    async fn first_turn(&mut self) -> Timed {
        let id = uuid::Uuid::new_v4().to_string();
        let before = self.transforms.load(Ordering::Relaxed);
        let created = Instant::now();
        self.conn
            .call::<SessionCreate>(&self.create_params(&id))
            .await
            .unwrap();
        let create = created.elapsed();
        let t0 = Instant::now();
        self.conn
            .call::<SessionSend>(&send_params(&id, PROMPT))
            .await
            .unwrap();
        loop {
            let s = tokio::time::timeout(Duration::from_secs(60), self.idle.recv())
                .await
                .expect("the turn ends within 60 s")
                .unwrap();
            if s == id {
                break;
            }
        }
        let turn = t0.elapsed();
        assert_eq!(self.transforms.load(Ordering::Relaxed), before + 1);
        self.conn
            .call::<SessionDestroy>(&SessionRef::new(&id))
            .await
            .unwrap();
        Timed { create, turn }
    }
}

/// One round's two timings on one side.
struct Timed {
    create: Duration,
    turn: Duration,
}

async fn bridged_first_turn(c: &Client, transforms: &AtomicUsize, i: usize) -> Timed {
    let id = format!("b{i}");
    let active = json!({"clientId": "bench", "tools": [], "systemMessageTransform": {"sections": [SECTION]}});
    let uri = format!("ahp-session:/{id}");
    // The host subscribes the creator to its session: attached before the
    // request (no `subscribe` round trip), the client sees `session/ready`.
    let mut session = c.attach_subscription(&uri).await;
    let created = Instant::now();
    create_session(c, &uri, Some(active)).await;
    wait_action(&mut session, |a| match a {
        StateAction::SessionReady(_) => Some(()),
        StateAction::SessionCreationFailed(f) => panic!("creation failed: {:?}", f.error),
        _ => None,
    })
    .await;
    let create = created.elapsed();
    let chat = ahp_bridge_join::ahp::uri::chat_uri_of(&format!("ahp-session:/{id}"));
    let (_, mut sub) = c.subscribe(chat.clone()).await.unwrap();
    let before = transforms.load(Ordering::Relaxed);
    let t0 = Instant::now();
    support::dispatch_raw(
        c,
        &chat,
        1,
        json!({"type": "chat/turnStarted", "turnId": "t1",
        "startedAt": jiff::Timestamp::now().to_string(),
        "message": {"text": PROMPT, "origin": {"kind": "user"}}}),
    )
    .await;
    let end = wait_turn_end(&mut sub, "t1").await;
    let turn = t0.elapsed();
    assert_eq!((end.kind, end.text.as_str()), ("complete", DEFAULT_REPLY));
    assert_eq!(transforms.load(Ordering::Relaxed), before + 1);
    for ch in [chat, format!("ahp-session:/{id}")] {
        c.unsubscribe(ch).await.unwrap();
    }
    let _: Value = c
        .request(
            "disposeSession",
            json!({"channel": format!("ahp-session:/{id}")}),
        )
        .await
        .unwrap();
    Timed { create, turn }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(60);
    // On a worker thread, like the bridge's own tasks (see transform_roundtrip).
    tokio::spawn(run(rounds)).await.unwrap();
}

async fn run(rounds: usize) {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = Config::default();
    cfg.server.listen = "127.0.0.1:0".parse().unwrap();
    cfg.runtime.working_directory = Some(dir.path().to_owned());
    // A load test, not a runaway client: more turns a minute than the default allows.
    cfg.server.turns_per_minute = 1_000_000;
    let mut direct_cfg = cfg.clone();
    offline_runtime(&mut cfg, &model.base_url(), &dir.path().join("bridge"));
    cfg.audit.path = Some(dir.path().join("bridge/audit.jsonl"));
    offline_runtime(
        &mut direct_cfg,
        &model.base_url(),
        &dir.path().join("direct"),
    );
    let bridge = ahp_bridge_join::start(Arc::new(cfg), Agent::Copilot)
        .await
        .unwrap();
    let c = support::client(&bridge).await;
    c.initialize("bench".into(), vec!["1.0.0".into()], vec![])
        .await
        .unwrap();
    let transforms = Arc::new(AtomicUsize::new(0));
    let counted = transforms.clone();
    c.set_server_request_handler(move |_, p: Value| {
        counted.fetch_add(1, Ordering::Relaxed);
        async move { Ok(common::house_style(&p)) }
    });
    let mut direct = DirectSide::start(direct_cfg).await;
    // Warm-up: both runtimes start, and each side has run a few turns.
    for i in 0..3 {
        bridged_first_turn(&c, &transforms, 1000 + i).await;
        direct.first_turn().await;
    }
    let (mut via_bridge, mut via_direct) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        if i % 2 == 0 {
            via_bridge.push(bridged_first_turn(&c, &transforms, i).await);
            via_direct.push(direct.first_turn().await);
        } else {
            via_direct.push(direct.first_turn().await);
            via_bridge.push(bridged_first_turn(&c, &transforms, i).await);
        }
    }
    // The model got the transformed section on both sides.
    let requests = model.requests();
    let transformed = requests
        .iter()
        .filter(|r| ScriptedModel::system_prompt(r).is_some_and(|p| p.contains("(house style)")))
        .count();
    assert!(
        transformed >= 2 * rounds,
        "{transformed} of {}",
        requests.len()
    );
    let (mut create_bridge, mut create_direct): (Vec<Duration>, Vec<Duration>) = (
        via_bridge.iter().map(|t| t.create).collect(),
        via_direct.iter().map(|t| t.create).collect(),
    );
    let (mut via_bridge, mut via_direct): (Vec<Duration>, Vec<Duration>) = (
        via_bridge.iter().map(|t| t.turn).collect(),
        via_direct.iter().map(|t| t.turn).collect(),
    );
    println!("first turn with one transform ({SECTION}), {rounds} rounds, real Copilot CLI, scripted model on loopback");
    let row = |name: &str, v: &mut Vec<Duration>| {
        let (p50, p90, min) = (pct(v, 0.5), pct(v, 0.9), pct(v, 0.0));
        println!(
            "  {name:<18}: p50 {:>8}  p90 {:>8}  min {:>8}",
            ms(p50),
            ms(p90),
            ms(min)
        );
        p50
    };
    // Per round, bridge minus direct, its median: robust to drift over the run.
    let median_diff = |bridged: &[Duration], direct: &[Duration]| -> f64 {
        let mut diffs: Vec<f64> = bridged
            .iter()
            .zip(direct)
            .map(|(b, d)| b.as_secs_f64() - d.as_secs_f64())
            .collect();
        diffs.sort_by(f64::total_cmp);
        diffs[diffs.len() / 2]
    };
    let diff = median_diff(&via_bridge, &via_direct);
    let d = row("direct runtime", &mut via_direct);
    let b = row("through the bridge", &mut via_bridge);
    println!(
        "  ratio at p50      : {:.2}x ({:+.1} ms)",
        b.as_secs_f64() / d.as_secs_f64(),
        (b.as_secs_f64() - d.as_secs_f64()) * 1e3
    );
    println!(
        "  median of the per-round differences (bridge - direct): {:+.1} ms",
        diff * 1e3
    );
    println!(
        "creating the session (direct: session.create; bridged: createSession to session/ready)"
    );
    let create_diff = median_diff(&create_bridge, &create_direct);
    let d = row("direct runtime", &mut create_direct);
    let b = row("through the bridge", &mut create_bridge);
    let p99 = |v: &mut Vec<Duration>| pct(v, 0.99);
    println!(
        "  p99: direct {}  bridged {}",
        ms(p99(&mut create_direct)),
        ms(p99(&mut create_bridge))
    );
    println!(
        "  ratio at p50      : {:.3}x ({:+.2} ms); median of the per-round differences {:+.2} ms",
        b.as_secs_f64() / d.as_secs_f64(),
        (b.as_secs_f64() - d.as_secs_f64()) * 1e3,
        create_diff * 1e3
    );
    bridge.stop(Duration::from_secs(10)).await;
}
