//! A bridge on a fake runtime (`support::fake_runtime`) with one ready
//! session, for the tests of faults only a fake can show.

use std::sync::Arc;
use std::time::Duration;

use ahp::Client;
use ahp_bridge_join::config::Config;
use ahp_bridge_join::{Agent, Running};
use serde_json::{json, Value};

use super::e2e::{creation_outcome, wait_turn_end, TurnEnd};
use super::fake_runtime::{FakeConn, FakeRuntime};
use super::{chat_of, create_session, initialized, test_config};

pub(crate) struct Fixture {
    pub fake: FakeRuntime,
    pub bridge: Running,
    pub client: Client,
    pub conn: FakeConn,
    /// The runtime session id the bridge chose for `ahp-session:/f`.
    pub runtime_id: String,
}

/// A bridge connected to a fake runtime, with one ready session.
pub(crate) async fn fixture(tune: impl FnOnce(&mut Config)) -> Fixture {
    fixture_with(tune, None).await
}

/// The bridge and the fake runtime, before any session.
pub(crate) async fn bridge_on_fake(
    tune: impl FnOnce(&mut Config),
) -> (FakeRuntime, Running, Client) {
    let fake = FakeRuntime::start().await;
    let mut cfg = test_config();
    cfg.runtime.connect = Some(fake.addr.to_string().into());
    cfg.runtime.call_timeout = Duration::from_secs(2);
    cfg.runtime.health_interval = Duration::ZERO;
    tune(&mut cfg);
    let bridge = ahp_bridge_join::start(Arc::new(cfg), Agent::Copilot)
        .await
        .unwrap();
    let client = initialized(&bridge, "ide").await;
    (fake, bridge, client)
}

/// As [`fixture`], the session created with `active` as its active client.
pub(crate) async fn fixture_with(tune: impl FnOnce(&mut Config), active: Option<Value>) -> Fixture {
    let (fake, bridge, client) = bridge_on_fake(tune).await;
    create_session(&client, "ahp-session:/f", active).await;
    let mut conn = fake.next_conn().await;
    let create = conn.call_of("session.create").await;
    let runtime_id = create["params"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(creation_outcome(&client, "ahp-session:/f").await, None);
    Fixture {
        fake,
        bridge,
        client,
        conn,
        runtime_id,
    }
}

impl Fixture {
    pub(crate) async fn start_turn(&self, turn: &str, text: &str) -> ahp::SessionSubscription {
        super::e2e::start_turn(&self.client, "f", turn, text).await
    }

    /// A whole turn the fake runtime answers with `reply`.
    pub(crate) async fn turn(&mut self, turn: &str, reply: &str) -> TurnEnd {
        self.fake.apply("echo-turn");
        let mut sub = self.start_turn(turn, reply).await;
        let end = wait_turn_end(&mut sub, turn).await;
        self.fake.apply("default");
        end
    }
}

pub(crate) async fn raw_chat_subscriber(f: &Fixture, client_id: &str) -> super::raw::Raw {
    let mut raw = super::raw::Raw::connect(&format!("ws://{}", f.bridge.addr)).await;
    raw.call(
        json!(1),
        "initialize",
        json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": client_id}),
    )
    .await;
    raw.call(
        json!(2),
        "subscribe",
        json!({"channel": chat_of("ahp-session:/f")}),
    )
    .await;
    raw
}
