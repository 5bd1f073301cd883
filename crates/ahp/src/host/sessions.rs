//! The AHP state the host serves: the root, each session (typed
//! `ahp-types` state, its owner, its opt-ins) and each chat. Changed only by
//! [`Sessions::apply`] (the official reducers), [`Sessions::insert`] and
//! [`Sessions::remove`], which only the host's action path calls; every
//! other method reads.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use ahp::reducers::{
    apply_action_to_chat, apply_action_to_root, apply_action_to_session, ReduceOutcome,
};
use ahp_types::actions::StateAction;
use ahp_types::state::{ChatState, RootState, SessionState, SessionSummary};
use serde_json::Value;

use super::chats::Chats;
use super::session_start::{Creator, SessionStart};
use crate::auth::Principal;
use crate::extension::{self, TransformOptIn};
use crate::protocol::actions::{Action, Rejection};
use crate::protocol::uri::{channel_kind, local_path, ChannelKind, ROOT_URI};
use ahp_bridge_base::config::Role;
use ahp_bridge_policy::parse_additions;

/// The one agent provider this host serves.
pub const PROVIDER: &str = "copilot";

/// The `_meta` key that marks a session something else drives (an SDK app's).
pub const WATCHED_ONLY: &str = "sdk";

/// The session setting of the model its turns use.
pub const MODEL_SETTING: &str = "model";
/// The session config key of the text a session starts with in its prompt,
/// in front of the runtime's AHP host.
pub const SECTIONS_SETTING: &str = "systemMessageSections";

pub(super) struct Sessions {
    root: RootState,
    entries: BTreeMap<String, SessionEntry>,
    /// Each session's chat.
    chats: Chats,
    /// A chat URI an earlier version of the host published -> the chat's
    /// URI now (sessions stored then answer to both).
    aliases: HashMap<String, String>,
}

struct SessionEntry {
    state: SessionState,
    /// The principal that created it.
    owner: String,
    /// Its creating client, as the policy sees it (this run only).
    creator: Option<Creator>,
    chat: String,
    /// clientId -> the `systemMessageTransform` opt-in of its active-client entry.
    opt_ins: BTreeMap<String, TransformOptIn>,
    created_at: String,
    /// The last change worth keeping (a turn's end, a title, ...).
    modified_at: String,
}

/// A session about to exist: its state, its one chat, who owns it.
pub struct NewSession {
    pub uri: String,
    pub owner: String,
    pub creator: Option<Creator>,
    pub state: SessionState,
    pub chat: ChatState,
    pub created_at: String,
    pub modified_at: String,
    /// The chat URI an earlier version published for it, still answered to.
    pub legacy_chat: Option<String>,
}

/// Its URI is taken.
#[derive(Debug)]
pub(super) struct AlreadyExists;

impl Sessions {
    pub(super) fn new(root: RootState) -> Self {
        Self {
            root,
            entries: BTreeMap::new(),
            chats: Chats::default(),
            aliases: HashMap::new(),
        }
    }

    /// The channel a URI names now: a chat's earlier URI is its URI today.
    pub(super) fn resolve<'a>(&'a self, channel: &'a str) -> &'a str {
        self.aliases.get(channel).map_or(channel, String::as_str)
    }

    /// The chats, to read.
    pub(super) fn chats(&self) -> &Chats {
        &self.chats
    }

    /// The chats, to change what a chat's own methods change (its window,
    /// who started its turn); never to add or remove one.
    pub(super) fn chats_mut(&mut self) -> &mut Chats {
        &mut self.chats
    }

    pub(super) fn insert(&mut self, s: NewSession) -> Result<(), AlreadyExists> {
        if self.entries.contains_key(&s.uri) {
            return Err(AlreadyExists);
        }
        let chat = s.chat.resource.clone();
        if let Some(legacy) = s.legacy_chat {
            self.aliases.insert(legacy, chat.clone());
        }
        self.chats.insert(chat.clone(), s.chat, s.uri.clone());
        let entry = SessionEntry {
            state: s.state,
            owner: s.owner,
            creator: s.creator,
            chat,
            opt_ins: BTreeMap::new(),
            created_at: s.created_at,
            modified_at: s.modified_at,
        };
        self.entries.insert(s.uri, entry);
        Ok(())
    }

