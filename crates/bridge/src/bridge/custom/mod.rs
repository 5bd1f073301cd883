//! Customizations joined to sessions: the host's containers as read
//! ([`catalog`]), the plugins clients publish, read from them over AHP
//! ([`client_source`]) and held to the operator's policy ([`client_vet`]), their
//! AHP shapes ([`shape`]), and what each session's runtime gets of them
//! ([`runtime_map`]). [`CustomizationState`] owns all of it; the bridge asks it and
//! dispatches what it answers.

pub(crate) mod catalog;
pub(crate) mod client_source;
pub(crate) mod client_vet;
pub(crate) mod rego_container;
pub(crate) mod runtime_map;
pub(crate) mod shape;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use ahp_types::state::{ChildCustomization, Customization};

use self::catalog::HostEntry;
use self::runtime_map::{Applied, Contribution, Mapped, RuntimeContents, Written};
use crate::ahp::{children_of, container_enabled, id_of, plugin, PluginOrigin};
use crate::ahp::{ActiveClientView, ClientPlugin};
use crate::audit::Source;
use crate::config::{CustomizationPolicy, HostContainer, HostSource, Reloadable};
use crate::customize::{Bounds, Package};

/// What became of a client's plugin.
#[derive(Debug, Clone)]
pub(crate) enum ClientOutcome {
    Reading,
    /// Read and vetted; `cut`: what redaction removed, said for a user.
    Read {
        package: Arc<Package>,
        cut: Vec<String>,
    },
    /// Refused, and why (the policy key or rule, or the plugin's own fault).
    Refused(String),
}

/// A plugin a client publishes in one session.
#[derive(Debug, Clone)]
pub(crate) struct ClientEntry {
    pub client_id: String,
    pub principal: Option<String>,
    pub plugin: ClientPlugin,
    pub outcome: ClientOutcome,
}

#[derive(Default)]
struct CustomTables {
    host: Vec<HostEntry>,
    /// Session -> container id -> the client's plugin.
    clients: BTreeMap<String, BTreeMap<String, ClientEntry>>,
    /// Session -> container id -> the key of what its runtime last got.
    applied: BTreeMap<String, BTreeMap<String, String>>,
    /// Session -> what was written for its runtime, by folder.
    written: BTreeMap<String, Written>,
}

pub(crate) struct CustomizationState {
    /// What the config says: replaced whole by a reload.
    settings: std::sync::RwLock<Arc<Settings>>,
    /// Where containers are written for the runtime; this process's own.
    work: PathBuf,
    first_read: tokio::sync::OnceCell<()>,
    inner: Mutex<CustomTables>,
}

impl Drop for CustomizationState {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.work);
    }
}

/// The folders a bridge writes for its runtime: `PREFIX<pid>-<uuid>`.
const WORK_PREFIX: &str = "ahp-copilot-bridge-";

