//! The bridge's side of customizations: a session is given the host's
//! containers when it is created (`loading`, then as read); a client's
//! plugins are read from it and vetted when its entry says so, and removed
//! when it leaves; a (re)bind gives the runtime what is enabled, and the
//! audit log a `customization` record of what is new; the runtime's word
//! on its MCP servers becomes their state. [`Customizing`] is this part of
//! the join, beside the bridge; the state itself is the [`CustomizationState`]'s.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};

use ahp_types::actions::{
    SessionCustomizationRemovedAction, SessionCustomizationUpdatedAction,
    SessionCustomizationsChangedAction, SessionMcpServerStateChangedAction, StateAction,
};
use ahp_types::state::{
    ChildCustomization, Customization, McpServerReadyState, McpServerStartingState, McpServerState,
    McpServerStoppedState,
};
use tracing::{info, warn};

use super::custom::rego_container as rego_custom;
use super::custom::runtime_map::{Applied, Contribution};
use super::custom::CustomizationState;
use super::custom::{agent_named, client_shape, client_vet, shape, ClientEntry, ClientOutcome};
use crate::ahp::Host;
use crate::ahp::{children_of, id_of, mcp_server_error};
use crate::audit::now_rfc3339;
use crate::audit::AuditLog;
use crate::audit::{CustomizationDecision, CustomizationRecord, Source};
use crate::config::FolderWatch;
use crate::config::Reloadable;
use crate::customize::read_package;
use crate::policy::Body;
use crate::policy::PolicyReader;
use crate::policy::{Ask, Recording};
use crate::runtime::McpServerStatus;
use crate::runtime::RuntimeCustomizations;
use crate::telemetry::Escaped;

/// What a bind gives the runtime, and the records to write once it is bound.
#[derive(Debug, Default)]
pub(super) struct ForRuntime {
    pub fields: RuntimeCustomizations,
    pub records: Vec<CustomizationRecord>,
}

/// Customizations on the bridge's sessions: the [`CustomizationState`], the host
/// its actions go to, the policy a client's text is held to, and the audit
/// log its records go to.
pub(super) struct Customizing {
    me: Weak<Customizing>,
    custom: CustomizationState,
    host: Weak<Host>,
    policy: PolicyReader,
    audit: Option<Arc<AuditLog>>,
    /// The Rego decisions on containers already recorded (session,
    /// container, revision, outcome).
    decided: Mutex<HashSet<String>>,
}

/// What a message's custom agent asks of the runtime session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum AgentChange {
    Select(String),
    Deselect,
}

