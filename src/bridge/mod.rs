//! The bridge: one runtime session per AHP session. It implements the host's
//! [`Backend`] seam (north to south) and the runtime's [`RuntimeHandler`]
//! (south to north).

pub mod input;
pub mod session;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use self::session::{path_of_uri, Binding};
use crate::ahp::host::{Backend, Host};
use crate::config::Config;
use crate::jsonrpc::{CallError, RpcError};
use crate::runtime::client::{ReplyFuture, RuntimeConn, RuntimeHandler};
use crate::runtime::events::TurnMapper;
use crate::runtime::process;
use crate::transform::overrides::system_message;
use crate::transform::router::Router;

struct Live {
    conn: Arc<RuntimeConn>,
    child: Option<tokio::process::Child>,
    generation: u64,
}

struct Turn {
    mapper: TurnMapper,
    started: Instant,
    chat: String,
}

struct Ctl {
    runtime_id: String,
    /// The binding of the live runtime session; None: create or resume first.
    bound: Option<Binding>,
    /// Which runtime process the binding lives in.
    generation: u64,
    /// The runtime has persisted the session (it has had a turn): re-binding
    /// resumes it. Before that there is nothing to resume: create it again.
    persisted: bool,
    turn: Option<Turn>,
    /// The runtime is between `session.send` and `session.idle`.
    busy: bool,
    idle: Arc<Notify>,
    /// Permission prompts of the running turn: tool call id -> runtime request
    /// id. Each is mirrored in the session's `inputNeeded` while pending.
    permissions: HashMap<String, String>,
    /// Client tool calls of the running turn: tool call id -> (runtime request
    /// id, owning client). Mirrored like the permissions.
    client_tools: HashMap<String, (String, String)>,
    /// The runtime's questions awaiting a client's answer, by AHP request id;
    /// dropping one answers the runtime "no response".
    inputs: HashMap<String, PendingInput>,
    /// Serializes turn starts and re-binds of this session.
    gate: Arc<tokio::sync::Mutex<()>>,
}

impl Turn {
    /// Ends the turn with `chat/error`; returns its chat and the actions.
    fn fail(mut self, kind: &str, message: &str) -> (String, Vec<Value>) {
        let actions = self.mapper.error(kind, message, ms(self.started.elapsed()));
        (self.chat, actions)
    }
}

/// What a turn left behind when it ended.
struct Ended {
    turn: Option<Turn>,
    /// Runtime request ids of the permissions and client tools still pending.
    permissions: Vec<String>,
    tools: Vec<String>,
    /// Their `inputNeeded` entries, to take out of the session.
    removals: Vec<Value>,
}

impl Ctl {
    /// Ends the turn and takes everything it waited on from clients: the
    /// pending permissions and client tool calls (each mirrored in the
    /// session's `inputNeeded` while pending), and the questions (dropping one
    /// answers the runtime "no response").
    fn end_turn(&mut self) -> Ended {
        self.inputs.clear();
        let removals = self
            .permissions
            .keys()
            .chain(self.client_tools.keys())
            .map(|id| unmirror(id))
            .collect();
        Ended {
            turn: self.turn.take(),
            permissions: self.permissions.drain().map(|(_, r)| r).collect(),
            tools: self.client_tools.drain().map(|(_, (r, _))| r).collect(),
            removals,
        }
    }
}

struct PendingInput {
    answer: tokio::sync::oneshot::Sender<Value>,
    choices: Vec<String>,
}

pub struct Bridge {
    me: Weak<Bridge>,
    host: Weak<Host>,
    cfg: Arc<Config>,
    router: Arc<Router>,
    runtime: tokio::sync::Mutex<Option<Live>>,
    generation: AtomicU64,
    sessions: Mutex<HashMap<String, Ctl>>,
    by_runtime: Mutex<HashMap<String, String>>,
}

fn ms(d: Duration) -> i64 {
    d.as_millis() as i64
}

