//! The relay's map between the bridge's sessions and the host's: each
//! north session's upstream session (a `copilot:/<uuid>` the bridge chose,
//! never derived from the client's URI), both default chats, the turn that
//! runs, and the tool calls the policy decided (whose echoes the clients
//! must not see). Small per session: URIs, one turn, a few ids.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::ahp::Dispatcher;

/// One relayed session.
#[derive(Debug, Clone)]
pub(super) struct Relayed {
    pub north: String,
    pub north_chat: String,
    pub up: String,
    /// The host's default chat, once its snapshot said it.
    pub up_chat: Option<String>,
    /// The running turn.
    pub turn: Option<Turn>,
    /// Tool calls the policy decided: the host's later actions about them
    /// pass, but not the pending confirmation.
    pub decided: HashSet<String>,
    /// When the bridge last told the host to cancel a turn of the chat.
    pub cancelled_at: Option<Instant>,
}

/// A turn the host runs for a relayed session.
#[derive(Debug, Clone)]
pub(super) struct Turn {
    /// The id the bridge's clients chose.
    pub id: String,
    /// The id it has upstream: the same, unless the turn was sent again
    /// (the host refuses an id its history has).
    pub up_id: String,
    /// The message, kept to send the turn again when the host refused it
    /// while still cancelling the turn before.
    pub text: String,
    /// Who started it (the subject the permission policy asks about).
    pub by: Option<Dispatcher>,
    /// Whether the host has said anything about it yet.
    pub spoke: bool,
    /// How many times it was sent again.
    pub resent: u32,
    /// When the host last said something about it.
    heard: Instant,
    /// Whether it waits on a client (a confirmation, an answer): that
    /// silence is the client's, not the host's.
    waiting: bool,
}

impl Turn {
    pub(super) fn new(id: String, text: String, by: Option<Dispatcher>) -> Self {
        Self {
            up_id: id.clone(),
            id,
            text,
            by,
            spoke: false,
            resent: 0,
            heard: Instant::now(),
            waiting: false,
        }
    }
}

/// Which of a relayed session's channels an upstream channel is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Side {
    Session,
    Chat,
}

#[derive(Default)]
struct Maps {
    by_north: HashMap<String, Relayed>,
    /// An upstream session or chat URI to its north session.
    by_up: HashMap<String, (String, Side)>,
}

impl Maps {
    /// See [`RelaySessions::add`].
    fn map(&mut self, north: &str, north_chat: &str, up: &str) {
        let turn = self.unmap(north).and_then(|old| old.turn);
        self.by_up
            .insert(up.to_owned(), (north.to_owned(), Side::Session));
        self.by_north.insert(
            north.to_owned(),
            Relayed {
                north: north.to_owned(),
                north_chat: north_chat.to_owned(),
                up: up.to_owned(),
                up_chat: None,
                turn,
                decided: HashSet::new(),
                cancelled_at: None,
            },
        );
    }

    /// Takes `north` out, and its upstream session and chat with it.
    fn unmap(&mut self, north: &str) -> Option<Relayed> {
        let r = self.by_north.remove(north)?;
        self.by_up.remove(&r.up);
        if let Some(c) = &r.up_chat {
            self.by_up.remove(c);
        }
        Some(r)
    }
}

/// The relayed sessions, owned here; every access is one short lock.
#[derive(Default)]
pub(super) struct RelaySessions {
    maps: Mutex<Maps>,
}

impl RelaySessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Maps> {
        self.maps.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Maps `north` (whose default chat is `north_chat`) to upstream `up`.
    /// Mapped already (a session started afresh on the host), it keeps its
    /// running turn, and its old upstream channels lead nowhere.
    pub(super) fn add(&self, north: &str, north_chat: &str, up: &str) {
        self.lock().map(north, north_chat, up);
    }

    /// Maps `north` to upstream `up` instead of `lost`, if `lost` is still
    /// its upstream session (checked and replaced under one lock); whether
    /// it did.
    pub(super) fn replace_up(&self, north: &str, lost: &str, up: &str) -> bool {
        let mut m = self.lock();
        let Some(north_chat) = m
            .by_north
            .get(north)
            .filter(|r| r.up == lost)
            .map(|r| r.north_chat.clone())
        else {
            return false;
        };
        m.map(north, &north_chat, up);
        true
    }

    /// The upstream default chat of `north`, from the host's snapshot.
    pub(super) fn set_up_chat(&self, north: &str, up_chat: &str) {
        let mut m = self.lock();
        let Some(r) = m.by_north.get_mut(north) else {
            return;
        };
        let old = r.up_chat.replace(up_chat.to_owned());
        if let Some(old) = old {
            m.by_up.remove(&old);
        }
        m.by_up
            .insert(up_chat.to_owned(), (north.to_owned(), Side::Chat));
    }

    pub(super) fn remove(&self, north: &str) -> Option<Relayed> {
        self.lock().unmap(north)
    }

    /// The north session an upstream channel belongs to, and which side;
    /// the host was heard on its running turn (an action on the chat).
    pub(super) fn of_up(&self, up: &str) -> Option<(Relayed, Side)> {
        let mut m = self.lock();
        let (north, side) = m.by_up.get(up)?.clone();
        let r = m.by_north.get_mut(&north)?;
        if side == Side::Chat {
            if let Some(t) = &mut r.turn {
                t.heard = Instant::now();
            }
        }
        Some((r.clone(), side))
    }

