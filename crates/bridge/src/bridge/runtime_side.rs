//! South to north: what the runtime sends on its own (events and requests,
//! typed by the runtime side), routed to the session it concerns; creating
//! runtime sessions; and a runtime that is lost. The bridge's handler for
//! its runtime connections ([`RuntimeEvents`]) and the functions it runs
//! over the bridge's parts; the bridge's own methods stay in `mod.rs`.

use std::sync::{Arc, Weak};

use ahp_types::actions::{SessionCreationFailedAction, SessionReadyAction, StateAction};
use ahp_types::state::ErrorInfo;
use serde_json::Value;
use tracing::{debug, info, warn};

use super::pool::Starts;
use super::transform_clients::HostClients;
use super::Bridge;
use crate::runtime::Mismatch;
use crate::runtime::Secret;
use crate::runtime::{GithubCredentials, SessionDestroy, SessionRef, SetGithubCredentials};
use crate::runtime::{PermissionRequest, RuntimeEvent, SESSION_EVENT};
use crate::runtime::{RuntimeAnswer, RuntimeRequest, UserInputAnswer};
use crate::runtime::{RuntimeHandler, RuntimeReplyFuture};
use crate::telemetry::Causes;

/// How long a runtime tool is shown streaming before running, unless a
/// permission prompt for it comes first (the runtime sends it right after
/// announcing the tool, within milliseconds).
const PROMPT_WINDOW: std::time::Duration = std::time::Duration::from_millis(250);

/// The bridge as the runtime connection's handler (weak: the connection must
/// not keep the bridge alive).
pub(super) struct RuntimeEvents {
    bridge: Weak<Bridge>,
}

impl RuntimeHandler for RuntimeEvents {
    fn event(&self, runtime_id: &str, id: Option<&str>, event: RuntimeEvent) {
        let Some(b) = self.bridge.upgrade() else {
            return;
        };
        let Some(uri) = b.sessions.uri_of(runtime_id) else {
            debug!(runtime_id, "event for an unknown runtime session");
            return;
        };
        if b.sessions
            .with(&uri, |s| s.placement_mut().first_arrival(id))
            == Some(false)
        {
            Mismatch::repeated(SESSION_EVENT, id).report();
            return;
        }
        on_event(&b, &uri, &event);
    }

    fn request(&self, request: RuntimeRequest) -> RuntimeReplyFuture {
        let bridge = self.bridge.clone();
        Box::pin(async move {
            match bridge.upgrade() {
                Some(b) => {
                    // Counted until answered, so a shutdown can wait for the answer.
                    let _answering = b.stop.answering();
                    answer(&b, request).await
                }
                None => unanswerable(request),
            }
        })
    }
}

/// The answer to a request nobody can take (the bridge is gone, or the
/// session unknown): the runtime gets its text back, no user answers.
fn unanswerable(request: RuntimeRequest) -> RuntimeAnswer {
    match request {
        RuntimeRequest::Transform { sections, .. } => RuntimeAnswer::Transformed(sections),
        RuntimeRequest::UserInput { .. } => RuntimeAnswer::UserInput(UserInputAnswer::NoResponse),
        RuntimeRequest::Hooks => RuntimeAnswer::Hooks,
    }
}

impl Starts for Bridge {
    fn handler(&self) -> Arc<dyn RuntimeHandler> {
        Arc::new(RuntimeEvents {
            bridge: self.me.clone(),
        })
    }

    /// The runtime went away: running turns on it end with an error now,
    /// every session on it resumes on its next turn, and a new runtime is
    /// started in its place.
    fn lost(&self, slot: usize, generation: u64) {
        if self.pool.is_stopping() {
            // Stopped on purpose: its turns were ended, nothing restarts.
            return;
        }
        warn!(slot, generation, "a runtime exited or stopped answering; its running turns end, the other runtimes' go on");
        const WHY: &str = "the agent runtime exited during the turn; send the message again";
        for fx in self.sessions.change_all(|s, fx| {
            s.runtime_lost(generation, WHY, fx);
        }) {
            self.carry_out(fx);
        }
        // Neither the task nor the pool keeps the bridge alive.
        let (pool, owner): (_, std::sync::Weak<dyn Starts>) = (self.pool.clone(), self.me.clone());
        tokio::spawn(async move { pool.replace(slot, generation, owner).await });
    }
}

