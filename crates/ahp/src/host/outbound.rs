//! The one way a message is queued for a client: a queue drained by the
//! connection's writer, bounded in messages and in bytes. A client whose queue
//! is full is not reading; it is disconnected rather than allowed to grow the
//! host's memory or stall it.
//!
//! A streaming burst must not count against a client that keeps reading:
//! a `chat/delta` queued right behind another delta of the same response
//! part (same channel, turn and part, same origin) is merged into it, so the
//! queue holds one growing text instead of thousands of tiny messages. The
//! merged action carries the later `serverSeq`; the replay buffer keeps them
//! apart. The bounds then apply to what the client really cannot take.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// What identifies a streamed text part, for merging its deltas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeltaKey {
    pub channel: String,
    pub turn_id: String,
    pub part_id: String,
}

/// One message waiting for the writer.
enum Item {
    Text(String),
    /// An `action` notification carrying a `chat/delta`, kept as a value so
    /// that the next delta of the same part can be appended to it.
    Delta {
        key: DeltaKey,
        notification: Value,
        bytes: usize,
    },
}

impl Item {
    fn bytes(&self) -> usize {
        match self {
            Item::Text(t) => t.len(),
            Item::Delta { bytes, .. } => *bytes,
        }
    }

    fn into_text(self) -> String {
        match self {
            Item::Text(t) => t,
            Item::Delta { notification, .. } => notification.to_string(),
        }
    }
}

struct Queue {
    items: VecDeque<Item>,
    bytes: usize,
}

struct OutboundShared {
    queue: Mutex<Queue>,
    ready: Notify,
    /// Woken when the queue falls back under half its bounds.
    drained: Notify,
    max_messages: usize,
    max_bytes: usize,
    /// Drops the connection at once (its writer stops without flushing).
    kill: CancellationToken,
    conn: u64,
}

/// The sending side: cheap to clone, never waits.
#[derive(Clone)]
pub struct Outbound(Arc<OutboundShared>);

/// The writer's side.
pub struct OutboundQueue(Arc<OutboundShared>);

impl OutboundShared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn over_half(&self, q: &Queue) -> bool {
        q.items.len() * 2 > self.max_messages || q.bytes * 2 > self.max_bytes
    }
}

impl Outbound {
    pub fn new(
        max_messages: usize,
        max_bytes: usize,
        kill: CancellationToken,
        conn: u64,
    ) -> (Self, OutboundQueue) {
        let shared = Arc::new(OutboundShared {
            queue: Mutex::new(Queue {
                items: VecDeque::new(),
                bytes: 0,
            }),
            ready: Notify::new(),
            drained: Notify::new(),
            max_messages,
            max_bytes,
            kill,
            conn,
        });
        (Self(shared.clone()), OutboundQueue(shared))
    }

    /// Queues one text; false when the client is gone or was just cut off.
    pub fn send(&self, text: String) -> bool {
        self.push(Item::Text(text))
    }

    /// Queues an `action` notification. `delta`: the action is a
    /// `chat/delta` of that part with that content, which may be merged into
    /// a delta queued right before it.
    pub(crate) fn send_action(
        &self,
        notification: &Value,
        text: &str,
        delta: Option<&(DeltaKey, &str)>,
    ) -> bool {
        let Some((key, content)) = delta else {
            return self.send(text.to_owned());
        };
        if self.0.kill.is_cancelled() {
            return false;
        }
        {
            let mut q = self.0.lock();
            if let Some(Item::Delta {
                key: last_key,
                notification: last,
                bytes,
            }) = q.items.back_mut()
            {
                if last_key == key
                    && last["params"].get("origin") == notification["params"].get("origin")
                {
                    let merged = last["params"]["action"]["content"]
                        .as_str()
                        .map(|c| format!("{c}{content}"));
                    if let Some(merged) = merged {
                        last["params"]["action"]["content"] = Value::from(merged);
                        last["params"]["serverSeq"] = notification["params"]["serverSeq"].clone();
                        *bytes += content.len();
                        q.bytes += content.len();
                        let over = q.bytes > self.0.max_bytes;
                        drop(q);
                        if over {
                            self.cut_off("bytes");
                            return false;
                        }
                        return true;
                    }
                }
            }
        }
        self.push(Item::Delta {
            key: key.clone(),
            notification: notification.clone(),
            bytes: text.len(),
        })
    }

    fn push(&self, item: Item) -> bool {
        if self.0.kill.is_cancelled() {
            return false;
        }
        let len = item.bytes();
        let mut q = self.0.lock();
        if q.bytes + len > self.0.max_bytes {
            drop(q);
            self.cut_off("bytes");
            return false;
        }
        if q.items.len() >= self.0.max_messages {
            drop(q);
            self.cut_off("messages");
            return false;
        }
        q.bytes += len;
        q.items.push_back(item);
        drop(q);
        self.0.ready.notify_one();
        true
    }