    /// Takes a session and its chat out; returns its owner and chat URI.
    pub(super) fn remove(&mut self, uri: &str) -> Option<(String, String)> {
        let entry = self.entries.remove(uri)?;
        self.chats.remove(&entry.chat);
        self.aliases.retain(|_, chat| *chat != entry.chat);
        Some((entry.owner, entry.chat))
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn uris(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Applies an action with the official reducer of its channel, keeping
    /// the opt-in of an active-client change beside the typed state.
    pub(super) fn apply(&mut self, channel: &str, a: &Action) -> Result<(), Rejection> {
        let outcome = match channel_kind(channel) {
            ChannelKind::Root => apply_action_to_root(&mut self.root, &a.action),
            ChannelKind::Session => {
                let s = self
                    .entries
                    .get_mut(channel)
                    .ok_or_else(|| Rejection(format!("no session {channel}")))?;
                let o = apply_action_to_session(&mut s.state, &a.action);
                if o == ReduceOutcome::Applied {
                    keep_opt_in(&mut s.opt_ins, a);
                }
                o
            }
            ChannelKind::Chat => {
                let c = self
                    .chats
                    .state_mut(channel)
                    .ok_or_else(|| Rejection(format!("no chat {channel}")))?;
                apply_action_to_chat(c, &a.action)
            }
            ChannelKind::HostChannel | ChannelKind::Other => {
                return Err(Rejection(format!("unknown channel {channel}")))
            }
        };
        match outcome {
            ReduceOutcome::Applied | ReduceOutcome::NoOp => Ok(()),
            ReduceOutcome::OutOfScope => Err("action does not apply to this channel".into()),
            ReduceOutcome::Invalid(e) => Err(Rejection(format!("invalid action: {e}"))),
        }
    }

    /// Marks `session` changed now (a boundary worth keeping).
    pub(super) fn touch(&mut self, session: &str, now: String) {
        if let Some(e) = self.entries.get_mut(session) {
            e.modified_at = now;
        }
    }

    /// The session a channel belongs to (a session is its own).
    pub(super) fn session_of(&self, channel: &str) -> Option<&str> {
        match channel_kind(channel) {
            ChannelKind::Session => self.entries.get_key_value(channel).map(|(k, _)| k.as_str()),
            ChannelKind::Chat => self.chats.session_of(channel),
            _ => None,
        }
    }

    /// Whether `p` may see `channel`: the root always, a session or chat
    /// when its session is visible to it. Unknown channels are not visible.
    pub(super) fn visible(&self, p: &Principal, channel: &str) -> bool {
        if channel_kind(channel) == ChannelKind::Root {
            return true;
        }
        self.session_of(channel)
            .and_then(|s| self.entries.get(s))
            .is_some_and(|e| p.sees(&e.owner))
    }

    /// Whether `channel` is of a session something else drives (an SDK
    /// app's, its state's `_meta.sdk`): clients watch it, they act on it not.
    pub(super) fn watched_only(&self, channel: &str) -> bool {
        self.session_of(channel)
            .and_then(|s| self.entries.get(s))
            .and_then(|e| e.state.meta.as_ref())
            .is_some_and(|m| m.get(WATCHED_ONLY) == Some(&serde_json::Value::Bool(true)))
    }

    pub(super) fn owner(&self, session: &str) -> Option<&str> {
        self.entries.get(session).map(|e| e.owner.as_str())
    }

    pub(super) fn model_of(&self, uri: &str) -> Option<String> {
        let config = self.state(uri)?.config.as_ref()?;
        let model = config.values.get(MODEL_SETTING)?.as_str()?;
        Some(model.to_owned())
    }

    /// Its owner and the section text it was created with; a value that no
    /// longer parses (a store written by hand) is no text.
    pub(super) fn start_of(&self, uri: &str) -> Option<SessionStart> {
        let e = self.entries.get(uri)?;
        let values = e.state.config.as_ref().map(|c| &c.values);
        let sections = values.and_then(|v| v.get(SECTIONS_SETTING));
        // The rest of a session's config is the backend's own settings.
        let backend_settings = values.into_iter().flatten();
        let backend_settings = backend_settings
            .filter(|(k, _)| *k != MODEL_SETTING && *k != SECTIONS_SETTING)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Some(SessionStart {
            owner: e.owner.clone(),
            creator: e.creator.clone(),
            additions: sections
                .and_then(|v| parse_additions(v).ok())
                .unwrap_or_default(),
            backend_settings,
        })
    }

    /// The sessions `p` sees, with when each was last changed.
    pub(super) fn visible_to<'a>(
        &'a self,
        p: &'a Principal,
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.entries
            .iter()
            .filter(|(_, e)| p.sees(&e.owner))
            .map(|(u, e)| (u.as_str(), e.modified_at.as_str()))
    }

    /// How many sessions `principal` owns.
    pub(super) fn count_owned_by(&self, principal: &str) -> usize {
        self.entries
            .values()
            .filter(|e| e.owner == principal)
            .count()
    }

    /// Whether a turn runs that `client_id` answers for: one it started, or
    /// any in a session it is an active client of.
    pub(super) fn turn_running_for(&self, client_id: &str) -> bool {
        self.chats.running(client_id).any(|(session, started)| {
            started
                || self.entries.get(session).is_some_and(|e| {
                    e.state
                        .active_clients
                        .iter()
                        .any(|a| a.client_id == client_id)
                })
        })
    }

    /// The sessions `principal` created.
    pub(super) fn owned_by(&self, principal: &str) -> Vec<String> {
        self.entries
            .iter()
            .filter(|(_, e)| e.owner == principal)
            .map(|(u, _)| u.clone())
            .collect()
    }

    pub(super) fn state(&self, session: &str) -> Option<&SessionState> {
        self.entries.get(session).map(|e| &e.state)
    }

    /// Whether `client_id` is an active client of `session`.
    pub(super) fn is_active(&self, session: &str, client_id: &str) -> bool {
        self.state(session)
            .is_some_and(|s| s.active_clients.iter().any(|a| a.client_id == client_id))
    }

    /// The chat of a session.
    pub(super) fn chat_of(&self, session: &str) -> Option<&str> {
        self.entries.get(session).map(|e| e.chat.as_str())
    }

    /// The opt-in of `client_id` in `session`.
    pub(super) fn opt_in(&self, session: &str, client_id: &str) -> Option<&TransformOptIn> {
        self.entries.get(session)?.opt_ins.get(client_id)
    }

    /// A snapshot's `state`, extension fields restored; `hidden`: the
    /// sections the root's catalogue marks restricted.
    pub(super) fn snapshot_state(&self, uri: &str, hidden: &[String]) -> Option<Value> {
        if uri == ROOT_URI {
            let mut v = serde_json::to_value(&self.root).ok()?;
            if let Some(agent) = v["agents"].get_mut(0) {
                agent["systemMessageSections"] = extension::section_catalogue(hidden);
            }
            return Some(v);
        }
        if let Some(e) = self.entries.get(uri) {
            let mut v = serde_json::to_value(&e.state).ok()?;
            extension::restore_opt_ins(&mut v, &e.opt_ins);
            return Some(v);
        }
        serde_json::to_value(self.chats.chat(uri)?).ok()
    }

    /// The directories `p` may read through `channel`: the working
    /// directories of the sessions it sees (a session without one works in
    /// `default`, the configured one); on the root, a caller who could
    /// create a session there (`participate`) also reads the default.
    /// `None`: a channel it does not see (or no channel at all).
    pub(super) fn readable_dirs(
        &self,
        p: &Principal,
        channel: &str,
        default: Option<&Path>,
    ) -> Option<Vec<PathBuf>> {
        let kind = channel_kind(channel);
        let sessions: Vec<&SessionEntry> = match kind {
            ChannelKind::Root => self.entries.values().filter(|e| p.sees(&e.owner)).collect(),
            ChannelKind::Session | ChannelKind::Chat => {
                let s = self
                    .session_of(channel)
                    .filter(|_| self.visible(p, channel))?;
                vec![self.entries.get(s)?]
            }
            ChannelKind::HostChannel | ChannelKind::Other => return None,
        };
        let mut dirs = Vec::new();
        for e in sessions {
            match e.state.working_directories.as_deref() {
                Some(w) if !w.is_empty() => {
                    dirs.extend(w.iter().filter_map(|u| local_path(u).ok()))
                }
                _ => dirs.extend(default.map(Path::to_path_buf)),
            }
        }
        if kind == ChannelKind::Root && p.has(Role::Participate) {
            dirs.extend(default.map(Path::to_path_buf));
        }
        Some(dirs)
    }

    /// A session's summary, as `listSessions` and the root notifications carry it.
    pub(super) fn summary(&self, uri: &str) -> Option<SessionSummary> {
        let e = self.entries.get(uri)?;
        Some(SessionSummary {
            provider: PROVIDER.into(),
            title: e.state.title.clone(),
            status: e.state.status,
            activity: None,
            origin: None,
            project: None,
            working_directories: e.state.working_directories.clone(),
            annotations: None,
            resource: uri.to_owned(),
            created_at: e.created_at.clone(),
            modified_at: e.modified_at.clone(),
            changes: None,
            meta: e.state.meta.clone(),
            chats: None,
            default_chat: Some(e.chat.clone()),
        })
    }

    /// A session as the store keeps it (its one chat included).
    pub(super) fn stored(&self, uri: &str) -> Option<ahp_bridge_store::StoredSession> {
        use ahp_bridge_store::{StoredChat, StoredSession};
        let e = self.entries.get(uri)?;
        let chat = self.chats.chat(&e.chat).and_then(|c| {
            Some(StoredChat {
                uri: e.chat.clone(),
                state: serde_json::to_string(c).ok()?,
            })
        });
        Some(StoredSession {
            uri: uri.to_owned(),
            owner: e.owner.clone(),
            created_at: e.created_at.clone(),
            modified_at: e.modified_at.clone(),
            state: serde_json::to_string(&e.state).ok()?,
            backend_ref: None,
            chats: chat.into_iter().collect(),
        })
    }
}

/// Keeps (or drops) the opt-in of an applied active-client change.
fn keep_opt_in(opt_ins: &mut BTreeMap<String, TransformOptIn>, a: &Action) {
    match &a.action {
        StateAction::SessionActiveClientSet(set) => {
            let id = set.active_client.client_id.clone();
            match &a.opt_in {
                Some(o) => opt_ins.insert(id, o.clone()),
                None => opt_ins.remove(&id),
            };
        }
        StateAction::SessionActiveClientRemoved(r) => {
            opt_ins.remove(&r.client_id);
        }
        _ => {}
    }
}

pub(super) fn now_iso() -> String {
    jiff::Timestamp::now().to_string()
}
