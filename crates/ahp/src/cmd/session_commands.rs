//! `createSession`: every field checked before the session exists (its
//! URI, provider, working directories and how many, config, the creator's own
//! active-client entry and the role its opt-in needs), then handed to the
//! host whole. `disposeSession` is the host's `remove_session`.

use std::sync::Arc;

use ahp_types::actions::{SessionActiveClientSetAction, StateAction};
use ahp_types::common::JsonObject;
use ahp_types::state::{
    ChatState, ChatSummary, SessionConfigState, SessionLifecycle, SessionState, SessionStatus,
};
use serde_json::Value;
use tracing::info;

use super::config_schema;
use super::reply::Empty;
use crate::auth::access::check_action;
use crate::auth::Principal;
use crate::host::checks::check_opt_in;
use crate::host::clients::ConnId;
use crate::host::host_policy::decide;
use crate::host::sessions::PROVIDER;
use crate::host::{Creator, Host, NewSession};
use crate::protocol::actions::Action;
use crate::protocol::errors::AhpError;
use crate::protocol::params::CreateSession;
use crate::protocol::uri::{chat_uri_of, check_session_uri, working_directory};
use ahp_bridge_jsonrpc::{ErrorCode, RpcError};
use ahp_bridge_policy::{lexical, session_config, Body, ClientKind};

fn invalid(why: impl Into<String>) -> RpcError {
    RpcError::new(ErrorCode::InvalidParams, why)
}

pub(crate) fn create(
    host: &Arc<Host>,
    conn: ConnId,
    principal: &Principal,
    c: CreateSession,
) -> Result<Empty, RpcError> {
    check_session_uri(&c.channel).map_err(|e| invalid(e.to_string()))?;
    if let Some(p) = c.provider.as_deref().filter(|p| *p != PROVIDER) {
        return Err(RpcError::new(
            AhpError::ProviderNotFound,
            format!("unknown provider {p:?}; this host has {PROVIDER:?}"),
        ));
    }
    if c.fork.is_some() {
        return Err(invalid(
            "field `fork`: this host cannot fork a session (its runtime sessions have no fork); create it without `fork`",
        ));
    }
    let dirs = c.working_directories.unwrap_or_default();
    // As a client's `session/workingDirectorySet` is held to it later.
    let max = host.settings().server().max_working_directories;
    if dirs.len() > max {
        return Err(invalid(format!(
            "field `workingDirectories`: {} directories, more than [server] max_working_directories ({max}) allows",
            dirs.len()
        )));
    }
    for (i, d) in dirs.iter().enumerate() {
        working_directory(d)
            .map_err(|e| invalid(format!("field `workingDirectories[{i}]`: {e}")))?;
    }
    decide_session(
        host,
        conn,
        principal,
        &c.channel,
        c.provider.as_deref(),
        &dirs,
        c.config.as_ref(),
    )?;
    let active = own_entry(host, conn, principal, &c.channel, c.active_client, c.opt_in)?;
    let config = config_schema::initial_state(host, c.config.as_ref())?;
    let mut new = new_session(&c.channel, principal, dirs, config);
    let client = host.connections().client_id_of(conn);
    new.creator = Some(Creator {
        subject: principal.subject(client.as_deref(), ClientKind::Ahp),
        transform_sections: principal.transform_sections(),
        client_id: client,
    });
    host.session_list().add_session(conn, new, active)?;
    info!(session = %c.channel, principal = %principal.name, "session created");
    Ok(Empty {})
}

/// `ahp.session`: the operator's Rego policy over the session as requested
/// (its provider, working directories, model and config values).
fn decide_session(
    host: &Host,
    conn: ConnId,
    principal: &Principal,
    uri: &str,
    provider: Option<&str>,
    dirs: &[String],
    values: Option<&JsonObject>,
) -> Result<(), RpcError> {
    let model = values.and_then(|v| v.get("model")).and_then(Value::as_str);
    // As the runtime gets them: local paths, `..` resolved (the URIs as
    // sent could hide `/etc` behind `/srv/work/%2E%2E/etc`).
    let paths: Vec<String> = dirs
        .iter()
        .filter_map(|d| working_directory(d).ok())
        .map(|p| lexical(&p.to_string_lossy()))
        .collect();
    let sent = values.map(|v| Value::Object(v.clone()));
    let config = session_config(provider, &paths, dirs, model, sent.as_ref());
    let client = host.connections().client_id_of(conn);
    let subject = principal.subject(client.as_deref(), ClientKind::Ahp);
    let about = model.unwrap_or("(default model)");
    let body = Body::Session { config: &config };
    decide(host.governor(), &subject, Some(uri), body, about)
        .map_err(|why| RpcError::new(AhpError::PermissionDenied, why.0))
}