/// A runtime event for session `uri`.
fn on_event(b: &Bridge, uri: &str, event: &RuntimeEvent) {
    match event {
        RuntimeEvent::PermissionRequested(p) => permission_requested(b, uri, p),
        RuntimeEvent::ExternalToolRequested {
            request_id,
            tool_call_id,
            tool_name,
            arguments,
        } => external_tool_requested(b, uri, request_id, tool_call_id, tool_name, arguments),
        RuntimeEvent::McpServers(servers) => b.customizing.mcp_states(uri, servers),
        RuntimeEvent::Warning { warning_type } => {
            info!(session = %uri, warning = %warning_type, "runtime warning")
        }
        // A client's own tool is opened by external_tool.requested, with its owner.
        RuntimeEvent::ToolStarted { tool_name, .. }
            if b.sessions
                .with(uri, |s| s.placement().tool_owner(tool_name).is_some())
                == Some(true) => {}
        RuntimeEvent::ToolStarted { tool_call_id, .. } => {
            b.change(uri, |s, fx| s.on_event(event, fx));
            show_running_unless_prompted(b, uri, tool_call_id);
        }
        _ => b.change(uri, |s, fx| s.on_event(event, fx)),
    }
}

/// A runtime tool is announced before its permission prompt, which
/// follows at once when it needs one: a call with no prompt within
/// [`PROMPT_WINDOW`] is shown running (a no-op if it was prompted, or
/// ran and completed, meanwhile).
fn show_running_unless_prompted(b: &Bridge, uri: &str, tool_call_id: &str) {
    let (me, uri, id) = (b.me.clone(), uri.to_owned(), tool_call_id.to_owned());
    tokio::spawn(async move {
        tokio::time::sleep(PROMPT_WINDOW).await;
        if let Some(b) = me.upgrade() {
            b.change(&uri, |s, fx| s.tool_shown_running(&id, fx));
        }
    });
}

fn permission_requested(b: &Bridge, uri: &str, p: &PermissionRequest) {
    let refused = decide_permission(b, uri, p);
    b.change(uri, |s, fx| {
        s.permission_requested(p, refused.as_deref(), fx)
    });
}

/// `ahp.permission`: the operator's Rego policy over the request as the
/// runtime sent it, asked for the client that started the turn; the
/// reason when it refuses (then no client is asked).
fn decide_permission(b: &Bridge, uri: &str, p: &PermissionRequest) -> Option<String> {
    // The host gone (the bridge stopping): refused, never waved through.
    let Some(host) = b.host.upgrade() else {
        return Some("the bridge is stopping".to_owned());
    };
    let starter = b.sessions.with(uri, |s| s.turn_starter()).flatten();
    super::permission::refusal(&host, uri, starter.as_deref(), &p.raw, &p.kind)
}

/// A client tool call: run by its owner if it is still an active
/// client (with a deadline of its own), failed at once otherwise.
fn external_tool_requested(
    b: &Bridge,
    uri: &str,
    request_id: &str,
    tool_call_id: &str,
    name: &str,
    arguments: &Value,
) {
    let host = b.host();
    let owner = b
        .sessions
        .with(uri, |s| s.placement().tool_owner(name).map(String::from))
        .flatten()
        .filter(|o| {
            host.as_ref().is_some_and(|h| {
                h.for_backend()
                    .active_clients(uri)
                    .iter()
                    .any(|c| &c.client_id == o)
            })
        });
    let mut waits = false;
    b.change(uri, |s, fx| {
        waits = s.client_tool_requested(
            request_id,
            tool_call_id,
            name,
            arguments,
            owner.as_deref(),
            fx,
        );
    });
    if waits {
        client_tool_deadline(b, uri, tool_call_id, request_id, name);
    }
}

/// Connected is not answering: a client tool call not completed within
/// `[runtime] client_tool_timeout` fails, on both sides (a no-op if the
/// call is over by then).
fn client_tool_deadline(b: &Bridge, uri: &str, tool_call_id: &str, request_id: &str, name: &str) {
    let me = b.me.clone();
    let limit = b.settings.runtime.client_tool_timeout;
    let (uri, id, request, name) = (
        uri.to_owned(),
        tool_call_id.to_owned(),
        request_id.to_owned(),
        name.to_owned(),
    );
    tokio::spawn(async move {
        tokio::time::sleep(limit).await;
        let Some(b) = me.upgrade() else { return };
        let shown = humantime::format_duration(limit);
        let why = format!("the client did not complete tool {name} within {shown} ([runtime] client_tool_timeout)");
        let pick = |tc: &str, r: &str, _: &str| tc == id && r == request;
        let mut failed = 0;
        b.change(&uri, |s, fx| {
            failed = s.fail_client_tools(pick, &why, "timeout", fx)
        });
        if failed > 0 {
            warn!(session = %uri, tool_call_id = ?id, "client tool call timed out after {shown}");
        }
    });
}