impl Bridge {
    pub fn new(host: &Arc<Host>, router: Arc<Router>) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            host: Arc::downgrade(host),
            cfg: host.config().clone(),
            router,
            runtime: tokio::sync::Mutex::new(None),
            generation: AtomicU64::new(0),
            sessions: Mutex::new(HashMap::new()),
            by_runtime: Mutex::new(HashMap::new()),
        })
    }

    fn host(&self) -> Option<Arc<Host>> {
        self.host.upgrade()
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Ctl>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn ahp_of(&self, runtime_id: &str) -> Option<String> {
        self.by_runtime
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(runtime_id)
            .cloned()
    }

    /// Applies host actions on a chat; a refused one is a bug worth a warning.
    fn emit(&self, chat: &str, actions: Vec<Value>) {
        let Some(host) = self.host() else { return };
        for a in actions {
            if let Err(e) = host.server_action(chat, a.clone()) {
                warn!(chat, action = %a["type"], "host refused a bridge action: {e}");
            }
        }
    }

    // ── the runtime process ──────────────────────────────────────────────

    /// The live runtime, started (or restarted) on demand.
    pub async fn runtime(&self) -> anyhow::Result<(Arc<RuntimeConn>, u64)> {
        let mut g = self.runtime.lock().await;
        if let Some(l) = g.as_ref() {
            if !l.conn.closed.is_cancelled() {
                return Ok((l.conn.clone(), l.generation));
            }
        }
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        let handler: Arc<dyn RuntimeHandler> = Arc::new(Handler {
            bridge: self.me.clone(),
        });
        let rt = process::start(&self.cfg.runtime, handler).await?;
        let conn = rt.conn.clone();
        let me = self.me.clone();
        let closed = conn.closed.clone();
        tokio::spawn(async move {
            closed.cancelled().await;
            if let Some(b) = me.upgrade() {
                b.runtime_lost(generation);
            }
        });
        tokio::spawn(watchdog(
            conn.clone(),
            self.cfg.runtime.health_interval,
            self.cfg.runtime.health_timeout,
        ));
        *g = Some(Live {
            conn: conn.clone(),
            child: rt.child,
            generation,
        });
        Ok((conn, generation))
    }

    /// The spawned runtime's process id (None before it starts, or over TCP):
    /// for an operator's diagnostics, and for tests that kill it.
    pub async fn runtime_pid(&self) -> Option<u32> {
        self.runtime
            .lock()
            .await
            .as_ref()
            .and_then(|l| l.child.as_ref().and_then(|c| c.id()))
    }

    /// The runtime went away: running turns end with an error now, every
    /// session resumes on its next turn, and a new runtime is started.
    fn runtime_lost(&self, generation: u64) {
        warn!(generation, "the runtime exited or stopped answering");
        let mut ended = Vec::new();
        for (uri, ctl) in self.sessions().iter_mut() {
            if ctl.generation != generation {
                continue;
            }
            ctl.bound = None;
            ctl.busy = false;
            ctl.idle.notify_waiters();
            // What the dead runtime waited on needs no answer.
            let e = ctl.end_turn();
            ended.push((uri.clone(), e.removals));
            if let Some(t) = e.turn {
                let (chat, actions) = t.fail(
                    "runtime",
                    "the agent runtime exited during the turn; send the message again",
                );
                ended.push((chat, actions));
            }
        }
        for (channel, actions) in ended {
            self.emit(&channel, actions);
        }
        let me = self.me.clone();
        tokio::spawn(async move {
            // A hung runtime is still running: end it before starting the next.
            if let Some(b) = me.upgrade() {
                let mut g = b.runtime.lock().await;
                if g.as_ref().is_some_and(|l| l.generation == generation) {
                    if let Some(mut child) = g.take().and_then(|l| l.child) {
                        let _ = child.start_kill();
                    }
                }
            }
            let mut backoff = Duration::from_millis(200);
            loop {
                tokio::time::sleep(backoff).await;
                let Some(b) = me.upgrade() else { return };
                match b.runtime().await {
                    Ok(_) => return,
                    Err(e) => {
                        warn!("runtime restart failed: {e:#}; retrying in {backoff:?}");
                        backoff = (backoff * 2).min(Duration::from_secs(30));
                    }
                }
            }
        });
    }

    // ── sessions ─────────────────────────────────────────────────────────

    fn session_params(&self, uri: &str, runtime_id: &str, binding: &Binding) -> Value {
        let host = self.host();
        let wd = host
            .as_ref()
            .and_then(|h| h.working_directory(uri))
            .map(|u| path_of_uri(&u))
            .or_else(|| {
                self.cfg
                    .runtime
                    .working_directory
                    .as_ref()
                    .map(|p| p.display().to_string())
            })
            .or_else(|| {
                std::env::current_dir()
                    .ok()
                    .map(|p| p.display().to_string())
            })
            .unwrap_or_else(|| "/".into());
        let mut p = json!({
            "sessionId": runtime_id, "model": self.cfg.runtime.model, "clientName": "ahp-copilot-bridge",
            "streaming": true, "workingDirectory": wd, "requestPermission": true, "requestUserInput": true,
            "tools": binding.runtime_tools(),
        });
        if let Some(pr) = &self.cfg.runtime.provider {
            let mut prov = json!({"type": pr.kind, "baseUrl": pr.base_url});
            if let Some(k) = pr.resolved_api_key() {
                prov["apiKey"] = json!(k);
            }
            p["provider"] = prov;
        }
        if let Some(sm) = system_message(&binding.registered, &self.cfg.policy.overrides) {
            p["systemMessage"] = sm;
        }
        p
    }

    /// Creates, resumes or re-binds the runtime session so that it matches the
    /// AHP state now. Registration is fixed at create/resume, so a change of
    /// opt-ins, owners or tools means destroy + resume (history is kept).
    async fn ensure_bound(&self, uri: &str) -> anyhow::Result<(Arc<RuntimeConn>, String)> {
        let (conn, generation) = self.runtime().await?;
        let host = self.host().ok_or_else(|| anyhow::anyhow!("host gone"))?;
        let want = Binding::derive(&self.router.policy, &host.active_clients(uri));
        let (runtime_id, bound, persisted) = {
            let s = self.sessions();
            let c = s
                .get(uri)
                .ok_or_else(|| anyhow::anyhow!("session {uri} is gone"))?;
            let live = c.generation == generation;
            (
                c.runtime_id.clone(),
                c.bound.clone().filter(|_| live),
                c.persisted,
            )
        };
        if bound.as_ref() == Some(&want) {
            return Ok((conn, runtime_id));
        }
        let params = self.session_params(uri, &runtime_id, &want);
        let method = if persisted {
            "session.resume"
        } else {
            "session.create"
        };
        if bound.is_some() {
            info!(session = uri, registered = ?want.registered, owners = ?want.owners, "opt-ins, owners or tools changed; re-binding the runtime session");
            if let Err(e) = conn
                .call("session.destroy", json!({"sessionId": runtime_id}))
                .await
            {
                debug!("session.destroy before re-bind: {e}");
            }
        }
        conn.call(method, params)
            .await
            .map_err(|e| anyhow::anyhow!("{method}: {e}"))?;
        debug!(session = uri, %runtime_id, method, registered = ?want.registered, "runtime session bound");
        if let Some(c) = self.sessions().get_mut(uri) {
            c.bound = Some(want);
            c.generation = generation;
        }
        Ok((conn, runtime_id))
    }

    async fn create(self: Arc<Self>, uri: String) {
        let runtime_id = uuid::Uuid::new_v4().to_string();
        self.by_runtime
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(runtime_id.clone(), uri.clone());
        self.sessions().insert(
            uri.clone(),
            Ctl {
                runtime_id,
                bound: None,
                generation: 0,
                persisted: false,
                turn: None,
                busy: false,
                idle: Arc::new(Notify::new()),
                permissions: HashMap::new(),
                client_tools: HashMap::new(),
                inputs: HashMap::new(),
                gate: Arc::new(tokio::sync::Mutex::new(())),
            },
        );
        let action = match self.ensure_bound(&uri).await {
            Ok(_) => json!({"type": "session/ready"}),
            Err(e) => {
                warn!(session = %uri, "runtime session not created: {e:#}");
                json!({"type": "session/creationFailed", "error": {"errorType": "runtime", "message": format!("{e:#}")}})
            }
        };
        if let Some(h) = self.host() {
            let _ = h.server_action(&uri, action);
        }
    }

    async fn start_turn(
        self: Arc<Self>,
        uri: String,
        chat: String,
        turn_id: String,
        prompt: String,
    ) {
        let gate = match self.sessions().get(&uri) {
            Some(c) => c.gate.clone(),
            None => return,
        };
        let _g = gate.lock().await;
        // A cancelled turn's tail (its session.idle) must not end this one.
        let idle = self
            .sessions()
            .get(&uri)
            .filter(|c| c.busy)
            .map(|c| c.idle.clone());
        if let Some(idle) = idle {
            let _ = tokio::time::timeout(Duration::from_secs(10), idle.notified()).await;
        }
        if let Some(c) = self.sessions().get_mut(&uri) {
            c.turn = Some(Turn {
                mapper: TurnMapper::new(&turn_id),
                started: Instant::now(),
                chat: chat.clone(),
            });
        }
        let sent = async {
            let (conn, runtime_id) = self.ensure_bound(&uri).await?;
            if let Some(c) = self.sessions().get_mut(&uri) {
                c.busy = true;
            }
            conn.call(
                "session.send",
                json!({"sessionId": runtime_id, "prompt": prompt}),
            )
            .await
            .map_err(|e| anyhow::anyhow!("session.send: {e}"))?;
            // From its first message on, the runtime keeps the session on disk.
            if let Some(c) = self.sessions().get_mut(&uri) {
                c.persisted = true;
            }
            anyhow::Ok(())
        }
        .await;
        if let Err(e) = sent {
            warn!(session = %uri, "turn not started: {e:#}");
            self.end_turn_with_error(&uri, "runtime", &format!("{e:#}"));
        }
    }

    fn end_turn_with_error(&self, uri: &str, kind: &str, message: &str) {
        let Some(e) = self.sessions().get_mut(uri).map(|c| {
            c.busy = false;
            c.end_turn()
        }) else {
            return;
        };
        if let Some((chat, actions)) = e.turn.map(|t| t.fail(kind, message)) {
            self.emit(&chat, actions);
        }
        self.emit(uri, e.removals);
    }

    async fn call_runtime(&self, method: &str, params: Value) {
        match self.runtime().await {
            Ok((conn, _)) => {
                if let Err(e) = conn.call(method, params).await {
                    warn!(method, "runtime call failed: {e}");
                }
            }
            Err(e) => warn!(method, "no runtime: {e:#}"),
        }
    }

    // ── runtime -> AHP ───────────────────────────────────────────────────

    fn on_event(&self, runtime_id: &str, ty: &str, data: &Value) {
        // Events carry prompt text: their data only at trace.
        tracing::trace!(runtime_id, ty, data = %data, "runtime event");
        let Some(uri) = self.ahp_of(runtime_id) else {
            debug!(runtime_id, ty, "event for an unknown runtime session");
            return;
        };
        match ty {
            "permission.requested" => return self.on_permission(&uri, runtime_id, data),
            "external_tool.requested" => return self.on_external_tool(&uri, runtime_id, data),
            "session.warning" => {
                info!(session = %uri, warning = %data["warningType"], "runtime warning")
            }
            // A client's own tool is opened by external_tool.requested, with its owner.
            "tool.execution_start"
                if self
                    .client_tool_owner(&uri, data["toolName"].as_str().unwrap_or_default())
                    .is_some() =>
            {
                return
            }
            _ => {}
        }
        let out = {
            let mut s = self.sessions();
            let Some(c) = s.get_mut(&uri) else { return };
            if ty == "session.idle" {
                c.busy = false;
                c.idle.notify_waiters();
            }
            let Some(t) = c.turn.as_mut() else {
                debug!(session = %uri, ty, "event outside a turn");
                return;
            };
            let actions = t.mapper.map(ty, data, ms(t.started.elapsed()));
            let chat = t.chat.clone();
            let removals = if t.mapper.ended {
                c.end_turn().removals
            } else {
                Vec::new()
            };
            (chat, actions, removals)
        };
        self.emit(&out.0, out.1);
        self.emit(&uri, out.2);
    }

    /// Mirrors a tool call that waits on a client (its confirmation, or its
    /// execution by the owning client) into the session's `inputNeeded`, so
    /// that clients subscribed only to the session see it. The entry carries
    /// the tool call as the chat state has it now.
    fn mirror_tool(&self, uri: &str, chat: &str, tool_call_id: &str, executor: Option<&str>) {
        let Some(host) = self.host() else { return };
        let Some(state) = host.snapshot(chat).map(|mut s| s["state"].take()) else {
            return;
        };
        let Some((turn_id, tool_call)) = pending_tool_call(&state, tool_call_id) else {
            return;
        };
        let id = mirror_id(tool_call_id);
        let mut request = json!({"id": id, "chat": chat, "turnId": turn_id, "toolCall": tool_call});
        match executor {
            Some(client) => {
                request["kind"] = json!("toolClientExecution");
                request["clientId"] = json!(client);
            }
            None => request["kind"] = json!("toolConfirmation"),
        }
        self.emit(
            uri,
            vec![json!({"type": "session/inputNeededSet", "request": request})],
        );
    }

    fn client_tool_owner(&self, uri: &str, name: &str) -> Option<String> {
        self.sessions().get(uri).and_then(|c| {
            c.bound
                .as_ref()
                .and_then(|b| b.tool_owner(name).map(String::from))
        })
    }

    fn on_permission(&self, uri: &str, runtime_id: &str, data: &Value) {
        let request_id = data["requestId"].as_str().unwrap_or_default().to_owned();
        let req = &data["permissionRequest"];
        let kind = req["kind"].as_str().unwrap_or("unknown");
        let tool_name = req["toolName"].as_str().unwrap_or(kind).to_owned();
        // A client's own tool: the owning client decides by running it.
        if kind == "custom-tool" && self.client_tool_owner(uri, &tool_name).is_some() {
            let params = permission_answer(runtime_id, &request_id, true);
            self.spawn_call("session.permissions.handlePendingPermissionRequest", params);
            return;
        }
        let tool_call_id = req["toolCallId"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| request_id.clone());
        let detail = req["intention"]
            .as_str()
            .or(req["fullCommandText"].as_str())
            .unwrap_or("")
            .to_owned();
        let input = req
            .get("fullCommandText")
            .or(req.get("args"))
            .cloned()
            .unwrap_or(Value::Null);
        let out = {
            let mut s = self.sessions();
            let Some(c) = s.get_mut(uri) else { return };
            let asked = c.turn.as_mut().map(|t| {
                (
                    t.chat.clone(),
                    t.mapper.ask_confirmation(
                        &tool_call_id,
                        &tool_name,
                        &input,
                        &format!("Allow {kind}: {detail}"),
                    ),
                )
            });
            if asked.is_some() {
                c.permissions
                    .insert(tool_call_id.clone(), request_id.clone());
            }
            asked
        };
        match out {
            Some((chat, actions)) => {
                self.emit(&chat, actions);
                self.mirror_tool(uri, &chat, &tool_call_id, None);
            }
            None => {
                // No turn to ask in: deny rather than leave the runtime waiting.
                let params = permission_answer(runtime_id, &request_id, false);
                self.spawn_call("session.permissions.handlePendingPermissionRequest", params);
            }
        }
    }

    fn on_external_tool(&self, uri: &str, runtime_id: &str, data: &Value) {
        let s_ = |k: &str| data[k].as_str().unwrap_or_default().to_owned();
        let (request_id, tool_call_id, name) = (s_("requestId"), s_("toolCallId"), s_("toolName"));
        let host = self.host();
        let owner = self.client_tool_owner(uri, &name);
        let present = owner.as_ref().is_some_and(|o| {
            host.as_ref()
                .is_some_and(|h| h.active_clients(uri).iter().any(|c| &c.client_id == o))
        });
        let contributor = owner
            .as_ref()
            .map(|o| json!({"kind": "client", "clientId": o}));
        // Record the owner before the call is announced, so its completion is accepted.
        if let (Some(h), Some(o), true) = (&host, &owner, present) {
            h.set_tool_owner(uri, &tool_call_id, o);
        }
        let out = {
            let mut s = self.sessions();
            let Some(c) = s.get_mut(uri) else { return };
            if present {
                c.client_tools.insert(
                    tool_call_id.clone(),
                    (request_id.clone(), owner.clone().unwrap_or_default()),
                );
            }
            c.turn.as_mut().map(|t| {
                let mut a = t.mapper.open_tool(
                    &tool_call_id,
                    &name,
                    &data["arguments"],
                    contributor.clone(),
                    Some("not-needed"),
                    &format!("Running {name}"),
                );
                if !present {
                    a.extend(t.mapper.complete_tool(
                        &tool_call_id,
                        false,
                        "the client that provides this tool is gone",
                        &name,
                    ));
                }
                (t.chat.clone(), a)
            })
        };
        if let Some((chat, actions)) = out {
            self.emit(&chat, actions);
            if let (true, Some(o)) = (present, &owner) {
                self.mirror_tool(uri, &chat, &tool_call_id, Some(o));
            }
        }
        if !present {
            let text = format!("Tool {name} is unavailable: the client that provides it is gone.");
            self.answer_tool(
                runtime_id,
                &request_id,
                false,
                &text,
                Some(json!("client gone")),
            );
        }
    }

    /// The owner completed its tool call in AHP: answer the runtime.
    fn on_client_tool_complete(&self, uri: &str, action: &Value) {
        let id = action["toolCallId"].as_str().unwrap_or_default();
        let (runtime_id, request) = {
            let mut s = self.sessions();
            let Some(c) = s.get_mut(uri) else { return };
            if let Some(t) = c.turn.as_mut() {
                t.mapper.mark_completed(id);
            }
            (c.runtime_id.clone(), c.client_tools.remove(id))
        };
        let Some((request_id, _)) = request else {
            return;
        };
        self.emit(uri, vec![unmirror(id)]);
        let result = &action["result"];
        let text: String = result["content"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|c| c["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        let success = result["success"].as_bool().unwrap_or(false);
        self.answer_tool(
            &runtime_id,
            &request_id,
            success,
            &text,
            result.get("error").cloned(),
        );
    }

    fn on_confirmed(&self, uri: &str, action: &Value) {
        let id = action["toolCallId"].as_str().unwrap_or_default();
        let approved = action["approved"].as_bool().unwrap_or(false);
        let Some((runtime_id, request_id)) = self.sessions().get_mut(uri).and_then(|c| {
            if !approved {
                // A denied call is cancelled in AHP: the runtime's failure event must not complete it.
                if let Some(t) = c.turn.as_mut() {
                    t.mapper.mark_completed(id);
                }
            }
            c.permissions.remove(id).map(|r| (c.runtime_id.clone(), r))
        }) else {
            return;
        };
        self.emit(uri, vec![unmirror(id)]);
        let params = permission_answer(&runtime_id, &request_id, approved);
        self.spawn_call("session.permissions.handlePendingPermissionRequest", params);
    }

    /// The runtime asks the user: an AHP input request in the running turn
    /// (mirrored in the session's `inputNeeded`), answered by the first
    /// `chat/inputCompleted`. A cancelled turn or a lost runtime drops the
    /// question, which answers "no response": the runtime never waits forever.
    async fn ask_user(&self, uri: &str, params: &Value) -> Value {
        let id = format!("input-{}", uuid::Uuid::new_v4().simple());
        let (tx, rx) = tokio::sync::oneshot::channel();
        let choices = params["choices"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|c| c.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let chat = {
            let mut s = self.sessions();
            let Some(c) = s.get_mut(uri) else {
                return input::no_response();
            };
            let Some(chat) = c.turn.as_ref().map(|t| t.chat.clone()) else {
                return input::no_response();
            };
            c.inputs.insert(
                id.clone(),
                PendingInput {
                    answer: tx,
                    choices,
                },
            );
            chat
        };
        let request = input::chat_request(&id, params);
        info!(session = uri, request = %id, "the agent asks the user");
        self.emit(
            &chat,
            vec![json!({"type": "chat/inputRequested", "request": request})],
        );
        self.emit(
            uri,
            vec![json!({"type": "session/inputNeededSet", "request": {"kind": "chatInput", "id": id, "chat": chat, "request": request}})],
        );
        let answer = rx.await.unwrap_or_else(|_| input::no_response());
        self.emit(
            uri,
            vec![json!({"type": "session/inputNeededRemoved", "id": id})],
        );
        answer
    }

    fn on_input_completed(&self, uri: &str, action: &Value) {
        let id = action["requestId"].as_str().unwrap_or_default();
        let pending = self
            .sessions()
            .get_mut(uri)
            .and_then(|c| c.inputs.remove(id));
        if let Some(p) = pending {
            let _ = p.answer.send(input::runtime_answer(action, &p.choices));
        }
    }

    /// The client cancelled the turn: nothing more is mapped into it; what the
    /// runtime waits on is answered (denied, failed), then the runtime aborts.
    fn on_cancelled(&self, uri: &str) {
        const WHY: &str = "the turn was cancelled";
        let Some((runtime_id, e)) = self
            .sessions()
            .get_mut(uri)
            .map(|c| (c.runtime_id.clone(), c.end_turn()))
        else {
            return;
        };
        self.emit(uri, e.removals);
        let Some(me) = self.me.upgrade() else { return };
        tokio::spawn(async move {
            for request_id in e.permissions {
                let params = permission_answer(&runtime_id, &request_id, false);
                me.call_runtime("session.permissions.handlePendingPermissionRequest", params)
                    .await;
            }
            for request_id in e.tools {
                let params = tool_answer(&runtime_id, &request_id, false, WHY, Some(json!(WHY)));
                me.call_runtime("session.tools.handlePendingToolCall", params)
                    .await;
            }
            me.call_runtime("session.abort", json!({"sessionId": runtime_id}))
                .await;
        });
    }

    /// A client left the session: its in-flight tool calls fail now, in AHP
    /// and towards the runtime.
    fn on_client_removed(&self, uri: &str, client_id: &str) {
        const WHY: &str = "the client that provides this tool left";
        let (runtime_id, chat, actions, gone, requests) = {
            let mut s = self.sessions();
            let Some(c) = s.get_mut(uri) else { return };
            let gone: Vec<String> = c
                .client_tools
                .iter()
                .filter(|(_, (_, o))| o == client_id)
                .map(|(id, _)| id.clone())
                .collect();
            let requests: Vec<String> = gone
                .iter()
                .filter_map(|id| c.client_tools.remove(id).map(|(r, _)| r))
                .collect();
            let (chat, actions) = match c.turn.as_mut() {
                Some(t) => (
                    Some(t.chat.clone()),
                    gone.iter()
                        .flat_map(|id| t.mapper.complete_tool(id, false, WHY, "tool"))
                        .collect(),
                ),
                None => (None, Vec::new()),
            };
            (c.runtime_id.clone(), chat, actions, gone, requests)
        };
        if let Some(chat) = chat {
            self.emit(&chat, actions);
        }
        self.emit(uri, gone.iter().map(|id| unmirror(id)).collect());
        for request_id in requests {
            self.answer_tool(
                &runtime_id,
                &request_id,
                false,
                WHY,
                Some(json!("client gone")),
            );
        }
    }

    /// Calls the runtime in the background: an answer it must get, that nobody here waits on.
    fn spawn_call(&self, method: &'static str, params: Value) {
        let me = self.me.upgrade();
        tokio::spawn(async move {
            if let Some(b) = me {
                b.call_runtime(method, params).await;
            }
        });
    }

    /// Answers the runtime's pending external tool call.
    fn answer_tool(
        &self,
        runtime_id: &str,
        request_id: &str,
        success: bool,
        text: &str,
        error: Option<Value>,
    ) {
        let params = tool_answer(runtime_id, request_id, success, text, error);
        self.spawn_call("session.tools.handlePendingToolCall", params);
    }
}

/// Pings the runtime every `interval`; one unanswered within `timeout` means
/// it hangs (alive but deaf), and the connection is closed so that the runtime
/// is replaced like one that exited. An error answer is still an answer.
async fn watchdog(conn: Arc<RuntimeConn>, interval: Duration, timeout: Duration) {
    if interval.is_zero() {
        return;
    }
    loop {
        tokio::select! {
            _ = conn.closed.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        match conn.peer.call("ping", json!({}), timeout).await {
            Ok(_) | Err(CallError::Rpc(_)) => {}
            Err(CallError::Closed) => return,
            Err(CallError::Timeout(t)) => {
                warn!("the runtime did not answer a ping within {t:?}; restarting it");
                conn.close();
                return;
            }
        }
    }
}

fn mirror_id(tool_call_id: &str) -> String {
    format!("tool-{tool_call_id}")
}

/// Takes a tool call's entry out of the session's `inputNeeded`.
fn unmirror(tool_call_id: &str) -> Value {
    json!({"type": "session/inputNeededRemoved", "id": mirror_id(tool_call_id)})
}

/// The active turn's id and the JSON of one of its tool calls, from a chat state.
fn pending_tool_call(chat_state: &Value, tool_call_id: &str) -> Option<(String, Value)> {
    let turn = &chat_state["activeTurn"];
    let part = turn["responseParts"]
        .as_array()?
        .iter()
        .find(|p| p["toolCall"]["toolCallId"] == tool_call_id)?;
    Some((turn["id"].as_str()?.to_owned(), part["toolCall"].clone()))
}

/// Params of `session.tools.handlePendingToolCall`.
fn tool_answer(
    runtime_id: &str,
    request_id: &str,
    success: bool,
    text: &str,
    error: Option<Value>,
) -> Value {
    let mut result = json!({"textResultForLlm": text, "resultType": if success { "success" } else { "failure" }});
    if !success {
        result["error"] = error.unwrap_or_else(|| json!("the tool failed"));
    }
    json!({"sessionId": runtime_id, "requestId": request_id, "result": result})
}

/// Params of `session.permissions.handlePendingPermissionRequest`.
fn permission_answer(runtime_id: &str, request_id: &str, approved: bool) -> Value {
    let kind = if approved { "approve-once" } else { "reject" };
    json!({"sessionId": runtime_id, "requestId": request_id, "result": {"kind": kind}})
}

impl Backend for Bridge {
    fn session_created(&self, session: &str) {
        if let Some(me) = self.me.upgrade() {
            tokio::spawn(me.create(session.to_owned()));
        }
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
            self.spawn_call("session.destroy", json!({"sessionId": c.runtime_id}));
        }
    }

    fn active_client_removed(&self, session: &str, client_id: &str) {
        self.on_client_removed(session, client_id);
    }

    fn client_action(&self, session: &str, channel: &str, action: &Value, _client_id: &str) {
        match action["type"].as_str().unwrap_or_default() {
            "chat/turnStarted" => {
                let (turn, text) = (
                    action["turnId"].as_str().unwrap_or_default(),
                    action
                        .pointer("/message/text")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                );
                if let Some(me) = self.me.upgrade() {
                    tokio::spawn(me.start_turn(
                        session.to_owned(),
                        channel.to_owned(),
                        turn.to_owned(),
                        text.to_owned(),
                    ));
                }
            }
            "chat/turnCancelled" => self.on_cancelled(session),
            "chat/toolCallConfirmed" => self.on_confirmed(session, action),
            "chat/toolCallComplete" => self.on_client_tool_complete(session, action),
            "chat/inputCompleted" => self.on_input_completed(session, action),
            _ => {}
        }
    }
}

/// Receives what the runtime sends on its own.
struct Handler {
    bridge: Weak<Bridge>,
}

impl RuntimeHandler for Handler {
    fn notification(&self, method: &str, params: Value) {
        let Some(b) = self.bridge.upgrade() else {
            return;
        };
        if method == "session.event" {
            let sid = params["sessionId"].as_str().unwrap_or_default();
            let ty = params
                .pointer("/event/type")
                .and_then(Value::as_str)
                .unwrap_or_default();
            b.on_event(sid, ty, &params["event"]["data"]);
        } else {
            debug!(method, "runtime notification ignored");
        }
    }

    fn request(&self, method: String, params: Value) -> ReplyFuture {
        let bridge = self.bridge.clone();
        Box::pin(async move {
            let Some(b) = bridge.upgrade() else {
                return Err(RpcError::new(
                    crate::jsonrpc::INTERNAL_ERROR,
                    "bridge shutting down",
                ));
            };
            let sid = params["sessionId"].as_str().unwrap_or_default().to_owned();
            match method.as_str() {
                "systemMessage.transform" => {
                    let Some(uri) = b.ahp_of(&sid) else {
                        // Unknown session: give the runtime its text back.
                        return Ok(json!({"sections": params["sections"]}));
                    };
                    // Belt and braces: whatever happens inside, the runtime gets an answer.
                    let limit = b.router.timeout() + Duration::from_millis(500);
                    match tokio::time::timeout(limit, b.router.handle(&uri, &sid, &params)).await {
                        Ok(v) => Ok(v),
                        Err(_) => Ok(json!({"sections": params["sections"]})),
                    }
                }
                "userInput.request" => match b.ahp_of(&sid) {
                    Some(uri) => Ok(b.ask_user(&uri, &params).await),
                    None => Ok(input::no_response()),
                },
                "hooks.invoke" => Ok(json!({"output": {}})),
                other => Err(RpcError::method_not_found(other)),
            }
        })
    }
}
