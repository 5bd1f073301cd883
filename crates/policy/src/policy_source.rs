//! The one policy in force, shared: the source is held by whoever may
//! replace it (startup, the SIGHUP reload); readers hold a [`PolicyReader`]
//! and take a snapshot per use. A `watch` channel carries it, so a reader
//! never sees a half-replaced policy and never waits for the writer.

use std::sync::Arc;

use tokio::sync::watch;

use super::Policy;

/// Replaces the policy in force.
pub struct PolicySource(watch::Sender<Arc<Policy>>);

/// Reads the policy in force; cheap to clone.
#[derive(Clone)]
pub struct PolicyReader(watch::Receiver<Arc<Policy>>);

impl PolicySource {
    pub fn new(policy: Policy) -> Self {
        Self(watch::Sender::new(Arc::new(policy)))
    }

    /// Puts `policy` in force; whether its hash differs from the one before.
    pub fn replace(&self, policy: Policy) -> bool {
        let changed = policy.policy_sha256() != self.0.borrow().policy_sha256();
        self.0.send_replace(Arc::new(policy));
        changed
    }

    pub fn reader(&self) -> PolicyReader {
        PolicyReader(self.0.subscribe())
    }

    pub fn current(&self) -> Arc<Policy> {
        self.0.borrow().clone()
    }
}

impl PolicyReader {
    /// The policy now: one snapshot, for one request or one binding.
    pub fn current(&self) -> Arc<Policy> {
        self.0.borrow().clone()
    }

    /// A reader of a fixed policy (tests, and hosts without a reload).
    pub fn fixed(policy: Policy) -> Self {
        PolicySource::new(policy).reader()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_bridge_base::config::Config;

    #[test]
    fn readers_see_a_replaced_policy_and_snapshots_keep_theirs() {
        let source = PolicySource::new(Policy::default());
        let reader = source.reader();
        let before = reader.current();
        let mut cfg = Config::default();
        cfg.policy.transform_timeout = std::time::Duration::from_secs(9);
        assert!(source.replace(Policy::from_config(&cfg).unwrap()));
        assert_eq!(
            reader.current().timeout(),
            std::time::Duration::from_secs(9)
        );
        assert_eq!(
            before.timeout(),
            Policy::default().timeout(),
            "a snapshot stays"
        );
        assert!(
            !source.replace(Policy::from_config(&cfg).unwrap()),
            "same hash"
        );
    }
}
