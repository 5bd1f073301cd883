//! The AHP host state: root, sessions and chats, one monotonic `serverSeq`, the
//! replay buffer, the connections and what each subscribes to.
//!
//! State is typed (`ahp-types`) and changed only by the official reducers.
//! The extension fields those types drop (`systemMessageTransform` on an active
//! client, `systemMessageSections` on the agent) are kept beside the typed
//! state and put back into every snapshot; actions are echoed as the client
//! sent them, so extension fields survive there too.
//!
//! One `std::sync::Mutex` guards everything and is never held across an await:
//! sends to clients are `try_send` on bounded queues, so a slow client cannot
//! stall the host; it is disconnected instead.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use ahp::reducers::{
    apply_action_to_chat, apply_action_to_root, apply_action_to_session, ReduceOutcome,
};
use ahp_types::actions::StateAction;
use ahp_types::state::{ChatState, RootState, SessionState};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::dispatch::{channel_kind, client_may_dispatch, needs_tool_owner, ChannelKind};
use crate::config::Config;
use crate::jsonrpc::{self, Peer, RpcError, INVALID_PARAMS, INVALID_REQUEST};
use crate::transform::policy::{OptIn, SECTION_CATALOGUE};

pub const ROOT_URI: &str = "ahp-root://";
pub const PROVIDER: &str = "copilot";
const SESSION_ALREADY_EXISTS: i32 = -32003;
const SESSION_NOT_FOUND: i32 = -32001;
const PROVIDER_NOT_FOUND: i32 = -32002;
const UNSUPPORTED_PROTOCOL_VERSION: i32 = -32005;

pub type ConnId = u64;

/// The seam to whatever runs the agent. The host calls these after it has
/// applied and broadcast the matching state change; the backend answers by
/// dispatching server actions through [`Host::server_action`].
pub trait Backend: Send + Sync + 'static {
    /// A session exists in state with lifecycle `creating`; end it with
    /// `session/ready` or `session/creationFailed`.
    fn session_created(&self, session: &str);
    /// A session was disposed.
    fn session_disposed(&self, session: &str);
    /// A client action was applied to `channel` of `session` (already echoed).
    fn client_action(&self, session: &str, channel: &str, action: &Value, client_id: &str);
    /// An active client left `session`: it removed itself, or its grace
    /// period ran out after it disconnected.
    fn active_client_removed(&self, _session: &str, _client_id: &str) {}
}

/// A backend without an agent: sessions become ready at once, turns do nothing.
pub struct NullBackend(pub std::sync::Weak<Host>);

impl Backend for NullBackend {
    fn session_created(&self, session: &str) {
        if let Some(h) = self.0.upgrade() {
            let _ = h.server_action(session, json!({"type": "session/ready"}));
        }
    }
    fn session_disposed(&self, _: &str) {}
    fn client_action(&self, _: &str, _: &str, _: &Value, _: &str) {}
}

/// What the transform core needs to know about an active client.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveClientView {
    pub client_id: String,
    pub tools: Vec<Value>,
    /// Raw `systemMessageTransform.sections`, as the client sent them.
    pub opt_in: Vec<String>,
}

impl From<&ActiveClientView> for OptIn {
    fn from(c: &ActiveClientView) -> Self {
        OptIn {
            client_id: c.client_id.clone(),
            sections: c.opt_in.clone(),
        }
    }
}

struct Conn {
    tx: mpsc::Sender<String>,
    close: CancellationToken,
    peer: Arc<Peer>,
    client_id: Option<String>,
    subs: HashSet<String>,
}

struct SessionEntry {
    state: SessionState,
    chat: String,
    /// clientId -> the raw `systemMessageTransform` object of its active-client entry.
    opt_ins: BTreeMap<String, Value>,
    /// toolCallId -> clientId of the client that contributed the tool.
    tool_owners: HashMap<String, String>,
    created_at: String,
}

struct Presence {
    conn: Option<ConnId>,
    /// Bumped on every connect, so a grace timer knows it is stale.
    generation: u64,
}

struct State {
    seq: u64,
    root: RootState,
    sessions: BTreeMap<String, SessionEntry>,
    chats: HashMap<String, (ChatState, String)>,
    replay: VecDeque<(u64, Value)>,
    conns: HashMap<ConnId, Conn>,
    clients: HashMap<String, Presence>,
    next_conn: ConnId,
}

pub struct Host {
    cfg: Arc<Config>,
    state: Mutex<State>,
    backend: OnceLock<Arc<dyn Backend>>,
    grace_timers_fired: std::sync::atomic::AtomicU64,
}