/// Removes the folders of bridges that are gone (killed, so their `Drop`
/// never ran): those whose process id no longer runs.
fn remove_left_behind(tmp: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix(WORK_PREFIX)
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok());
        if pid.is_some_and(|p| !std::path::Path::new(&format!("/proc/{p}")).exists()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// `[customizations]` and `[policy.customizations]`, as read.
#[derive(Debug, PartialEq)]
struct Settings {
    containers: Vec<HostContainer>,
    policy: CustomizationPolicy,
    bounds: Bounds,
}

impl Settings {
    fn of(cfg: Reloadable<'_>) -> Self {
        let policy = cfg.policy().customizations.clone();
        let bounds = Bounds {
            max_files: policy.max_plugin_files,
            ..Bounds::default()
        };
        Self {
            containers: cfg.customizations().containers(),
            policy,
            bounds,
        }
    }
}

impl CustomizationState {
    pub(crate) fn new(cfg: Reloadable<'_>) -> Self {
        remove_left_behind(&std::env::temp_dir());
        let work = std::env::temp_dir().join(format!(
            "{WORK_PREFIX}{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        Self {
            settings: std::sync::RwLock::new(Arc::new(Settings::of(cfg))),
            work,
            first_read: tokio::sync::OnceCell::new(),
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, CustomTables> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn settings(&self) -> Arc<Settings> {
        self.settings
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A reload's `[customizations]` and `[policy.customizations]`: whether
    /// they differ from those in force (then they are, and the host's
    /// containers are read again by the caller).
    pub(crate) fn reconfigure(&self, cfg: Reloadable<'_>) -> bool {
        let new = Settings::of(cfg);
        let mut s = self.settings.write().unwrap_or_else(|e| e.into_inner());
        if **s == new {
            return false;
        }
        *s = Arc::new(new);
        true
    }

    pub(crate) fn policy(&self) -> CustomizationPolicy {
        self.settings().policy.clone()
    }

    /// Whether the host provides anything at all.
    pub(crate) fn has_host_containers(&self) -> bool {
        !self.settings().containers.is_empty()
    }

    /// The host's directories (for the watcher).
    pub(crate) fn watched_paths(&self) -> Vec<PathBuf> {
        self.settings()
            .containers
            .iter()
            .filter_map(|c| match &c.source {
                HostSource::Directory { path, .. } | HostSource::Plugin { path } => {
                    Some(path.clone())
                }
                HostSource::McpServer { .. } => None,
            })
            .collect()
    }

    /// The host's containers as sessions list them, read on first use.
    pub(crate) async fn host_shapes(&self) -> Vec<Customization> {
        self.first_read
            .get_or_init(|| async {
                self.reread().await;
            })
            .await;
        self.lock().host.iter().map(HostEntry::shape).collect()
    }

    /// Reads every host container again; the ids of those that changed.
    pub(crate) async fn reread(&self) -> Vec<String> {
        let settings = self.settings();
        let mut fresh = Vec::with_capacity(settings.containers.len());
        for c in &settings.containers {
            fresh.push(catalog::read(c, &settings.bounds).await);
        }
        let mut g = self.lock();
        let changed = fresh
            .iter()
            .filter(|f| {
                let before = g.host.iter().find(|h| h.container.id == f.container.id);
                before.is_none_or(|b| b.digest() != f.digest() || b.shape() != f.shape())
            })
            .map(|f| f.container.id.clone())
            .collect();
        g.host = fresh;
        changed
    }

    /// The host container `id` as sessions list it now.
    pub(crate) fn host_shape(&self, id: &str) -> Option<Customization> {
        let g = self.lock();
        g.host
            .iter()
            .find(|h| h.container.id == id)
            .map(HostEntry::shape)
    }

    // ── the plugins of clients ───────────────────────────────────────────

    /// Takes note of what a client's entry publishes now: the plugins to
    /// read (new, or with another `nonce` or `uri`), marked `Reading`, and
    /// the ids of those it no longer publishes, forgotten. An id a host
    /// container has is refused outright.
    pub(crate) fn client_set(
        &self,
        session: &str,
        view: &ActiveClientView,
    ) -> (Vec<ClientEntry>, Vec<String>) {
        let mut g = self.lock();
        let host_ids: BTreeSet<String> = g.host.iter().map(|h| h.container.id.clone()).collect();
        let mine = g.clients.entry(session.to_owned()).or_default();
        let gone: Vec<String> = mine
            .iter()
            .filter(|(id, e)| {
                e.client_id == view.client_id && !view.plugins.iter().any(|p| &p.id == *id)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            mine.remove(id);
        }
        let mut read = Vec::new();
        for p in &view.plugins {
            if host_ids.contains(&p.id) {
                continue;
            }
            let same = mine
                .get(&p.id)
                .is_some_and(|e| e.client_id == view.client_id && e.plugin == *p);
            if same {
                continue;
            }
            let entry = ClientEntry {
                client_id: view.client_id.clone(),
                principal: view.subject.principal.clone(),
                plugin: p.clone(),
                outcome: ClientOutcome::Reading,
            };
            mine.insert(p.id.clone(), entry.clone());
            read.push(entry);
        }
        (read, gone)
    }

    /// Records what reading a plugin came to; false when the entry changed
    /// meanwhile (a new nonce, the client left): the outcome is stale.
    pub(crate) fn client_read(
        &self,
        session: &str,
        plugin: &ClientPlugin,
        outcome: ClientOutcome,
    ) -> bool {
        let mut g = self.lock();
        let Some(e) = g
            .clients
            .get_mut(session)
            .and_then(|m| m.get_mut(&plugin.id))
        else {
            return false;
        };
        if e.plugin != *plugin {
            return false;
        }
        e.outcome = outcome;
        true
    }

    /// Forgets every plugin `client_id` publishes in `session`; their ids.
    pub(crate) fn client_left(&self, session: &str, client_id: &str) -> Vec<String> {
        let mut g = self.lock();
        let Some(mine) = g.clients.get_mut(session) else {
            return vec![];
        };
        let gone: Vec<String> = mine
            .iter()
            .filter(|(_, e)| e.client_id == client_id)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            mine.remove(id);
        }
        gone
    }

    /// Forgets a disposed session, and removes what was written for it.
    pub(crate) fn session_gone(&self, session: &str) {
        let dir = self.session_dir(session);
        let mut g = self.lock();
        g.clients.remove(session);
        g.applied.remove(session);
        g.written.remove(session);
        drop(g);
        let _ = std::fs::remove_dir_all(dir);
    }

    fn session_dir(&self, session: &str) -> PathBuf {
        self.work.join(runtime_map::short(session))
    }

    // ── what a session's runtime gets ────────────────────────────────────

    /// The enabled containers of `state` (a session's customizations as
    /// its clients toggled them) that can reach the runtime.
    pub(crate) fn contributions(
        &self,
        session: &str,
        state: &[Customization],
    ) -> Vec<Contribution> {
        let g = self.lock();
        let clients = g.clients.get(session);
        state
            .iter()
            .filter(|c| container_enabled(c))
            .filter_map(|c| {
                let id = id_of(c)?;
                let disabled = disabled_children(c);
                if let Some(h) = g.host.iter().find(|h| h.container.id == id) {
                    return host_contribution(h, disabled);
                }
                let e = clients?.get(id)?;
                client_contribution(id, e, disabled)
            })
            .collect()
    }

    /// Writes the contributions for `session`'s runtime (blocking I/O).
    pub(crate) fn map(&self, session: &str, contributions: &[Contribution]) -> Mapped {
        let dir = self.session_dir(session);
        // Taken while this session's bind writes (binds of one session
        // are one at a time; one that overlaps writes to a new folder).
        let taken = self.lock().written.remove(session);
        let mut written = taken.unwrap_or_default();
        let mapped = runtime_map::map(contributions, &dir, &mut written);
        self.lock()
            .written
            .entry(session.to_owned())
            .or_default()
            .append(&mut written);
        mapped
    }

    /// Of what `session`'s runtime gets now, what it did not get before
    /// (new, or changed): each is an audit record. Remembered as got.
    pub(crate) fn newly_applied(&self, session: &str, applied: &[Applied]) -> Vec<Applied> {
        let mut g = self.lock();
        let got = g.applied.entry(session.to_owned()).or_default();
        let new: Vec<Applied> = applied
            .iter()
            .filter(|a| got.get(&a.id) != Some(&a.key))
            .cloned()
            .collect();
        *got = applied
            .iter()
            .map(|a| (a.id.clone(), a.key.clone()))
            .collect();
        new
    }
}

fn host_contribution(h: &HostEntry, disabled: BTreeSet<String>) -> Option<Contribution> {
    let (source, contents) = match (&h.container.source, &h.package) {
        (HostSource::McpServer { name, server }, _) => (
            Source::HostMcpServer,
            RuntimeContents::Server(name.clone(), server.clone()),
        ),
        (HostSource::Directory { .. }, Some(p)) => {
            (Source::HostDirectory, RuntimeContents::Package(p.clone()))
        }
        (HostSource::Plugin { .. }, Some(p)) => {
            (Source::HostPlugin, RuntimeContents::Package(p.clone()))
        }
        _ => return None,
    };
    Some(Contribution {
        id: h.container.id.clone(),
        name: h.container.name.clone(),
        source,
        client_id: None,
        principal: None,
        contents,
        disabled,
    })
}

fn client_contribution(
    id: &str,
    e: &ClientEntry,
    disabled: BTreeSet<String>,
) -> Option<Contribution> {
    let ClientOutcome::Read { package, .. } = &e.outcome else {
        return None;
    };
    Some(Contribution {
        id: id.to_owned(),
        name: e.plugin.name.clone(),
        source: Source::ClientPlugin,
        client_id: Some(e.client_id.clone()),
        principal: e.principal.clone(),
        contents: RuntimeContents::Package(package.clone()),
        disabled,
    })
}

/// The ids of a container's children its clients turned off.
fn disabled_children(c: &Customization) -> BTreeSet<String> {
    children_of(c)
        .iter()
        .filter_map(shape::child_ref)
        .filter(|(_, enabled)| *enabled == Some(false))
        .map(|(id, _)| id.to_owned())
        .collect()
}

/// The name of the agent at `uri` in `state`, if it is there and enabled.
pub(crate) fn agent_named(state: &[Customization], uri: &str) -> Option<String> {
    state.iter().filter(|c| container_enabled(c)).find_map(|c| {
        children_of(c).iter().find_map(|ch| match ch {
            ChildCustomization::Agent(a) if a.uri == uri && a.enabled != Some(false) => {
                Some(a.name.clone())
            }
            _ => None,
        })
    })
}

/// A client's plugin as the session lists it.
pub(crate) fn client_shape(e: &ClientEntry) -> Customization {
    let (load, children, version) = match &e.outcome {
        ClientOutcome::Reading => (shape::loading(), None, None),
        ClientOutcome::Refused(why) => (shape::error(why.clone()), None, None),
        ClientOutcome::Read { package, cut } => (
            shape::load_of(package, cut),
            Some(shape::children(package, &e.plugin.id, &e.plugin.uri)),
            package.version.clone(),
        ),
    };
    let origin = PluginOrigin {
        id: e.plugin.id.clone(),
        uri: e.plugin.uri.clone(),
        name: e.plugin.name.clone(),
        client_id: Some(e.client_id.clone()),
    };
    plugin(origin, Some(load), children, version)
}
