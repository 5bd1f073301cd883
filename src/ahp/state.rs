//! The host's state: root, sessions and chats (typed, `ahp-types`), changed
//! only by the official reducers; the connections and client presence; one
//! monotonic `serverSeq` with its replay buffer.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use ahp::reducers::{
    apply_action_to_chat, apply_action_to_root, apply_action_to_session, ReduceOutcome,
};
use ahp_types::actions::StateAction;
use ahp_types::state::{ChatState, RootState, SessionState};
use serde_json::{json, Value};

use super::auth::Principal;
use super::clients::ConnId;
use super::extension;
use super::outbound::Outbound;
use super::uri::{channel_kind, ChannelKind};
use crate::jsonrpc::Peer;

pub const PROVIDER: &str = "copilot";

/// One client connection.
pub(super) struct Conn {
    pub principal: Arc<Principal>,
    pub out: Outbound,
    pub peer: Arc<Peer>,
    pub client_id: Option<String>,
    pub subs: HashSet<String>,
}

pub(super) struct SessionEntry {
    pub state: SessionState,
    /// The principal that created it.
    pub owner: String,
    pub chat: String,
    /// clientId -> the raw `systemMessageTransform` object of its active-client entry.
    pub opt_ins: BTreeMap<String, Value>,
    /// toolCallId -> clientId of the client that contributed the tool.
    pub tool_owners: HashMap<String, String>,
    pub created_at: String,
    /// The last change worth keeping (a turn's end, a title, ...).
    pub modified_at: String,
}

/// Where a client id is connected now, and whose it is. Kept while the
/// client is connected or inside its grace period; then the id is free.
pub(super) struct Presence {
    pub principal: Arc<Principal>,
    pub conn: Option<ConnId>,
    /// Bumped on every connect, so a grace timer knows it is stale.
    pub generation: u64,
}

/// One action kept for `reconnect` replay, as it was broadcast.
pub(super) struct Replayed {
    pub seq: u64,
    pub channel: String,
    /// The `action` notification's params, serialized.
    pub envelope: String,
}

pub(super) struct State {
    /// The last `serverSeq` issued.
    pub seq: u64,
    /// This instance's first `serverSeq`, less one: numbers up to it were
    /// (or may have been) issued by an earlier instance, so a client that
    /// last saw one of them gets snapshots, never a replay.
    pub seq_base: u64,
    /// Numbers above this are not reserved in the store yet.
    pub seq_ceiling: u64,
    pub root: RootState,
    pub sessions: BTreeMap<String, SessionEntry>,
    /// chat URI -> (its state, its session's URI)
    pub chats: HashMap<String, (ChatState, String)>,
    pub replay: VecDeque<Replayed>,
    /// Bytes of the envelopes in `replay`.
    pub replay_bytes: usize,
    pub conns: HashMap<ConnId, Conn>,
    pub clients: HashMap<String, Presence>,
    pub next_conn: ConnId,
}

impl State {
    pub fn new(root: RootState) -> Self {
        // Without a store, the clock orders instances: microseconds since
        // 1970 stay below 2^53 (a JSON number any client reads exactly)
        // until the year 2255, and no instance issues one action per
        // microsecond for its whole life. A store replaces this with its
        // reserved ceiling (see `super::durable`).
        let base = jiff::Timestamp::now().as_microsecond().max(0) as u64;
        Self {
            seq: base,
            seq_base: base,
            seq_ceiling: u64::MAX,
            root,
            sessions: BTreeMap::new(),
            chats: HashMap::new(),
            replay: VecDeque::new(),
            replay_bytes: 0,
            conns: HashMap::new(),
            clients: HashMap::new(),
            next_conn: 1,
        }
    }

    /// Keeps an action for replay, dropping the oldest beyond either bound.
    pub fn keep_for_replay(&mut self, entry: Replayed, max_count: usize, max_bytes: usize) {
        self.replay_bytes += entry.envelope.len();
        self.replay.push_back(entry);
        while self.replay.len() > max_count || self.replay_bytes > max_bytes {
            match self.replay.pop_front() {
                Some(old) => self.replay_bytes -= old.envelope.len(),
                None => break,
            }
        }
    }

    /// The session a channel belongs to (a session is its own).
    pub fn session_of(&self, channel: &str) -> Option<&str> {
        match channel_kind(channel) {
            ChannelKind::Session => self
                .sessions
                .get_key_value(channel)
                .map(|(k, _)| k.as_str()),
            ChannelKind::Chat => self.chats.get(channel).map(|(_, s)| s.as_str()),
            _ => None,
        }
    }

    /// Whether `p` may see `channel`: the root always, a session or chat
    /// when its session is visible to it. Unknown channels are not visible.
    pub fn visible(&self, p: &Principal, channel: &str) -> bool {
        if channel_kind(channel) == ChannelKind::Root {
            return true;
        }
        self.session_of(channel)
            .and_then(|s| self.sessions.get(s))
            .is_some_and(|e| p.sees(&e.owner))
    }

    /// Applies a typed action with the official reducer of its channel.
    pub fn apply(&mut self, channel: &str, typed: &StateAction, raw: &Value) -> Result<(), String> {
        let outcome = match channel_kind(channel) {
            ChannelKind::Root => apply_action_to_root(&mut self.root, typed),
            ChannelKind::Session => {
                let s = self
                    .sessions
                    .get_mut(channel)
                    .ok_or_else(|| format!("no session {channel}"))?;
                let o = apply_action_to_session(&mut s.state, typed);
                if o == ReduceOutcome::Applied {
                    extension::keep_opt_in(&mut s.opt_ins, typed, raw);
                }
                o
            }
            ChannelKind::Chat => {
                let (c, _) = self
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
}

pub(super) fn now_iso() -> String {
    jiff::Timestamp::now().to_string()
}

/// A session's state as clients see it: extension fields restored.
pub(super) fn session_json(s: &SessionEntry) -> Value {
    let mut v = serde_json::to_value(&s.state).unwrap_or(Value::Null);
    extension::restore_opt_ins(&mut v, &s.opt_ins);
    v
}

pub(super) fn summary_json(uri: &str, s: &SessionEntry) -> Value {
    json!({
        "resource": uri, "provider": PROVIDER, "title": s.state.title, "status": s.state.status,
        "createdAt": s.created_at, "modifiedAt": s.modified_at, "defaultChat": s.chat,
        "workingDirectories": s.state.working_directories,
    })
}