pub fn now_iso() -> String {
    jiff::Timestamp::now().to_string()
}

fn err(code: i32, msg: impl Into<String>) -> RpcError {
    RpcError::new(code, msg)
}

/// Session URIs are client-chosen: `ahp-session:/` and a non-empty id of safe characters.
pub fn session_id_of(uri: &str) -> Option<&str> {
    let id = uri.strip_prefix("ahp-session:/")?;
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    ok.then_some(id)
}

fn field<'a>(params: &'a Value, name: &str) -> Result<&'a Value, RpcError> {
    params
        .get(name)
        .ok_or_else(|| err(INVALID_PARAMS, format!("missing field `{name}`")))
}

fn str_field<'a>(params: &'a Value, name: &str) -> Result<&'a str, RpcError> {
    field(params, name)?
        .as_str()
        .ok_or_else(|| err(INVALID_PARAMS, format!("field `{name}` must be a string")))
}

impl Host {
    pub fn new(cfg: Arc<Config>) -> Arc<Self> {
        let mut models: Vec<String> = vec![cfg.runtime.model.clone()];
        for m in &cfg.runtime.models {
            if !models.contains(m) {
                models.push(m.clone());
            }
        }
        let root: RootState = serde_json::from_value(json!({
            "agents": [{
                "provider": PROVIDER,
                "displayName": "GitHub Copilot",
                "description": "The GitHub Copilot agent runtime, through ahp-copilot-bridge",
                "models": models.iter().map(|m| json!({"id": m, "provider": PROVIDER, "name": m})).collect::<Vec<_>>(),
            }],
            "activeSessions": 0,
        }))
        .expect("static root state");
        Arc::new(Self {
            cfg,
            state: Mutex::new(State {
                seq: 0,
                root,
                sessions: BTreeMap::new(),
                chats: HashMap::new(),
                replay: VecDeque::new(),
                conns: HashMap::new(),
                clients: HashMap::new(),
                next_conn: 1,
            }),
            backend: OnceLock::new(),
            grace_timers_fired: Default::default(),
        })
    }

    pub fn config(&self) -> &Arc<Config> {
        &self.cfg
    }

    pub fn set_backend(&self, backend: Arc<dyn Backend>) {
        let _ = self.backend.set(backend);
    }