/// A request of the runtime, answered (always: the runtime has no timeout).
async fn answer(b: &Bridge, request: RuntimeRequest) -> RuntimeAnswer {
    let uri = match &request {
        RuntimeRequest::Transform { session_id, .. }
        | RuntimeRequest::UserInput { session_id, .. } => b.sessions.uri_of(session_id),
        RuntimeRequest::Hooks => None,
    };
    let Some(uri) = uri else {
        // Unknown session, or shutting down: the runtime gets its text back.
        return unanswerable(request);
    };
    match request {
        RuntimeRequest::Transform {
            session_id,
            sections,
        } => {
            let clients = HostClients(b.host());
            // Asked during a turn (its first message, a model switch): its child.
            let turn = b.sessions.with(&uri, |s| s.turn_span()).flatten();
            let merged = b
                .router
                .route_under(
                    turn.as_ref().unwrap_or(&tracing::Span::none()),
                    &clients,
                    &uri,
                    &session_id,
                    &sections,
                )
                .await;
            RuntimeAnswer::Transformed(merged)
        }
        RuntimeRequest::UserInput {
            question,
            choices,
            allow_freeform,
            ..
        } => RuntimeAnswer::UserInput(
            ask_user(b, &uri, question.as_deref(), choices, allow_freeform).await,
        ),
        RuntimeRequest::Hooks => RuntimeAnswer::Hooks,
    }
}

/// The runtime asks the user (`userInput.request`): an AHP input request
/// in the running turn, answered by the first `chat/inputCompleted`. A
/// cancelled turn or a lost runtime drops the question, which answers
/// "no response": the runtime never waits forever.
async fn ask_user(
    b: &Bridge,
    uri: &str,
    question: Option<&str>,
    choices: Vec<String>,
    allow_freeform: Option<bool>,
) -> UserInputAnswer {
    let id = format!("input-{}", uuid::Uuid::new_v4().simple());
    let mut answer = None;
    b.change(uri, |s, fx| {
        answer = s.ask_input(&id, question, choices, allow_freeform, fx);
    });
    let Some(rx) = answer else {
        return UserInputAnswer::NoResponse;
    };
    info!(session = uri, request = %id, "the agent asks the user");
    let answer = rx.await.unwrap_or(UserInputAnswer::NoResponse);
    b.change(uri, |_, fx| {
        fx.act_on_session(super::turn::needed_removed(id))
    });
    answer
}

/// A new AHP session: its runtime session is created now, and the AHP
/// session becomes ready or failed.
pub(super) async fn create(b: Arc<Bridge>, uri: String) {
    let runtime_id = uuid::Uuid::new_v4().to_string();
    b.sessions.place(&uri, runtime_id, false, b.pool.size());
    b.customizing.publish(&uri).await;
    // The entry given with createSession: its plugins are read now and
    // reach the runtime from the first turn after they are.
    for c in b
        .host()
        .map(|h| h.for_backend().active_clients(&uri))
        .unwrap_or_default()
    {
        b.customizing.client_set(&uri, &c.client_id);
    }
    let bound = b.ensure_bound(&uri).await;
    if b.sessions.with(&uri, |_| ()).is_none() {
        // Disposed while it was being created: no outcome to publish,
        // and the runtime session made meanwhile goes too.
        if let Ok((conn, runtime_id)) = bound {
            let _ = conn
                .call::<SessionDestroy>(&SessionRef::new(&runtime_id))
                .await;
        }
        return;
    }
    let action = match bound {
        Ok(_) => StateAction::SessionReady(SessionReadyAction {}),
        Err(e) => {
            warn!(session = %uri, "runtime session not created: {}", Causes(&e));
            let error = ErrorInfo {
                error_type: "runtime".into(),
                message: Causes(&e).to_string(),
                stack: None,
                meta: None,
            };
            StateAction::SessionCreationFailed(SessionCreationFailedAction { error })
        }
    };
    if let Some(h) = b.host() {
        if let Err(e) = h.dispatch(&uri, action) {
            warn!(session = %uri, "host refused the session's creation outcome: {e}");
        }
    }
}

/// A principal authenticated: its live runtime sessions get the token
/// now (new ones get it at create or resume).
pub(super) fn hand_credentials(b: &Bridge, principal: &str) {
    let Some(host) = b.host() else { return };
    for uri in host.session_list().sessions_owned_by(principal) {
        let live = b
            .sessions
            .with(&uri, |s| {
                s.placement()
                    .is_bound()
                    .then(|| (s.placement().slot(), s.placement().runtime_id().to_owned()))
            })
            .flatten();
        let (Some((slot, runtime_id)), Some(token)) =
            (live, host.for_backend().github_token_for(&uri))
        else {
            continue;
        };
        let params = GithubCredentials::new(&runtime_id, &Secret(token));
        let me = b.me.clone();
        tokio::spawn(async move {
            if let Some(b) = me.upgrade() {
                b.call_runtime::<SetGithubCredentials>(slot, params).await;
            }
        });
    }
}