/// The creator's own active-client entry (`createSession.activeClient`), as
/// the `session/activeClientSet` it stands for, checked like one.
fn own_entry(
    host: &Host,
    conn: ConnId,
    principal: &Principal,
    uri: &str,
    entry: Option<ahp_types::state::SessionActiveClient>,
    opt_in: Option<crate::extension::TransformOptIn>,
) -> Result<Option<Action>, RpcError> {
    let Some(entry) = entry else {
        return Ok(None);
    };
    if Some(entry.client_id.as_str()) != host.connections().client_id_of(conn).as_deref() {
        return Err(invalid(
            "field `activeClient.clientId` must be the caller's own clientId",
        ));
    }
    let set = Action {
        action: StateAction::SessionActiveClientSet(SessionActiveClientSetAction {
            active_client: entry,
        }),
        opt_in,
    };
    check_action(principal, &set)
        .map_err(|why| RpcError::new(AhpError::PermissionDenied, why.0))?;
    if let Some(o) = &set.opt_in {
        check_opt_in(host.settings(), o).map_err(|why| invalid(&why.0))?;
        let subject = principal.subject(
            host.connections().client_id_of(conn).as_deref(),
            ClientKind::Ahp,
        );
        let body = Body::OptIn {
            sections: &o.sections,
        };
        decide(
            host.governor(),
            &subject,
            Some(uri),
            body,
            &o.sections.join(","),
        )
        .map_err(|why| RpcError::new(AhpError::PermissionDenied, why.0))?;
    }
    Ok(Some(set))
}

/// The state a session starts with: `creating`, idle, one chat (its default).
pub fn new_session(
    uri: &str,
    principal: &Principal,
    dirs: Vec<String>,
    config: SessionConfigState,
) -> NewSession {
    let chat = chat_uri_of(uri);
    let now = jiff::Timestamp::now().to_string();
    let idle = SessionStatus::Idle.bits();
    let chat_state = ChatState {
        resource: chat.clone(),
        title: "Chat".into(),
        status: idle,
        activity: None,
        modified_at: now.clone(),
        changes: None,
        origin: None,
        movable: None,
        interactivity: None,
        working_directories: None,
        changesets: None,
        background_work: None,
        canvases: None,
        turns: vec![],
        turns_next_cursor: None,
        active_turn: None,
        steering_message: None,
        queued_messages: None,
        draft: None,
        meta: None,
    };
    let state = SessionState {
        provider: PROVIDER.into(),
        title: "New session".into(),
        status: idle,
        activity: None,
        origin: None,
        project: None,
        working_directories: Some(dirs),
        annotations: None,
        lifecycle: SessionLifecycle::Creating,
        creation_error: None,
        server_tools: None,
        active_clients: vec![],
        chats: vec![summary_of(&chat_state)],
        default_chat: Some(chat),
        config: Some(config),
        customizations: None,
        changesets: None,
        input_needed: None,
        meta: None,
    };
    NewSession {
        uri: uri.to_owned(),
        owner: principal.name.clone(),
        state,
        chat: chat_state,
        creator: None,
        created_at: now.clone(),
        modified_at: now,
        legacy_chat: None,
    }
}

/// A chat as its session lists it.
fn summary_of(c: &ChatState) -> ChatSummary {
    ChatSummary {
        resource: c.resource.clone(),
        title: c.title.clone(),
        status: c.status,
        activity: c.activity.clone(),
        modified_at: c.modified_at.clone(),
        changes: c.changes.clone(),
        origin: c.origin.clone(),
        movable: c.movable,
        interactivity: c.interactivity,
        working_directories: c.working_directories.clone(),
    }
}