impl Customizing {
    pub(super) fn new(
        custom: CustomizationState,
        host: Weak<Host>,
        policy: PolicyReader,
        audit: Option<Arc<AuditLog>>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            custom,
            host,
            policy,
            audit,
            decided: Mutex::new(HashSet::new()),
        })
    }

    fn host(&self) -> Option<Arc<Host>> {
        self.host.upgrade()
    }

    /// The host's folders to watch.
    pub(super) fn watched_paths(&self) -> Vec<std::path::PathBuf> {
        self.custom.watched_paths()
    }

    /// `[policy.customizations]` in force (a reload may have changed it).
    pub(super) fn customization_policy(&self) -> crate::config::CustomizationPolicy {
        self.custom.policy()
    }

    /// A disposed session: forgotten, its folders removed.
    pub(super) fn session_gone(&self, uri: &str) {
        self.custom.session_gone(uri);
        let prefix = format!("{uri}\0");
        let mut seen = self.decided.lock().unwrap_or_else(|e| e.into_inner());
        seen.retain(|k| !k.starts_with(&prefix));
    }

    fn dispatch_custom(&self, uri: &str, action: StateAction) {
        if let Some(h) = self.host() {
            if let Err(e) = h.dispatch(uri, action) {
                warn!(session = %uri, "host refused a customization action: {e}");
            }
        }
    }

    fn updated(&self, uri: &str, fresh: Customization) {
        let old = self
            .host()
            .map(|h| h.for_backend().session_customizations(uri));
        let kept = shape::keep_toggles(
            fresh.clone(),
            old.iter().flatten().find(|c| id_of(c) == id_of(&fresh)),
        );
        let action = SessionCustomizationUpdatedAction {
            customization: kept,
        };
        self.dispatch_custom(
            uri,
            StateAction::SessionCustomizationUpdated(Box::new(action)),
        );
    }

    fn removed(&self, uri: &str, id: String) {
        let action = SessionCustomizationRemovedAction { id };
        self.dispatch_custom(uri, StateAction::SessionCustomizationRemoved(action));
    }

    /// Lists the host's containers on a new or restored session: all
    /// `loading`, then each as read (toggles a restored session had kept).
    pub(super) async fn publish(&self, uri: &str) {
        if !self.custom.has_host_containers() {
            return;
        }
        let shapes = self.custom.host_shapes().await;
        let loading: Vec<Customization> = shapes.iter().cloned().map(as_loading).collect();
        let action = SessionCustomizationsChangedAction {
            customizations: loading,
        };
        let before = self
            .host()
            .map(|h| h.for_backend().session_customizations(uri));
        self.dispatch_custom(uri, StateAction::SessionCustomizationsChanged(action));
        for fresh in shapes {
            let old = before.iter().flatten().find(|c| id_of(c) == id_of(&fresh));
            let kept = shape::keep_toggles(fresh.clone(), old);
            let action = SessionCustomizationUpdatedAction {
                customization: kept,
            };
            self.dispatch_custom(
                uri,
                StateAction::SessionCustomizationUpdated(Box::new(action)),
            );
        }
    }

    /// A reload's `[customizations]` and `[policy.customizations]`: when
    /// they differ, they are put in force and the host's containers read
    /// again (new sessions list the new set; a session that lists a changed
    /// container gets it anew). Whether they differed.
    pub(super) async fn reconfigured(&self, cfg: Reloadable<'_>, sessions: &[String]) -> bool {
        if !self.custom.reconfigure(cfg) {
            return false;
        }
        info!("customizations reloaded");
        self.host_changed(sessions).await;
        true
    }

    /// Watches the host's customization folders while `uris` answers (the
    /// bridge lives; it gives its sessions): a change is read again for
    /// every session. `rewatch` (a reload changed the folders) starts the
    /// watch over on the new ones.
    pub(super) fn watch_folders(
        self: &Arc<Self>,
        rewatch: Arc<tokio::sync::Notify>,
        uris: impl Fn() -> Option<Vec<String>> + Send + 'static,
    ) {
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let Some(paths) = me.upgrade().map(|c| c.watched_paths()) else {
                    return;
                };
                let mut watch = FolderWatch::start(&paths);
                loop {
                    let changed = async {
                        match &mut watch {
                            Some(w) => w.changed().await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        alive = changed => {
                            if !alive {
                                watch = None;
                                continue;
                            }
                            let (Some(c), Some(sessions)) = (me.upgrade(), uris()) else {
                                return;
                            };
                            c.host_changed(&sessions).await;
                        }
                        _ = rewatch.notified() => break,
                    }
                }
            }
        });
    }

    /// The host's directories changed on disk: read again, and every
    /// session that lists a changed container gets it anew (its runtime
    /// from the next turn: the new files are a new binding).
    pub(super) async fn host_changed(&self, sessions: &[String]) {
        let changed = self.custom.reread().await;
        if changed.is_empty() {
            return;
        }
        info!(containers = ?changed, "host customizations changed on disk");
        let Some(host) = self.host() else { return };
        for uri in sessions {
            let uri = uri.as_str();
            let listed = host.for_backend().session_customizations(uri);
            for id in &changed {
                if listed.iter().any(|c| id_of(c) == Some(id)) {
                    if let Some(fresh) = self.custom.host_shape(id) {
                        self.updated(uri, fresh);
                    }
                }
            }
        }
    }

    /// A client set its entry: the plugins it no longer publishes go, new
    /// or changed ones are read from it.
    pub(super) fn client_set(&self, uri: &str, client_id: &str) {
        let Some(host) = self.host() else { return };
        let views = host.for_backend().active_clients(uri);
        let Some(view) = views.iter().find(|c| c.client_id == client_id) else {
            return;
        };
        let (read, gone) = self.custom.client_set(uri, view);
        for id in gone {
            self.removed(uri, id);
        }
        for entry in read {
            self.updated(uri, client_shape(&entry));
            if let Some(me) = self.me.upgrade() {
                let may = view.may_customize;
                tokio::spawn(me.read_client_plugin(uri.to_owned(), entry, may));
            }
        }
    }

    /// A client left (or its grace ran out): its plugins go.
    pub(super) fn client_left(&self, uri: &str, client_id: &str) {
        for id in self.custom.client_left(uri, client_id) {
            self.removed(uri, id);
        }
    }

    async fn read_client_plugin(self: Arc<Self>, uri: String, entry: ClientEntry, may: bool) {
        let outcome = self.vetted_client_plugin(&uri, &entry, may).await;
        if let ClientOutcome::Refused(why) = &outcome {
            info!(session = %uri, client = %Escaped(&entry.client_id), plugin = %Escaped(&entry.plugin.id), reason = %Escaped(why), "client plugin refused");
            self.write_records(vec![refusal(&uri, &entry, why)]);
        }
        if !self
            .custom
            .client_read(&uri, &entry.plugin, outcome.clone())
        {
            return;
        }
        self.updated(&uri, client_shape(&ClientEntry { outcome, ..entry }));
    }

    async fn vetted_client_plugin(&self, uri: &str, e: &ClientEntry, may: bool) -> ClientOutcome {
        let policy = &self.custom.policy();
        if let Err(why) = client_vet::admit(policy, e.principal.as_deref(), may) {
            return ClientOutcome::Refused(why.to_string());
        }
        let Some(peer) = self
            .host()
            .and_then(|h| h.connections().client_peer(&e.client_id))
        else {
            return ClientOutcome::Refused("the client is not connected to read it from".into());
        };
        let source = super::custom::client_source::ClientSource::new(peer, uri, &e.plugin.uri);
        if let Err(why) = source.request_access().await {
            return ClientOutcome::Refused(why.to_string());
        }
        let mut package = read_package(&source, &client_vet::client_bounds(policy)).await;
        let rules = self.policy.current();
        match client_vet::vet(&mut package, policy, rules.rules(client_vet::TEXT_SECTION)) {
            Ok(cut) => ClientOutcome::Read {
                package: Arc::new(package),
                cut,
            },
            Err(why) => ClientOutcome::Refused(why.to_string()),
        }
    }

    /// What the runtime session must be told for a message that chose
    /// `agent_uri` (when it is listed and enabled), given what it has
    /// selected as far as the bridge knows (`None`: not known). `None`:
    /// nothing to tell.
    pub(super) fn agent_change(
        &self,
        uri: &str,
        agent_uri: Option<&str>,
        known: Option<Option<String>>,
    ) -> Option<AgentChange> {
        let state = self
            .host()
            .map(|h| h.for_backend().session_customizations(uri))
            .unwrap_or_default();
        let wanted = agent_uri.and_then(|a| agent_named(&state, a));
        if agent_uri.is_some() && wanted.is_none() {
            info!(session = %uri, "the message's agent is not an enabled agent of the session; none is selected");
        }
        let unknown_and_none = known.is_none() && wanted.is_none() && !has_agents(&state);
        if known == Some(wanted.clone()) || unknown_and_none {
            return None;
        }
        Some(wanted.map_or(AgentChange::Deselect, AgentChange::Select))
    }

    /// What a (re)bind of `uri` gives its runtime: the enabled containers
    /// its state lists.
    pub(super) async fn for_runtime(&self, uri: &str) -> ForRuntime {
        let Some(host) = self.host() else {
            return ForRuntime::default();
        };
        let state = host.for_backend().session_customizations(uri);
        if state.is_empty() {
            return ForRuntime::default();
        }
        let contributions = self.custom.contributions(uri, &state);
        let contributions = self.under_rego(uri, &state, contributions);
        let (me, session) = (self.me.upgrade(), uri.to_owned());
        let given = contributions.clone();
        let mapped = tokio::task::spawn_blocking(move || {
            me.map(|m| m.custom.map(&session, &given))
                .unwrap_or_default()
        })
        .await
        .unwrap_or_default();
        for (id, why) in &mapped.failed {
            warn!(session = %uri, container = %Escaped(id), "customization not written for the runtime: {why}");
        }
        let records = self
            .custom
            .newly_applied(uri, &mapped.applied)
            .iter()
            .filter_map(|a| applied_record(uri, &contributions, a))
            .collect();
        ForRuntime {
            fields: mapped.runtime,
            records,
        }
    }

    /// `ahp.customization`: each container the operator's Rego policy
    /// refuses is withheld from the runtime and shown as an error with the
    /// messages. A decision is recorded once per session, container and
    /// outcome under one revision: a re-bind does not repeat it.
    fn under_rego(
        &self,
        uri: &str,
        state: &[Customization],
        contributions: Vec<Contribution>,
    ) -> Vec<Contribution> {
        if self.policy.current().rego().is_none() {
            return contributions;
        }
        let Some(host) = self.host() else {
            // The host gone (the bridge stopping): nothing reaches the runtime.
            return vec![];
        };
        let mut kept = Vec::with_capacity(contributions.len());
        for c in contributions {
            let subject = host.connections().subject_of(c.client_id.as_deref());
            let doc = rego_custom::customization_of(&c);
            let body = Body::Customization {
                customization: &doc,
            };
            let about = format!("{} {}", doc.kind, doc.name);
            let verdict = host.governor().decide(Ask {
                subject: &subject,
                session: Some(uri),
                body,
                about: &about,
                recording: Recording::Deferred,
            });
            let refused = verdict.refused().map(str::to_owned);
            if let Some(decided) = verdict.decided() {
                let d = &decided.decision;
                let key = format!("{uri}\0{}\0{}\0{}", c.id, d.revision, d.outcome.as_str());
                if self.first_decision(key) {
                    host.governor().record(decided);
                }
            }
            let Some(reason) = refused else {
                kept.push(c);
                continue;
            };
            let why = format!("withheld by policy: {reason}");
            let shown = state.iter().find(|s| id_of(s) == Some(c.id.as_str()));
            match shown.and_then(|s| shape::withheld(s, &why)) {
                Some(shape::Withheld::Container(now)) => self.updated(uri, now),
                Some(shape::Withheld::Server(id, state)) => {
                    let action = SessionMcpServerStateChangedAction {
                        id,
                        state,
                        channel: None,
                    };
                    let action = StateAction::SessionMcpServerStateChanged(Box::new(action));
                    self.dispatch_custom(uri, action);
                }
                None => {}
            }
        }
        kept
    }

    /// Whether `key` (session, container, revision, outcome) is decided for
    /// the first time; forgotten with the session.
    fn first_decision(&self, key: String) -> bool {
        let mut seen = self.decided.lock().unwrap_or_else(|e| e.into_inner());
        seen.insert(key)
    }

    pub(super) fn write_records(&self, records: Vec<CustomizationRecord>) {
        let Some(log) = self.audit.clone() else {
            return;
        };
        if records.is_empty() {
            return;
        }
        tokio::task::spawn_blocking(move || {
            for r in &records {
                if let Err(e) = log.append(r) {
                    tracing::error!("customization record not written: {e:#}");
                }
            }
        });
    }

    /// The runtime's word on MCP servers, as their customizations' state.
    pub(super) fn mcp_states(&self, uri: &str, servers: &[McpServerStatus]) {
        let Some(host) = self.host() else { return };
        let listed = host.for_backend().session_customizations(uri);
        for s in servers {
            let Some(id) = mcp_id(&listed, &s.name) else {
                continue;
            };
            let action = SessionMcpServerStateChangedAction {
                id,
                state: mcp_state(s),
                channel: None,
            };
            self.dispatch_custom(
                uri,
                StateAction::SessionMcpServerStateChanged(Box::new(action)),
            );
        }
    }
}