    /// The host said something of its own about `north`'s turn `id`.
    pub(super) fn spoke(&self, north: &str, id: &str) {
        self.with(north, |r| {
            if let Some(t) = r.turn.as_mut().filter(|t| t.id == id) {
                t.spoke = true;
            }
        });
    }

    /// `north`'s turn `id`, to be sent again: its new upstream id, unless
    /// it is over.
    pub(super) fn resend(&self, north: &str, id: &str) -> Option<String> {
        self.with(north, |r| {
            let t = r.turn.as_mut().filter(|t| t.id == id)?;
            t.resent += 1;
            t.up_id = format!("{id}.resent-{}", t.resent);
            Some(t.up_id.clone())
        })
        .flatten()
    }

    /// Whether `north`'s running turn waits on a client now.
    pub(super) fn set_waiting(&self, north: &str, waiting: bool) {
        self.with(north, |r| {
            if let Some(t) = &mut r.turn {
                t.waiting = waiting;
                t.heard = Instant::now();
            }
        });
    }

    /// Takes every turn the host has said nothing about for `limit` while
    /// it waited on no client.
    pub(super) fn take_silent(&self, limit: Duration) -> Vec<(Relayed, Turn)> {
        let mut m = self.lock();
        m.by_north
            .values_mut()
            .filter(|r| {
                r.turn
                    .as_ref()
                    .is_some_and(|t| !t.waiting && t.heard.elapsed() >= limit)
            })
            .filter_map(|r| {
                let t = r.turn.take()?;
                Some((r.clone(), t))
            })
            .collect()
    }

    /// Every relayed session (to resubscribe after a new link).
    pub(super) fn all(&self) -> Vec<Relayed> {
        self.lock().by_north.values().cloned().collect()
    }

    /// Runs `f` on `north`'s entry, if mapped.
    pub(super) fn with<T>(&self, north: &str, f: impl FnOnce(&mut Relayed) -> T) -> Option<T> {
        self.lock().by_north.get_mut(north).map(f)
    }

    /// Ends every running turn; the sessions whose turn it was, with the
    /// turn (the link to the host was lost under them).
    pub(super) fn take_running(&self) -> Vec<(Relayed, Turn)> {
        let mut m = self.lock();
        m.by_north
            .values_mut()
            .filter_map(|r| {
                let t = r.turn.take()?;
                r.decided.clear();
                Some((r.clone(), t))
            })
            .collect()
    }

    pub(super) fn len(&self) -> usize {
        self.lock().by_north.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_channels_lead_back_and_go_with_the_session() {
        let s = RelaySessions::default();
        s.add("n:/1", "ahp-chat://default/x", "copilot:/u1");
        assert_eq!(s.of_up("copilot:/u1").unwrap().1, Side::Session);
        assert!(s.of_up("ahp-chat:/c1").is_none());
        s.set_up_chat("n:/1", "ahp-chat:/c1");
        let (r, side) = s.of_up("ahp-chat:/c1").unwrap();
        assert_eq!((r.north.as_str(), side), ("n:/1", Side::Chat));
        // A new snapshot names another chat: the old one leads nowhere.
        s.set_up_chat("n:/1", "ahp-chat:/c2");
        assert!(s.of_up("ahp-chat:/c1").is_none());
        s.with("n:/1", |r| {
            r.turn = Some(Turn::new("t1".into(), String::new(), None))
        });
        assert!(
            s.take_silent(Duration::from_secs(60)).is_empty(),
            "just heard"
        );
        s.set_waiting("n:/1", true);
        assert!(
            s.take_silent(Duration::ZERO).is_empty(),
            "waiting on a client"
        );
        s.set_waiting("n:/1", false);
        let running = s.take_running();
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].1.id, "t1");
        assert!(s.take_running().is_empty());
        s.with("n:/1", |r| {
            r.turn = Some(Turn::new("t2".into(), String::new(), None))
        });
        assert_eq!(s.resend("n:/1", "t2").as_deref(), Some("t2.resent-1"));
        assert_eq!(s.resend("n:/1", "t1"), None, "not the running turn");
        let silent = s.take_silent(Duration::ZERO);
        assert_eq!(
            (silent[0].1.id.as_str(), silent[0].1.up_id.as_str()),
            ("t2", "t2.resent-1")
        );
        // Started afresh on the host: the running turn stays, the old
        // upstream channels lead nowhere.
        s.with("n:/1", |r| {
            r.turn = Some(Turn::new("t3".into(), String::new(), None))
        });
        assert!(
            !s.replace_up("n:/1", "copilot:/other", "copilot:/u2"),
            "replaced already"
        );
        assert!(s.of_up("copilot:/u1").is_some());
        assert!(s.replace_up("n:/1", "copilot:/u1", "copilot:/u2"));
        assert!(s.of_up("copilot:/u1").is_none() && s.of_up("ahp-chat:/c2").is_none());
        assert_eq!(s.of_up("copilot:/u2").unwrap().0.north, "n:/1");
        assert_eq!(
            s.with("n:/1", |r| r.turn.clone().map(|t| t.id))
                .flatten()
                .as_deref(),
            Some("t3")
        );
        assert!(s.remove("n:/1").is_some());
        assert!(s.of_up("copilot:/u2").is_none());
        assert_eq!(s.len(), 0);
    }
}
