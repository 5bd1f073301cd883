//! The one way a message is queued for a client: a queue drained by the
//! connection's writer, bounded in messages and in bytes. A client whose queue
//! is full is not reading; it is disconnected rather than allowed to grow the
//! host's memory or stall it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::clients::ConnId;

#[derive(Clone)]
pub struct Outbound {
    tx: mpsc::Sender<String>,
    /// Bytes queued and not yet taken by the writer.
    queued: Arc<AtomicUsize>,
    max_bytes: usize,
    /// Drops the connection at once (its writer stops without flushing).
    kill: CancellationToken,
    conn: ConnId,
}

impl Outbound {
    pub fn new(
        capacity: usize,
        max_bytes: usize,
        kill: CancellationToken,
        conn: ConnId,
    ) -> (Self, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel(capacity);
        let out = Self {
            tx,
            queued: Arc::new(AtomicUsize::new(0)),
            max_bytes,
            kill,
            conn,
        };
        (out, rx)
    }

    /// Queues one text; false when the client is gone or was just cut off.
    pub fn send(&self, text: String) -> bool {
        let len = text.len();
        let before = self.queued.fetch_add(len, Ordering::AcqRel);
        if before + len > self.max_bytes {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            self.cut_off("bytes");
            return false;
        }
        match self.tx.try_send(text) {
            Ok(()) => true,
            Err(e) => {
                self.queued.fetch_sub(len, Ordering::AcqRel);
                if matches!(e, mpsc::error::TrySendError::Full(_)) {
                    self.cut_off("messages");
                }
                false
            }
        }
    }

    /// The writer took `text` off the queue.
    pub fn taken(&self, text: &str) {
        self.queued.fetch_sub(text.len(), Ordering::AcqRel);
    }

    fn cut_off(&self, bound: &str) {
        if !self.kill.is_cancelled() {
            warn!(
                conn = self.conn,
                bound, "client is not reading (outbound queue full); disconnecting it"
            );
            self.kill.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_full_of_bytes_cuts_the_client_off() {
        let kill = CancellationToken::new();
        let (out, mut rx) = Outbound::new(100, 10, kill.clone(), 1);
        assert!(out.send("12345".into()));
        assert!(out.send("12345".into()));
        let first = rx.try_recv().unwrap();
        out.taken(&first);
        assert!(
            out.send("abcde".into()),
            "room again after the writer took one"
        );
        assert!(!kill.is_cancelled());
        assert!(!out.send("x".into()));
        assert!(kill.is_cancelled(), "a full queue disconnects");
    }
}
