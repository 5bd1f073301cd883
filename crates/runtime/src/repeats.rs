//! Which of a session's runtime events arrived before: a `session.event`
//! carries an `id` unique to the event, and one that comes again (two of
//! the bridge's connections both told of the session while it moves
//! between them, or the runtime sending it twice) must not reach the chat
//! twice, or clients would see text twice. The window is bounded: it keeps
//! the last [`WINDOW`] ids, as hashes.

use std::collections::hash_map::RandomState;
use std::collections::{HashSet, VecDeque};
use std::hash::BuildHasher;

/// How many of a session's latest event ids are remembered: a repeat
/// further back than this is not recognised (a repeat seen so far came
/// within a few events of the first).
pub(crate) const WINDOW: usize = 512;

/// The latest event ids of one session.
#[derive(Debug, Default)]
pub struct Repeats {
    /// Hashes, not the ids: 8 bytes each, whatever the runtime sends. A
    /// collision within the window (about 2^-46) would drop one event.
    seen: HashSet<u64>,
    order: VecDeque<u64>,
    hasher: RandomState,
}

impl Repeats {
    /// Whether the event `id` is new (and so to be acted on); remembers it.
    /// An event without an id cannot be told apart: it is always new.
    pub fn first_arrival(&mut self, id: Option<&str>) -> bool {
        let Some(id) = id else {
            return true;
        };
        let h = self.hasher.hash_one(id);
        if !self.seen.insert(h) {
            return false;
        }
        self.order.push_back(h);
        if self.order.len() > WINDOW {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_seen_within_the_window_is_a_repeat() {
        let mut r = Repeats::default();
        assert!(r.first_arrival(Some("ev-1")));
        assert!(r.first_arrival(Some("ev-2")));
        assert!(!r.first_arrival(Some("ev-1")));
        assert!(!r.first_arrival(Some("ev-2")));
        assert!(r.first_arrival(Some("ev-3")));
    }

    #[test]
    fn events_without_an_id_all_pass() {
        let mut r = Repeats::default();
        assert!(r.first_arrival(None));
        assert!(r.first_arrival(None));
    }

    #[test]
    fn the_window_is_bounded_and_forgets_the_oldest() {
        let mut r = Repeats::default();
        for i in 0..WINDOW + 10 {
            assert!(r.first_arrival(Some(&format!("ev-{i}"))));
        }
        assert_eq!(r.seen.len(), WINDOW);
        assert_eq!(r.order.len(), WINDOW);
        // The first ten fell out; the latest are still known.
        assert!(r.first_arrival(Some("ev-0")));
        assert!(!r.first_arrival(Some(&format!("ev-{}", WINDOW + 9))));
    }
}