/// Whether any container of the session lists an agent.
fn has_agents(state: &[Customization]) -> bool {
    state.iter().any(|c| {
        children_of(c)
            .iter()
            .any(|ch| matches!(ch, ChildCustomization::Agent(_)))
    })
}

fn as_loading(c: Customization) -> Customization {
    match c {
        Customization::Directory(mut d) => {
            d.load = Some(shape::loading());
            d.children = None;
            Customization::Directory(d)
        }
        Customization::Plugin(mut p) => {
            p.load = Some(shape::loading());
            p.children = None;
            Customization::Plugin(p)
        }
        other => other,
    }
}

/// The id of the MCP server `name` in a session's list: a host server, or
/// one inside a container.
fn mcp_id(listed: &[Customization], name: &str) -> Option<String> {
    listed.iter().find_map(|c| match c {
        Customization::McpServer(m) if m.name == name => Some(m.id.clone()),
        plugin => children_of(plugin).iter().find_map(|ch| match ch {
            ChildCustomization::McpServer(m) if m.name == name => Some(m.id.clone()),
            _ => None,
        }),
    })
}

fn mcp_state(s: &McpServerStatus) -> McpServerState {
    let error = |message: String| mcp_server_error("mcp", message);
    match s.status.as_str() {
        "connected" => McpServerState::Ready(McpServerReadyState {}),
        "pending" => McpServerState::Starting(McpServerStartingState::default()),
        "failed" => error(s.error.clone().unwrap_or_else(|| "failed".into())),
        "needs-auth" => {
            error("the server needs authentication, which this host does not offer".into())
        }
        _ => McpServerState::Stopped(McpServerStoppedState {}),
    }
}

fn applied_record(uri: &str, all: &[Contribution], a: &Applied) -> Option<CustomizationRecord> {
    let c = all.iter().find(|c| c.id == a.id)?;
    Some(CustomizationRecord {
        time: now_rfc3339(),
        session: uri.to_owned(),
        container: c.id.clone(),
        name: c.name.clone(),
        source: c.source,
        client_id: c.client_id.clone(),
        principal: c.principal.clone(),
        children: a.children.clone(),
        mcp_servers: a.servers.clone(),
        decision: CustomizationDecision::Applied,
        reason: None,
    })
}

fn refusal(uri: &str, e: &ClientEntry, why: &str) -> CustomizationRecord {
    CustomizationRecord {
        time: now_rfc3339(),
        session: uri.to_owned(),
        container: e.plugin.id.clone(),
        name: e.plugin.name.clone(),
        source: Source::ClientPlugin,
        client_id: Some(e.client_id.clone()),
        principal: e.principal.clone(),
        children: vec![],
        mcp_servers: vec![],
        decision: CustomizationDecision::Refused,
        reason: Some(why.to_owned()),
    }
}