    fn backend(&self) -> Option<Arc<dyn Backend>> {
        self.backend.get().cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    // ── connections ──────────────────────────────────────────────────────

    /// Registers a new connection; returns its id and the peer for host->client calls.
    pub fn connect(
        &self,
        tx: mpsc::Sender<String>,
        close: CancellationToken,
    ) -> (ConnId, Arc<Peer>) {
        let mut st = self.lock();
        let id = st.next_conn;
        st.next_conn += 1;
        let (ptx, pclose) = (tx.clone(), close.clone());
        let peer = Peer::new(move |msg| enqueue(&ptx, &pclose, msg.to_string(), id));
        st.conns.insert(
            id,
            Conn {
                tx,
                close,
                peer: peer.clone(),
                client_id: None,
                subs: HashSet::new(),
            },
        );
        (id, peer)
    }

    /// A connection ended: its pending host->client requests fail now, and
    /// its active-client entries are removed after the grace period unless
    /// the client comes back.
    pub fn disconnect(self: &Arc<Self>, conn: ConnId) {
        let (client, generation) = {
            let mut st = self.lock();
            let Some(c) = st.conns.remove(&conn) else {
                return;
            };
            c.peer.close();
            let Some(client) = c.client_id else { return };
            let Some(p) = st.clients.get_mut(&client) else {
                return;
            };
            if p.conn != Some(conn) {
                return;
            }
            p.conn = None;
            (client, p.generation)
        };
        info!(client_id = %client, "client disconnected; grace period {:?}", self.cfg.server.client_grace);
        let host = self.clone();
        let grace = self.cfg.server.client_grace;
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            host.grace_expired(&client, generation);
        });
    }

    fn grace_expired(&self, client: &str, generation: u64) {
        self.grace_expired_inner(client, generation);
        self.grace_timers_fired
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// How many grace timers have run out (whether or not they removed anyone).
    pub fn grace_timers_fired(&self) -> u64 {
        self.grace_timers_fired
            .load(std::sync::atomic::Ordering::Acquire)
    }

    fn grace_expired_inner(&self, client: &str, generation: u64) {
        let sessions: Vec<String> = {
            let st = self.lock();
            match st.clients.get(client) {
                Some(p) if p.conn.is_none() && p.generation == generation => {}
                _ => return,
            }
            st.sessions
                .iter()
                .filter(|(_, s)| s.state.active_clients.iter().any(|c| c.client_id == client))
                .map(|(u, _)| u.clone())
                .collect()
        };
        for s in sessions {
            info!(client_id = %client, session = %s, "grace period over; removing active client");
            let removed = self.server_action(
                &s,
                json!({"type": "session/activeClientRemoved", "clientId": client}),
            );
            if let (Ok(_), Some(b)) = (removed, self.backend()) {
                b.active_client_removed(&s, client);
            }
        }
    }

    /// The connection a client id is bound to now, if it is connected.
    pub fn client_peer(&self, client_id: &str) -> Option<Arc<Peer>> {
        let st = self.lock();
        let conn = st.clients.get(client_id)?.conn?;
        st.conns.get(&conn).map(|c| c.peer.clone())
    }

    pub fn is_connected(&self, client_id: &str) -> bool {
        self.client_peer(client_id).is_some()
    }

    pub fn client_id_of(&self, conn: ConnId) -> Option<String> {
        self.lock()
            .conns
            .get(&conn)
            .and_then(|c| c.client_id.clone())
    }

    fn bind_client(&self, st: &mut State, conn: ConnId, client_id: &str) -> Result<(), RpcError> {
        if client_id.is_empty() || client_id.len() > 256 {
            return Err(err(
                INVALID_PARAMS,
                "field `clientId` must be 1 to 256 characters",
            ));
        }
        let Some(c) = st.conns.get(&conn) else {
            return Err(err(INVALID_REQUEST, "connection closed"));
        };
        if let Some(bound) = &c.client_id {
            return Err(err(
                INVALID_REQUEST,
                format!("connection already initialized as {bound:?}"),
            ));
        }
        if let Some(p) = st.clients.get(client_id) {
            if p.conn
                .is_some_and(|other| other != conn && st.conns.contains_key(&other))
            {
                return Err(err(
                    INVALID_REQUEST,
                    format!("clientId {client_id:?} is in use by another connection"),
                ));
            }
        }
        let p = st.clients.entry(client_id.to_owned()).or_insert(Presence {
            conn: None,
            generation: 0,
        });
        p.conn = Some(conn);
        p.generation += 1;
        if let Some(c) = st.conns.get_mut(&conn) {
            c.client_id = Some(client_id.to_owned());
        }
        Ok(())
    }

    // ── requests ─────────────────────────────────────────────────────────

    /// Answers one client request. `Err` with code -32005 tells the caller to close.
    pub fn request(
        self: &Arc<Self>,
        conn: ConnId,
        method: &str,
        params: &Value,
    ) -> Result<Value, RpcError> {
        if method == "ping" {
            // The response itself is the signal; the official client expects `null`.
            return Ok(Value::Null);
        }
        let initialized = self.client_id_of(conn).is_some();
        match method {
            "initialize" => return self.initialize(conn, params),
            "reconnect" => return self.reconnect(conn, params),
            _ if !initialized => {
                return Err(err(
                    INVALID_REQUEST,
                    format!("{method}: call initialize (or reconnect) first"),
                ))
            }
            _ => {}
        }
        if !params.is_object() {
            return Err(err(INVALID_PARAMS, "params must be an object"));
        }
        match method {
            "subscribe" => self.subscribe(conn, str_field(params, "channel")?),
            "createSession" => self.create_session(conn, params),
            "disposeSession" => self.dispose_session(str_field(params, "channel")?),
            "listSessions" => Ok(self.list_sessions()),
            "fetchTurns" => {
                let chat = str_field(params, "channel")?;
                if self.lock().chats.contains_key(chat) {
                    Ok(json!({}))
                } else {
                    Err(err(SESSION_NOT_FOUND, format!("no chat {chat}")))
                }
            }
            _ => Err(RpcError::method_not_found(method)),
        }
    }

    fn initialize(&self, conn: ConnId, params: &Value) -> Result<Value, RpcError> {
        let versions: Vec<String> =
            serde_json::from_value(field(params, "protocolVersions")?.clone()).map_err(|_| {
                err(
                    INVALID_PARAMS,
                    "field `protocolVersions` must be an array of strings",
                )
            })?;
        let client_id = str_field(params, "clientId")?;
        let chosen = match ahp_types::negotiate_protocol_version(&versions) {
            Ok(Some(v)) => v.to_owned(),
            Ok(None) | Err(_) => {
                return Err(err(
                    UNSUPPORTED_PROTOCOL_VERSION,
                    "no supported protocol version offered",
                )
                .with_data(json!({"supportedVersions": ahp_types::SUPPORTED_PROTOCOL_VERSIONS})))
            }
        };
        let initial: Vec<String> = match params.get("initialSubscriptions") {
            None | Some(Value::Null) => vec![],
            Some(v) => serde_json::from_value(v.clone()).map_err(|_| {
                err(
                    INVALID_PARAMS,
                    "field `initialSubscriptions` must be an array of strings",
                )
            })?,
        };
        let mut st = self.lock();
        self.bind_client(&mut st, conn, client_id)?;
        let mut snapshots = Vec::new();
        for uri in initial {
            if let Some(s) = self.subscribe_locked(&mut st, conn, &uri)? {
                snapshots.push(s);
            }
        }
        info!(client_id, protocol = %chosen, "client initialized");
        Ok(json!({
            "protocolVersion": chosen,
            "serverSeq": st.seq,
            "serverInfo": {"name": "ahp-copilot-bridge", "version": env!("CARGO_PKG_VERSION"), "title": "AHP bridge for GitHub Copilot"},
            "snapshots": snapshots,
        }))
    }

    fn reconnect(&self, conn: ConnId, params: &Value) -> Result<Value, RpcError> {
        let client_id = str_field(params, "clientId")?;
        let last = field(params, "lastSeenServerSeq")?
            .as_u64()
            .ok_or_else(|| {
                err(
                    INVALID_PARAMS,
                    "field `lastSeenServerSeq` must be a non-negative integer",
                )
            })?;
        let subs: Vec<String> = serde_json::from_value(field(params, "subscriptions")?.clone())
            .map_err(|_| {
                err(
                    INVALID_PARAMS,
                    "field `subscriptions` must be an array of strings",
                )
            })?;
        let mut st = self.lock();
        self.bind_client(&mut st, conn, client_id)?;
        let oldest = st.replay.front().map(|(s, _)| *s).unwrap_or(st.seq + 1);
        // Replay is possible when every action after `last` is still buffered.
        let can_replay = last <= st.seq && last + 1 >= oldest;
        let mut missing = Vec::new();
        let mut live = Vec::new();
        for uri in &subs {
            if self.exists(&st, uri) && live.len() < self.cfg.server.max_subscriptions {
                live.push(uri.clone());
            } else {
                missing.push(uri.clone());
            }
        }
        if can_replay {
            let set: HashSet<&String> = live.iter().collect();
            let actions: Vec<Value> = st
                .replay
                .iter()
                .filter(|(s, e)| {
                    *s > last
                        && e["channel"]
                            .as_str()
                            .is_some_and(|c| set.contains(&c.to_string()))
                })
                .map(|(_, e)| e.clone())
                .collect();
            if let Some(c) = st.conns.get_mut(&conn) {
                c.subs.extend(live);
            }
            info!(
                client_id,
                replayed = actions.len(),
                "client reconnected by replay"
            );
            Ok(json!({"type": "replay", "actions": actions, "missing": missing}))
        } else {
            let mut snapshots = Vec::new();
            for uri in &live {
                if let Some(s) = self.subscribe_locked(&mut st, conn, uri)? {
                    snapshots.push(s);
                }
            }
            info!(client_id, "client reconnected by snapshot");
            Ok(json!({"type": "snapshot", "snapshots": snapshots}))
        }
    }

    fn exists(&self, st: &State, uri: &str) -> bool {
        uri == ROOT_URI || st.sessions.contains_key(uri) || st.chats.contains_key(uri)
    }

    fn subscribe(&self, conn: ConnId, uri: &str) -> Result<Value, RpcError> {
        let mut st = self.lock();
        let snap = self.subscribe_locked(&mut st, conn, uri)?;
        Ok(json!({"snapshot": snap}))
    }

    fn subscribe_locked(
        &self,
        st: &mut State,
        conn: ConnId,
        uri: &str,
    ) -> Result<Option<Value>, RpcError> {
        let snap = self
            .snapshot_locked(st, uri)
            .ok_or_else(|| err(SESSION_NOT_FOUND, format!("no such channel: {uri}")))?;
        let c = st
            .conns
            .get_mut(&conn)
            .ok_or_else(|| err(INVALID_REQUEST, "connection closed"))?;
        if !c.subs.contains(uri) && c.subs.len() >= self.cfg.server.max_subscriptions {
            return Err(err(
                INVALID_REQUEST,
                format!(
                    "at most {} subscriptions per connection",
                    self.cfg.server.max_subscriptions
                ),
            ));
        }
        c.subs.insert(uri.to_owned());
        Ok(Some(snap))
    }

    /// `unsubscribe` notification. An active client that stops watching its
    /// session is no longer active there.
    pub fn unsubscribe(&self, conn: ConnId, uri: &str) {
        let client = {
            let mut st = self.lock();
            let Some(c) = st.conns.get_mut(&conn) else {
                return;
            };
            c.subs.remove(uri);
            let client = c.client_id.clone();
            match (client, st.sessions.get(uri)) {
                (Some(cl), Some(s)) if s.state.active_clients.iter().any(|a| a.client_id == cl) => {
                    cl
                }
                _ => return,
            }
        };
        let _ = self.server_action(
            uri,
            json!({"type": "session/activeClientRemoved", "clientId": client}),
        );
    }

    /// A snapshot `{resource, state, fromSeq}` with extension fields restored.
    pub fn snapshot(&self, uri: &str) -> Option<Value> {
        let st = self.lock();
        self.snapshot_locked(&st, uri)
    }

    fn snapshot_locked(&self, st: &State, uri: &str) -> Option<Value> {
        let state = if uri == ROOT_URI {
            self.root_json(st)
        } else if let Some(s) = st.sessions.get(uri) {
            session_json(s)
        } else if let Some((c, _)) = st.chats.get(uri) {
            serde_json::to_value(c).ok()?
        } else {
            return None;
        };
        Some(json!({"resource": uri, "state": state, "fromSeq": st.seq}))
    }

    fn root_json(&self, st: &State) -> Value {
        let mut v = serde_json::to_value(&st.root).unwrap_or(Value::Null);
        let catalogue: Vec<Value> = SECTION_CATALOGUE
            .iter()
            .map(|s| {
                let mut e = json!({"id": s.id, "label": s.label, "description": s.description});
                if self.cfg.policy.restricted.iter().any(|r| r == s.id) {
                    e["restricted"] = json!(true);
                }
                e
            })
            .collect();
        if let Some(agent) = v["agents"].get_mut(0) {
            agent["systemMessageSections"] = Value::Array(catalogue);
        }
        v
    }

    fn create_session(self: &Arc<Self>, conn: ConnId, params: &Value) -> Result<Value, RpcError> {
        let uri = str_field(params, "channel")?;
        let id = session_id_of(uri).ok_or_else(|| {
            err(INVALID_PARAMS, "field `channel` must be `ahp-session:/<id>` with an id of letters, digits, `-`, `_` or `.`")
        })?;
        if let Some(p) = params.get("provider").and_then(Value::as_str) {
            if p != PROVIDER {
                return Err(err(
                    PROVIDER_NOT_FOUND,
                    format!("unknown provider {p:?}; this host has {PROVIDER:?}"),
                ));
            }
        }
        let dirs: Vec<String> = match params.get("workingDirectories") {
            None | Some(Value::Null) => vec![],
            Some(v) => serde_json::from_value(v.clone()).map_err(|_| {
                err(
                    INVALID_PARAMS,
                    "field `workingDirectories` must be an array of URIs",
                )
            })?,
        };
        let me = self.client_id_of(conn).unwrap_or_default();
        let active = match params.get("activeClient") {
            None | Some(Value::Null) => None,
            Some(a) => {
                let parsed: ahp_types::state::SessionActiveClient =
                    serde_json::from_value(a.clone())
                        .map_err(|e| err(INVALID_PARAMS, format!("field `activeClient`: {e}")))?;
                if parsed.client_id != me {
                    return Err(err(
                        INVALID_PARAMS,
                        "field `activeClient.clientId` must be the caller's own clientId",
                    ));
                }
                Some(a.clone())
            }
        };
        let chat = format!("ahp-chat:/{id}");
        let now = now_iso();
        let state: SessionState = serde_json::from_value(json!({
            "provider": PROVIDER, "title": "New session", "status": 1, "lifecycle": "creating",
            "activeClients": [], "chats": [{"resource": chat, "title": "Chat", "status": 1, "modifiedAt": now}],
            "defaultChat": chat, "workingDirectories": dirs,
        }))
        .map_err(|e| err(INVALID_PARAMS, e.to_string()))?;
        let chat_state: ChatState = serde_json::from_value(
            json!({"resource": chat, "title": "Chat", "status": 1, "modifiedAt": now, "turns": []}),
        )
        .map_err(|e| err(INVALID_PARAMS, e.to_string()))?;
        let summary = {
            let mut st = self.lock();
            if st.sessions.contains_key(uri) {
                return Err(err(
                    SESSION_ALREADY_EXISTS,
                    format!("session {uri} already exists"),
                ));
            }
            let entry = SessionEntry {
                state,
                chat: chat.clone(),
                opt_ins: BTreeMap::new(),
                tool_owners: HashMap::new(),
                created_at: now.clone(),
            };
            let summary = summary_json(uri, &entry);
            st.sessions.insert(uri.to_owned(), entry);
            st.chats.insert(chat.clone(), (chat_state, uri.to_owned()));
            // The creator watches its own session from the start.
            if let Some(c) = st.conns.get_mut(&conn) {
                if c.subs.len() < self.cfg.server.max_subscriptions {
                    c.subs.insert(uri.to_owned());
                }
            }
            summary
        };
        info!(session = %uri, client_id = %me, "session created");
        self.notify_root(
            "root/sessionAdded",
            json!({"channel": ROOT_URI, "summary": summary}),
        );
        self.update_active_sessions();
        if let Some(a) = active {
            let _ = self.server_action_with_origin(
                uri,
                json!({"type": "session/activeClientSet", "activeClient": a}),
                None,
            );
        }
        if let Some(b) = self.backend() {
            b.session_created(uri);
        }
        Ok(json!({}))
    }

    fn dispose_session(&self, uri: &str) -> Result<Value, RpcError> {
        {
            let mut st = self.lock();
            let Some(entry) = st.sessions.remove(uri) else {
                return Err(err(SESSION_NOT_FOUND, format!("no session {uri}")));
            };
            st.chats.remove(&entry.chat);
            for c in st.conns.values_mut() {
                c.subs.remove(uri);
                c.subs.remove(&entry.chat);
            }
        }
        info!(session = %uri, "session disposed");
        self.notify_root(
            "root/sessionRemoved",
            json!({"channel": ROOT_URI, "session": uri}),
        );
        self.update_active_sessions();
        if let Some(b) = self.backend() {
            b.session_disposed(uri);
        }
        Ok(json!({}))
    }

    fn list_sessions(&self) -> Value {
        let st = self.lock();
        let items: Vec<Value> = st
            .sessions
            .iter()
            .map(|(u, e)| summary_json(u, e))
            .collect();
        json!({"items": items})
    }

    fn update_active_sessions(&self) {
        let n = self.lock().sessions.len();
        let _ = self.server_action(
            ROOT_URI,
            json!({"type": "root/activeSessionsChanged", "activeSessions": n}),
        );
    }

    fn notify_root(&self, method: &str, params: Value) {
        let st = self.lock();
        let text = jsonrpc::notification(method, &params).to_string();
        for (id, c) in &st.conns {
            if c.subs.contains(ROOT_URI) {
                enqueue(&c.tx, &c.close, text.clone(), *id);
            }
        }
    }

    // ── actions ──────────────────────────────────────────────────────────

    /// A host-originated action: applied, sequenced, buffered and broadcast.
    pub fn server_action(&self, channel: &str, action: Value) -> Result<u64, String> {
        self.server_action_with_origin(channel, action, None)
    }

    fn server_action_with_origin(
        &self,
        channel: &str,
        action: Value,
        origin: Option<Value>,
    ) -> Result<u64, String> {
        let typed: StateAction =
            serde_json::from_value(action.clone()).map_err(|e| format!("malformed action: {e}"))?;
        let mut st = self.lock();
        apply(&mut st, channel, &typed, &action)?;
        Ok(self.commit(&mut st, channel, action, origin))
    }

    fn commit(&self, st: &mut State, channel: &str, action: Value, origin: Option<Value>) -> u64 {
        st.seq += 1;
        let seq = st.seq;
        let mut env = json!({"channel": channel, "action": action, "serverSeq": seq});
        if let Some(o) = origin {
            env["origin"] = o;
        }
        st.replay.push_back((seq, env.clone()));
        while st.replay.len() > self.cfg.server.replay_buffer {
            st.replay.pop_front();
        }
        let text = jsonrpc::notification("action", &env).to_string();
        for (id, c) in &st.conns {
            if c.subs.contains(channel) {
                enqueue(&c.tx, &c.close, text.clone(), *id);
            }
        }
        seq
    }

    /// `dispatchAction` from a client: checked against the table and the
    /// sending connection, applied, echoed to subscribers with `origin`; a
    /// refused action goes back to the sender alone with `rejectionReason`.
    pub fn client_dispatch(&self, conn: ConnId, params: &Value) {
        let Some(client_id) = self.client_id_of(conn) else {
            return;
        };
        let channel = params
            .get("channel")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let client_seq = params.get("clientSeq").cloned().unwrap_or(json!(0));
        let action = params.get("action").cloned().unwrap_or(Value::Null);
        let origin = json!({"clientId": client_id, "clientSeq": client_seq});
        let outcome = self.try_client_action(&client_id, &channel, &action, origin.clone());
        match outcome {
            Ok(session) => {
                if let (Some(b), Some(s)) = (self.backend(), session) {
                    b.client_action(&s, &channel, &action, &client_id);
                    if action["type"] == "session/activeClientRemoved" {
                        if let Some(gone) = action["clientId"].as_str() {
                            b.active_client_removed(&s, gone);
                        }
                    }
                }
            }
            Err(reason) => {
                debug!(client_id = %client_id, channel = %channel, %reason, "action refused");
                let st = self.lock();
                if let Some(c) = st.conns.get(&conn) {
                    let env = json!({"channel": channel, "action": action, "serverSeq": st.seq, "origin": origin, "rejectionReason": reason});
                    enqueue(
                        &c.tx,
                        &c.close,
                        jsonrpc::notification("action", &env).to_string(),
                        conn,
                    );
                }
            }
        }
    }

    /// Returns the session the action belongs to.
    fn try_client_action(
        &self,
        client_id: &str,
        channel: &str,
        action: &Value,
        origin: Value,
    ) -> Result<Option<String>, String> {
        let ty = action
            .get("type")
            .and_then(Value::as_str)
            .ok_or("action has no `type`")?;
        let kind = channel_kind(channel);
        client_may_dispatch(kind, ty)?;
        let typed: StateAction =
            serde_json::from_value(action.clone()).map_err(|e| format!("malformed {ty}: {e}"))?;
        let mut st = self.lock();
        let session = match kind {
            ChannelKind::Session => {
                if !st.sessions.contains_key(channel) {
                    return Err(format!("no session {channel}"));
                }
                match &typed {
                    StateAction::SessionActiveClientSet(a)
                        if a.active_client.client_id != client_id =>
                    {
                        return Err("activeClientSet may only set the sender's own clientId".into())
                    }
                    StateAction::SessionActiveClientRemoved(a) if a.client_id != client_id => {
                        return Err(
                            "activeClientRemoved may only remove the sender's own clientId".into(),
                        )
                    }
                    _ => {}
                }
                Some(channel.to_owned())
            }
            ChannelKind::Chat => {
                let (_, s) = st
                    .chats
                    .get(channel)
                    .ok_or_else(|| format!("no chat {channel}"))?;
                let s = s.clone();
                if needs_tool_owner(ty) {
                    let call = action
                        .get("toolCallId")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let owner = st.sessions.get(&s).and_then(|e| e.tool_owners.get(call));
                    if owner.map(String::as_str) != Some(client_id) {
                        return Err(format!(
                            "{ty} may only come from the client that owns tool call {call:?}"
                        ));
                    }
                }
                Some(s)
            }
            ChannelKind::Root => None,
            ChannelKind::Other => return Err(format!("unknown channel {channel}")),
        };
        apply(&mut st, channel, &typed, action)?;
        self.commit(&mut st, channel, action.clone(), Some(origin));
        Ok(session)
    }

    // ── queries for the bridge ───────────────────────────────────────────

    pub fn working_directory(&self, session: &str) -> Option<String> {
        let st = self.lock();
        st.sessions
            .get(session)?
            .state
            .working_directories
            .as_ref()?
            .first()
            .cloned()
    }

    /// The session's active clients in order, with their tools and raw opt-ins.
    pub fn active_clients(&self, session: &str) -> Vec<ActiveClientView> {
        let st = self.lock();
        let Some(s) = st.sessions.get(session) else {
            return vec![];
        };
        s.state
            .active_clients
            .iter()
            .map(|c| ActiveClientView {
                client_id: c.client_id.clone(),
                tools: c
                    .tools
                    .iter()
                    .filter_map(|t| serde_json::to_value(t).ok())
                    .collect(),
                opt_in: s
                    .opt_ins
                    .get(&c.client_id)
                    .and_then(|o| o.get("sections"))
                    .and_then(|v| serde_json::from_value(v.clone()).ok())
                    .unwrap_or_default(),
            })
            .collect()
    }

    /// Records the contributor of a client tool call, so only it may complete it.
    pub fn set_tool_owner(&self, session: &str, tool_call_id: &str, client_id: &str) {
        if let Some(s) = self.lock().sessions.get_mut(session) {
            s.tool_owners
                .insert(tool_call_id.to_owned(), client_id.to_owned());
        }
    }
}

