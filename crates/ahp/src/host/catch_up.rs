//! What a subscriber starts from and how a returning client catches up,
//! as types: the answer to a `reconnect`, and what a snapshot is read with.
//! Their own file because the host (`mod.rs`) builds and returns them and
//! the subscriptions (`subscriptions.rs`) fill them in: both import them,
//! and the subscriptions do not import the host's methods.

use std::sync::Arc;

use serde_json::Value;

use ahp_bridge_policy::Policy;

/// How a `reconnect` is answered.
pub enum Reconnected {
    /// Every action since the client's last one, on the channels it kept.
    Replay {
        actions: Vec<Value>,
        missing: Vec<String>,
    },
    /// Too far behind (or an earlier instance's number): fresh snapshots.
    Snapshot {
        snapshots: Vec<Value>,
        missing: Vec<String>,
    },
    /// Channel by channel (AHP 1.1): each one replayed or snapshot.
    Channels {
        channels: Vec<Value>,
        missing: Vec<String>,
    },
}

/// What a snapshot is read with besides the state: the policy in force
/// (its hidden sections, the policy channel) and the host's settings.
pub(super) struct View {
    pub policy: Arc<Policy>,
    pub pool_size: usize,
    pub max_subscriptions: usize,
}
