//! Shipping every record to the operator's syslog pipeline: RFC 5424
//! messages with RFC 6587 octet-counting framing, over TCP or a unix stream
//! socket (rsyslog: imtcp/imptcp, or imptcp with `path=`). One background task
//! sends from a queue bounded in count and bytes and reconnects with backoff.
//! A record that finds the queue full is not queued, but never dropped
//! silently: it is counted, logged at warn, and a `shipping_gap` message with
//! the count and the sequence numbers goes out before the next record.

use crate::audit_error::AuditError;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;
use tracing::{debug, warn};

use super::log::Ship;
use ahp_bridge_base::config::{SyslogConfig, SyslogTarget};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// The example private enterprise number of RFC 5612, for our SD-ID.
const SD_ID: &str = "ahp@32473";

/// A record waiting to be shipped: its line as the log wrote it (so the
/// message is the file's bytes, not a second serialization), and what the
/// message's header says of it.
struct Queued {
    kind: String,
    time: String,
    line: String,
}

#[derive(Default)]
struct ShipQueue {
    items: VecDeque<Queued>,
    bytes: usize,
    /// Records not queued since the last gap message went out.
    dropped: u64,
    dropped_seqs: Option<(u64, u64)>,
}

struct ShipperQueue {
    queue: Mutex<ShipQueue>,
    wake: Notify,
    idle: Notify,
    max_items: usize,
    max_bytes: usize,
    sent: AtomicU64,
    dropped_total: AtomicU64,
}

pub struct Shipper {
    shared: Arc<ShipperQueue>,
}

/// Formats messages for one configured destination.
struct Format {
    facility: u8,
    host: String,
    app: String,
    pid: u32,
}

impl Format {
    /// One RFC 5424 message: `<PRI>1 TIME HOST APP PROCID MSGID SD MSG`,
    /// MSG being the record's line.
    fn message(&self, kind: &str, time: &str, sd: &str, line: &str) -> String {
        // recovered and shipping_gap are warnings; the rest is information.
        let severity = if matches!(kind, "recovered" | "shipping_gap") {
            4
        } else {
            6
        };
        // RFC 5424 allows at most 6 fractional digits; records carry 9.
        let time = time
            .parse::<jiff::Timestamp>()
            .unwrap_or_else(|_| jiff::Timestamp::now())
            .strftime("%Y-%m-%dT%H:%M:%S%.6fZ");
        format!(
            "<{}>1 {time} {} {} {} {kind} {sd} {line}",
            u32::from(self.facility) * 8 + severity,
            self.host,
            self.app,
            self.pid
        )
    }
}

impl Shipper {
    /// Validated config in; starts the sender on the current tokio runtime.
    /// `instance` (`[server] instance`) is each message's HOSTNAME, so a
    /// collector tells the bridges of a fleet apart.
    pub fn start(cfg: &SyslogConfig, instance: &str) -> Result<Arc<Self>, AuditError> {
        let target = cfg.target()?;
        let format = Format {
            facility: cfg.facility_code()?,
            host: instance.to_owned(),
            app: cfg.app_name.clone(),
            pid: std::process::id(),
        };
        let shared = Arc::new(ShipperQueue {
            queue: Mutex::new(ShipQueue::default()),
            wake: Notify::new(),
            idle: Notify::new(),
            max_items: cfg.queue,
            max_bytes: cfg.queue_bytes,
            sent: AtomicU64::new(0),
            dropped_total: AtomicU64::new(0),
        });
        tokio::spawn(run(shared.clone(), target, format));
        Ok(Arc::new(Self { shared }))
    }

    /// Records sent, and records that found the queue full.
    pub fn stats(&self) -> (u64, u64) {
        (
            self.shared.sent.load(Ordering::Relaxed),
            self.shared.dropped_total.load(Ordering::Relaxed),
        )
    }

    /// Waits until everything queued is sent, or the deadline; true if sent.
    pub async fn flush(&self, deadline: Duration) -> bool {
        tokio::time::timeout(deadline, async {
            loop {
                let idle = self.shared.idle.notified();
                {
                    let q = self.shared.lock();
                    if q.items.is_empty() && q.dropped == 0 {
                        return;
                    }
                }
                idle.await;
            }
        })
        .await
        .is_ok()
    }
}

impl ShipperQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, ShipQueue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Ship for Shipper {
    fn ship(&self, record: &Value, line: &str) {
        let size = line.len();
        let mut q = self.shared.lock();
        if q.items.len() >= self.shared.max_items || q.bytes + size > self.shared.max_bytes {
            q.dropped += 1;
            self.shared.dropped_total.fetch_add(1, Ordering::Relaxed);
            ahp_bridge_telemetry::metrics().audit_shipping_gap(1);
            let seq = record["seq"].as_u64().unwrap_or_default();
            q.dropped_seqs = Some(q.dropped_seqs.map_or((seq, seq), |(a, _)| (a, seq)));
            if q.dropped == 1 {
                warn!(seq, queued = q.items.len(), "syslog queue full: records are not shipped until it drains (counted in a shipping_gap message)");
            }
            return;
        }
        q.bytes += size;
        q.items.push_back(Queued {
            kind: record["kind"].as_str().unwrap_or("transform").to_owned(),
            time: record["time"].as_str().unwrap_or_default().to_owned(),
            line: line.to_owned(),
        });
        drop(q);
        self.shared.wake.notify_one();
    }
}