/// Queues a text for a connection; a full queue disconnects the client
/// (bounded memory: it is not reading).
fn enqueue(
    tx: &mpsc::Sender<String>,
    close: &CancellationToken,
    text: String,
    conn: ConnId,
) -> bool {
    match tx.try_send(text) {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(_)) => {
            if !close.is_cancelled() {
                warn!(
                    conn,
                    "client is not reading (outbound queue full); disconnecting it"
                );
                close.cancel();
            }
            false
        }
        Err(mpsc::error::TrySendError::Closed(_)) => false,
    }
}

fn apply(st: &mut State, channel: &str, typed: &StateAction, raw: &Value) -> Result<(), String> {
    let outcome = match channel_kind(channel) {
        ChannelKind::Root => apply_action_to_root(&mut st.root, typed),
        ChannelKind::Session => {
            let s = st
                .sessions
                .get_mut(channel)
                .ok_or_else(|| format!("no session {channel}"))?;
            let o = apply_action_to_session(&mut s.state, typed);
            if o == ReduceOutcome::Applied {
                keep_extension(s, typed, raw);
            }
            o
        }
        ChannelKind::Chat => {
            let (c, _) = st
                .chats
                .get_mut(channel)
                .ok_or_else(|| format!("no chat {channel}"))?;
            apply_action_to_chat(c, typed)
        }
        ChannelKind::Other => return Err(format!("unknown channel {channel}")),
    };
    match outcome {
        ReduceOutcome::Applied | ReduceOutcome::NoOp => Ok(()),
        ReduceOutcome::OutOfScope => Err("action does not apply to this channel".into()),
        ReduceOutcome::Invalid(e) => Err(format!("invalid action: {e}")),
    }
}

