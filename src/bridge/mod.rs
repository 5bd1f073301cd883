//! The bridge: the only place that joins the north side (the AHP host), the
//! south side (the runtime) and the transform core. One runtime session per
//! AHP session.
//!
//! - north -> south: the host's [`ClientPhase`]s, dispatched below;
//! - south -> north: runtime events and requests, in [`runtime_side`];
//! - the runtime process: [`supervisor`]; binding a session: [`binding`];
//! - a turn's life: [`turn`] (state in [`session`], event mapping in
//!   [`actions`]); tools and permissions: [`tools`]; user questions: [`input`];
//! - transforms: the router asks clients through [`transform_clients`].

pub mod actions;
pub mod audit_port;
pub mod binding;
pub mod input;
pub mod models;
pub mod pending;
pub mod runtime_side;
pub mod session;
pub mod shutdown;
pub mod supervisor;
pub mod tools;
pub mod transform_clients;
pub mod turn;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use serde_json::Value;
use tracing::warn;

use self::session::BridgedSession;
use self::shutdown::InFlight;
use self::supervisor::Slot;
use crate::ahp::backend::{Backend, ClientPhase};
use crate::ahp::host::Host;
use crate::config::Config;
use crate::policy::PolicyReader;
use crate::runtime::wire;
use crate::transform::router::Router;

pub struct Bridge {
    me: Weak<Bridge>,
    host: Weak<Host>,
    cfg: Arc<Config>,
    router: Arc<Router>,
    /// The policy in force, for bindings (the router reads the same one).
    policy: PolicyReader,
    /// The runtimes sessions live on (`[runtime] processes`).
    pool: Vec<Slot>,
    /// Counts runtime starts across the pool: a binding names the start it
    /// lives in.
    generation: AtomicU64,
    sessions: Mutex<HashMap<String, BridgedSession>>,
    /// Runtime session id -> AHP session URI.
    by_runtime: Mutex<HashMap<String, String>>,
    /// Set by a shutdown: no runtime is started or restarted any more.
    stopping: AtomicBool,
    /// The runtime's requests not answered yet.
    in_flight: InFlight,
}

impl Bridge {
    pub fn new(host: &Arc<Host>, router: Arc<Router>, policy: PolicyReader) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            host: Arc::downgrade(host),
            cfg: host.config().clone(),
            router,
            policy,
            pool: (0..host.config().runtime.pool_size().max(1))
                .map(|_| Slot::new())
                .collect(),
            generation: AtomicU64::new(0),
            sessions: Mutex::new(HashMap::new()),
            by_runtime: Mutex::new(HashMap::new()),
            stopping: AtomicBool::new(false),
            in_flight: InFlight::new(),
        })
    }

    fn host(&self) -> Option<Arc<Host>> {
        self.host.upgrade()
    }

    fn sessions(&self) -> MutexGuard<'_, HashMap<String, BridgedSession>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The AHP session URI of a runtime session.
    fn session_of_runtime(&self, runtime_id: &str) -> Option<String> {
        self.by_runtime
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(runtime_id)
            .cloned()
    }

    /// Applies host actions on a channel; a refused one is a bug worth a warning.
    fn emit(&self, channel: &str, actions: Vec<Value>) {
        let Some(host) = self.host() else { return };
        for a in actions {
            if let Err(e) = host.server_action(channel, a.clone()) {
                warn!(channel, action = %a["type"], "host refused a bridge action: {e}");
            }
        }
    }

    /// Calls runtime `slot` and logs a failure: for answers nobody here
    /// waits on.
    async fn call_runtime_on(&self, slot: usize, method: &str, params: Value) {
        match self.runtime(slot).await {
            Ok((conn, _)) => {
                if let Err(e) = conn.call(method, params).await {
                    warn!(method, "runtime call failed: {e}");
                }
            }
            Err(e) => warn!(method, "no runtime: {e:#}"),
        }
    }

    /// Calls, in the background, the runtime that `runtime_id` lives on.
    fn spawn_call(&self, runtime_id: &str, method: &'static str, params: Value) {
        self.spawn_call_on(self.slot_of_runtime_session(runtime_id), method, params);
    }

    /// [`Self::call_runtime_on`] in the background.
    fn spawn_call_on(&self, slot: usize, method: &'static str, params: Value) {
        let me = self.me.upgrade();
        tokio::spawn(async move {
            if let Some(b) = me {
                b.call_runtime_on(slot, method, params).await;
            }
        });
    }
}

impl Backend for Bridge {
    fn session_created(&self, session: &str) {
        if let Some(me) = self.me.upgrade() {
            tokio::spawn(me.create(session.to_owned()));
        }
    }

    fn session_restored(&self, session: &str, backend_ref: Option<&str>) {
        // A reference is stored once the runtime has the session on disk
        // (after its first message): then it is resumed, history and all.
        let runtime_id = backend_ref
            .map(String::from)
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        self.by_runtime
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(runtime_id.clone(), session.to_owned());
        self.place_session(session, runtime_id, backend_ref.is_some());
    }

    fn authenticated(&self, principal: &str) {
        self.hand_credentials(principal);
    }

    fn session_disposed(&self, session: &str) {
        let Some(c) = self.sessions().remove(session) else {
            return;
        };
        self.by_runtime
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&c.runtime_id);
        if c.bound.is_some() {
            self.spawn_call_on(
                c.slot,
                wire::method::SESSION_DESTROY,
                wire::session_ref(&c.runtime_id),
            );
        }
    }

    fn phase(&self, session: &str, phase: ClientPhase) {
        match phase {
            ClientPhase::TurnStarted {
                chat,
                turn_id,
                text,
                model,
            } => {
                if let Some(me) = self.me.upgrade() {
                    let turn = turn::TurnRequest {
                        chat,
                        turn_id,
                        prompt: text,
                        model,
                    };
                    tokio::spawn(me.start_turn(session.to_owned(), turn));
                }
            }
            ClientPhase::PendingMessageSet { chat, steering } => {
                self.pending_message_set(session, &chat, steering)
            }
            ClientPhase::TurnCancelled { .. } => self.cancel_turn(session),
            ClientPhase::ToolCallConfirmed {
                tool_call_id,
                approved,
            } => self.tool_call_confirmed(session, &tool_call_id, approved),
            ClientPhase::ToolCallCompleted {
                tool_call_id,
                result,
            } => self.client_tool_completed(session, &tool_call_id, &result),
            ClientPhase::InputCompleted(completed) => self.input_completed(session, &completed),
            ClientPhase::ActiveClientRemoved { client_id } => {
                self.active_client_removed(session, &client_id)
            }
        }
    }
}