trait Stream: AsyncWrite + Unpin + Send {}
impl<T: AsyncWrite + Unpin + Send> Stream for T {}

async fn connect(target: &SyslogTarget) -> std::io::Result<Box<dyn Stream>> {
    let timeout = |e| std::io::Error::new(std::io::ErrorKind::TimedOut, e);
    Ok(match target {
        SyslogTarget::Tcp(addr) => Box::new(
            tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr))
                .await
                .map_err(|_| timeout("connect timed out"))??,
        ),
        SyslogTarget::Unix(path) => Box::new(
            tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::UnixStream::connect(path))
                .await
                .map_err(|_| timeout("connect timed out"))??,
        ),
    })
}

/// The next message to send, and whether it is the gap report.
fn next(shared: &ShipperQueue, format: &Format) -> Option<(String, bool)> {
    let q = shared.lock();
    if q.dropped > 0 {
        let (first, last) = q.dropped_seqs.unwrap_or_default();
        let gap = json!({"kind": "shipping_gap", "time": super::record::now_rfc3339(),
            "instance": format.host, "dropped": q.dropped, "firstSeq": first, "lastSeq": last});
        let sd = format!(
            "[{SD_ID} dropped=\"{}\" firstSeq=\"{first}\" lastSeq=\"{last}\"]",
            q.dropped
        );
        let time = gap["time"].as_str().unwrap_or_default();
        return Some((
            format.message("shipping_gap", time, &sd, &gap.to_string()),
            true,
        ));
    }
    q.items
        .front()
        .map(|r| (format.message(&r.kind, &r.time, "-", &r.line), false))
}

async fn run(shared: Arc<ShipperQueue>, target: SyslogTarget, format: Format) {
    let mut backoff = BACKOFF_MIN;
    let mut conn: Option<Box<dyn Stream>> = None;
    loop {
        let wake = shared.wake.notified();
        let Some((msg, is_gap)) = next(&shared, &format) else {
            shared.idle.notify_waiters();
            // Nobody else holds the queue: when the shipper is gone, stop.
            if Arc::strong_count(&shared) == 1 {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), wake).await;
            continue;
        };
        if conn.is_none() {
            match connect(&target).await {
                Ok(c) => {
                    debug!(?target, "syslog connected");
                    backoff = BACKOFF_MIN;
                    conn = Some(c);
                }
                Err(e) => {
                    warn!(?target, retry_in = ?backoff, "syslog connect failed: {e}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        let frame = format!("{} {msg}", msg.len());
        let sent = tokio::time::timeout(WRITE_TIMEOUT, async {
            c.write_all(frame.as_bytes()).await?;
            c.flush().await
        })
        .await;
        match sent {
            Ok(Ok(())) => {
                let mut q = shared.lock();
                if is_gap {
                    q.dropped = 0;
                    q.dropped_seqs = None;
                } else if let Some(r) = q.items.pop_front() {
                    q.bytes -= r.line.len();
                    shared.sent.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(Err(e)) => {
                warn!(?target, "syslog send failed, reconnecting: {e}");
                conn = None;
            }
            Err(_) => {
                warn!(?target, "syslog send timed out, reconnecting");
                conn = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_rfc5424_with_the_record_as_msg() {
        let f = Format {
            facility: 16,
            host: "h".into(),
            app: "bridge".into(),
            pid: 7,
        };
        let line = r#"{"kind":"checkpoint","seq":3,"hash":"h"}"#;
        assert_eq!(
            f.message("checkpoint", "2026-01-01T00:00:00.123456789Z", "-", line),
            format!("<134>1 2026-01-01T00:00:00.123456Z h bridge 7 checkpoint - {line}")
        );
        assert!(f
            .message("recovered", "t", "-", "{}")
            .starts_with("<132>1 "));
    }

    #[tokio::test]
    async fn a_full_queue_is_counted_and_reported_before_the_next_record() {
        let shared = Arc::new(ShipperQueue {
            queue: Mutex::new(ShipQueue::default()),
            wake: Notify::new(),
            idle: Notify::new(),
            max_items: 2,
            max_bytes: 1 << 20,
            sent: AtomicU64::new(0),
            dropped_total: AtomicU64::new(0),
        });
        let s = Shipper {
            shared: shared.clone(),
        };
        for seq in 1..=5 {
            let r = json!({"seq": seq});
            s.ship(&r, &r.to_string());
        }
        assert_eq!(s.stats(), (0, 3));
        let f = Format {
            facility: 1,
            host: "h".into(),
            app: "a".into(),
            pid: 1,
        };
        let (msg, gap) = next(&shared, &f).unwrap();
        assert!(gap);
        assert!(
            msg.contains("dropped=\"3\" firstSeq=\"3\" lastSeq=\"5\""),
            "{msg}"
        );
        assert!(msg.contains("\"kind\":\"shipping_gap\""), "{msg}");
    }
}
