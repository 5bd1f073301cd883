//! The one way a message is queued for a client: a bounded queue drained by
//! the connection's writer. A client whose queue is full is not reading; it is
//! disconnected rather than allowed to grow the host's memory or stall it.

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::clients::ConnId;

#[derive(Clone)]
pub struct Outbound {
    tx: mpsc::Sender<String>,
    /// Drops the connection at once (its writer stops without flushing).
    kill: CancellationToken,
    conn: ConnId,
}

impl Outbound {
    pub fn new(
        capacity: usize,
        kill: CancellationToken,
        conn: ConnId,
    ) -> (Self, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel(capacity);
        (Self { tx, kill, conn }, rx)
    }

    /// Queues one text; false when the client is gone or was just cut off.
    pub fn send(&self, text: String) -> bool {
        match self.tx.try_send(text) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                if !self.kill.is_cancelled() {
                    warn!(
                        conn = self.conn,
                        "client is not reading (outbound queue full); disconnecting it"
                    );
                    self.kill.cancel();
                }
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }
}