    /// Whether the queue is over half of either bound: the connection's
    /// reader then stops reading, so a client that writes faster than it
    /// reads is held back by TCP instead of being cut off.
    pub fn under_pressure(&self) -> bool {
        let q = self.0.lock();
        self.0.over_half(&q)
    }

    /// Returns once the queue is under half its bounds again.
    pub async fn drained(&self) {
        loop {
            // Registered before looking, so a drain in between is not missed.
            let drained = self.0.drained.notified();
            if !self.under_pressure() {
                return;
            }
            drained.await;
        }
    }

    fn cut_off(&self, bound: &str) {
        if !self.0.kill.is_cancelled() {
            warn!(
                conn = self.0.conn,
                bound, "client is not reading (outbound queue full); disconnecting it"
            );
            self.0.kill.cancel();
        }
    }
}

impl OutboundQueue {
    /// The next message to write, waiting for one.
    pub async fn recv(&mut self) -> String {
        let shared = self.0.clone();
        loop {
            // Registered before looking, so a push in between is not missed.
            let ready = shared.ready.notified();
            if let Some(text) = self.try_recv() {
                return text;
            }
            ready.await;
        }
    }

    /// The next message, if one is queued.
    pub fn try_recv(&mut self) -> Option<String> {
        let mut q = self.0.lock();
        let item = q.items.pop_front()?;
        q.bytes -= item.bytes();
        let relieved = !self.0.over_half(&q);
        drop(q);
        if relieved {
            self.0.drained.notify_waiters();
        }
        Some(item.into_text())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn delta(seq: u64, part: &str, content: &str) -> (Value, String, DeltaKey) {
        let n = json!({"jsonrpc": "2.0", "method": "action", "params": {"channel": "ahp-chat:/s", "serverSeq": seq,
            "action": {"type": "chat/delta", "turnId": "t", "partId": part, "content": content}}});
        let key = DeltaKey {
            channel: "ahp-chat:/s".into(),
            turn_id: "t".into(),
            part_id: part.into(),
        };
        let text = n.to_string();
        (n, text, key)
    }

    #[test]
    fn a_queue_full_of_bytes_cuts_the_client_off() {
        let kill = CancellationToken::new();
        let (out, mut q) = Outbound::new(100, 10, kill.clone(), 1);
        assert!(out.send("12345".into()));
        assert!(out.send("12345".into()));
        assert_eq!(q.try_recv().as_deref(), Some("12345"));
        assert!(
            out.send("abcde".into()),
            "room again after the writer took one"
        );
        assert!(!kill.is_cancelled());
        assert!(!out.send("x".into()));
        assert!(kill.is_cancelled(), "a full queue disconnects");
    }

    #[test]
    fn consecutive_deltas_of_one_part_are_merged_and_others_are_not() {
        let kill = CancellationToken::new();
        let (out, mut q) = Outbound::new(3, 1 << 20, kill.clone(), 1);
        for i in 0..5000u64 {
            let (n, t, k) = delta(i + 1, "p1", "x");
            assert!(out.send_action(&n, &t, Some(&(k.clone(), "x"))));
        }
        let (n, t, k) = delta(5001, "p2", "y");
        assert!(out.send_action(&n, &t, Some(&(k.clone(), "y"))));
        assert!(!kill.is_cancelled(), "5001 deltas fit in a 3-message queue");
        let first: Value = serde_json::from_str(&q.try_recv().unwrap()).unwrap();
        assert_eq!(first["params"]["action"]["content"], "x".repeat(5000));
        assert_eq!(
            first["params"]["serverSeq"], 5000,
            "the merged delta carries the later seq"
        );
        let second: Value = serde_json::from_str(&q.try_recv().unwrap()).unwrap();
        assert_eq!(second["params"]["action"]["partId"], "p2");
        assert!(q.try_recv().is_none());
        // A delta behind something else is not merged across it.
        let (n, t, k) = delta(5002, "p1", "a");
        out.send_action(&n, &t, Some(&(k.clone(), "a")));
        out.send("other".into());
        let (n, t, k) = delta(5003, "p1", "b");
        out.send_action(&n, &t, Some(&(k.clone(), "b")));
        assert_eq!(q.0.lock().items.len(), 3);
    }

    #[tokio::test]
    async fn the_writer_wakes_for_a_message_sent_while_it_waits() {
        let (out, mut q) = Outbound::new(10, 1000, CancellationToken::new(), 1);
        let writer = tokio::spawn(async move { q.recv().await });
        tokio::task::yield_now().await;
        out.send("hello".into());
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), writer)
            .await
            .expect("woken")
            .unwrap();
        assert_eq!(got, "hello");
    }
}