/// Keeps the `systemMessageTransform` opt-in that `ahp-types` drops.
fn keep_extension(s: &mut SessionEntry, typed: &StateAction, raw: &Value) {
    match typed {
        StateAction::SessionActiveClientSet(a) => {
            let id = &a.active_client.client_id;
            match raw.pointer("/activeClient/systemMessageTransform") {
                Some(v) if !v.is_null() => s.opt_ins.insert(id.clone(), v.clone()),
                _ => s.opt_ins.remove(id),
            };
        }
        StateAction::SessionActiveClientRemoved(a) => {
            s.opt_ins.remove(&a.client_id);
        }
        _ => {}
    }
}

fn session_json(s: &SessionEntry) -> Value {
    let mut v = serde_json::to_value(&s.state).unwrap_or(Value::Null);
    if let Some(list) = v.get_mut("activeClients").and_then(Value::as_array_mut) {
        for c in list {
            let id = c["clientId"].as_str().unwrap_or_default().to_owned();
            if let Some(o) = s.opt_ins.get(&id) {
                c["systemMessageTransform"] = o.clone();
            }
        }
    }
    v
}

fn summary_json(uri: &str, s: &SessionEntry) -> Value {
    json!({
        "resource": uri, "provider": PROVIDER, "title": s.state.title, "status": s.state.status,
        "createdAt": s.created_at, "modifiedAt": now_iso(), "defaultChat": s.chat,
        "workingDirectories": s.state.working_directories,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_uris() {
        assert_eq!(session_id_of("ahp-session:/abc-1"), Some("abc-1"));
        assert_eq!(session_id_of("ahp-session:/"), None);
        assert_eq!(session_id_of("ahp-session:/a/b"), None);
        assert_eq!(session_id_of("http://x"), None);
    }

    #[test]
    fn root_state_advertises_sections_and_restriction() {
        let host = Host::new(Arc::new(Config::default()));
        let snap = host.snapshot(ROOT_URI).unwrap();
        let secs = snap["state"]["agents"][0]["systemMessageSections"]
            .as_array()
            .unwrap();
        assert_eq!(secs.len(), SECTION_CATALOGUE.len());
        let safety = secs.iter().find(|s| s["id"] == "safety").unwrap();
        assert_eq!(safety["restricted"], true);
        assert!(secs
            .iter()
            .find(|s| s["id"] == "tone")
            .unwrap()
            .get("restricted")
            .is_none());
        assert_eq!(snap["state"]["agents"][0]["provider"], "copilot");
    }
}
