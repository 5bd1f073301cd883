//! `[server]`: the AHP listener, its limits and deadlines.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

use super::{bad, duration, ConfigError, RateLimits, TlsConfig, Visibility};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to listen on. Loopback unless a token is set.
    pub listen: SocketAddr,
    /// This bridge's name in a fleet: in every audit record (`instance`),
    /// in `build_info{instance}` and as the syslog HOSTNAME. Unset: the
    /// host name ([`ServerConfig::instance`]).
    pub instance: Option<String>,
    /// Bearer token required in the WebSocket upgrade; env AHP_BRIDGE_TOKEN also sets it.
    pub token: Option<String>,
    /// `wss://` and `https://` on `listen`, with this certificate.
    pub tls: Option<TlsConfig>,
    /// Serve plain `ws://` off loopback (and a plain admin listener): only
    /// behind a TLS terminator that is the one way in.
    pub allow_plaintext_remote: bool,
    /// Origins a browser may connect from (`scheme://host:*` for any port); any other Origin gets 403.
    pub allowed_origins: Vec<String>,
    pub max_frame_bytes: usize,
    pub max_json_depth: usize,
    /// Actions kept for `reconnect` replay.
    pub replay_buffer: usize,
    /// Messages queued for one client before it is dropped as too slow.
    pub outbound_queue: usize,
    /// Subscriptions one connection may hold.
    pub max_subscriptions: usize,
    #[serde(deserialize_with = "duration")]
    pub client_grace: Duration,
    /// Who sees a session: only the principal that created it ("owner"), or every principal ("all").
    pub session_visibility: Visibility,
    /// Deadline for the WebSocket upgrade and for `initialize` after it.
    #[serde(deserialize_with = "duration")]
    pub handshake_timeout: Duration,
    /// Connections held at once; unset: derived from the process's file
    /// descriptor limit (see [`ServerConfig::connection_limits`]).
    pub max_connections: Option<usize>,
    /// Connections held at once from one peer address; unset: as many as
    /// `max_connections`.
    pub max_connections_per_ip: Option<usize>,
    /// Bytes of actions kept for `reconnect` replay (besides `replay_buffer`, a count).
    pub replay_buffer_bytes: usize,
    /// Bytes queued for one client before it is dropped as too slow (besides `outbound_queue`).
    pub outbound_queue_bytes: usize,
    /// A client action larger than this (serialized) is refused.
    pub max_action_bytes: usize,
    /// Completed turns a chat keeps in memory (and in its snapshots); older
    /// ones are in the state store, paged back by `fetchTurns`.
    pub turn_window: usize,
    /// The same bound in bytes of the turns' JSON (the newest turn is kept
    /// whatever its size). Also the most one `fetchTurns` page carries.
    pub turn_window_bytes: usize,
    /// Working directories one session may hold: a client's
    /// `session/workingDirectorySet` that would add one more is refused,
    /// and so is a `createSession` listing more. The reducer appends every
    /// new directory and never prunes.
    pub max_working_directories: usize,
    /// Messages one chat may hold queued (`chat/pendingMessageSet` of kind
    /// `queued` with a new id; each at most `max_action_bytes`): one more is
    /// refused. They wait there while a turn runs.
    pub max_queued_messages: usize,
    /// Reload what SIGHUP reloads when the config file changes (written in
    /// place, renamed over, or a Kubernetes ConfigMap's `..data` swap).
    pub reload_on_change: bool,
    /// On SIGTERM, how long open connections go on (a turn that fits in it
    /// completes) while `/readyz` says 503 and new upgrades get 503, before
    /// the shutdown proper. A load balancer's health checks see it first.
    #[serde(deserialize_with = "duration")]
    pub drain: Duration,
    /// How long a graceful shutdown (SIGTERM, SIGINT) may take before the process exits anyway.
    #[serde(deserialize_with = "duration")]
    pub shutdown_timeout: Duration,
    /// The largest file `resourceRead` returns; a larger one is refused (never truncated).
    pub max_resource_bytes: usize,
    /// Per principal, unless its `[[principals]]` entry says otherwise: the
    /// sessions it may own at once...
    pub max_sessions: u32,
    /// ...the turns it may start a minute...
    pub turns_per_minute: u32,
    /// ...and the actions it may dispatch a second, with a burst above that.
    pub actions_per_second: u32,
    pub actions_burst: u32,
}

impl ServerConfig {
    /// This bridge's name in a fleet: `[server] instance`, or the host name
    /// (a pod's name under Kubernetes), or `bridge` when neither reads.
    pub fn instance(&self) -> String {
        self.instance.clone().unwrap_or_else(host_name)
    }
}

/// The kernel's host name, when it is a valid instance name.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| is_instance_name(h))
        .unwrap_or_else(|| "bridge".into())
}

/// What may name an instance: it goes into syslog's HOSTNAME and a metric's
/// label as it is.
fn is_instance_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8421)),
            instance: None,
            token: None,
            tls: None,
            allow_plaintext_remote: false,
            allowed_origins: Vec::new(),
            max_frame_bytes: 4 * 1024 * 1024,
            max_json_depth: 128,
            replay_buffer: 4096,
            outbound_queue: 1024,
            max_subscriptions: 256,
            client_grace: Duration::from_secs(30),
            session_visibility: Visibility::Owner,
            handshake_timeout: Duration::from_secs(10),
            max_connections: None,
            max_connections_per_ip: None,
            replay_buffer_bytes: 16 * 1024 * 1024,
            outbound_queue_bytes: 16 * 1024 * 1024,
            max_action_bytes: 256 * 1024,
            turn_window: 64,
            turn_window_bytes: 1024 * 1024,
            max_working_directories: 64,
            max_queued_messages: 16,
            drain: Duration::from_secs(20),
            reload_on_change: true,
            shutdown_timeout: Duration::from_secs(10),
            max_resource_bytes: 1024 * 1024,
            max_sessions: RateLimits::default().max_sessions,
            turns_per_minute: RateLimits::default().turns_per_minute,
            actions_per_second: RateLimits::default().actions_per_second,
            actions_burst: RateLimits::default().actions_burst,
        }
    }
}

impl ServerConfig {
    /// `[server]`, and that a non-loopback listener has credentials
    /// (`others`: principals or JWT issuers are configured).
    pub(super) fn validate(&self, others: bool) -> Result<(), ConfigError> {
        let s = self;
        if let Some(i) = &s.instance {
            if !is_instance_name(i) {
                return Err(bad(
                    "server.instance",
                    format!("{i:?} is not an instance name: 1 to 64 characters of letters, digits, '.', '-', '_'"),
                ));
            }
        }
        let credentials = s.token.is_some() || others;
        if !credentials && !s.listen.ip().is_loopback() {
            return Err(bad(
                "server.listen",
                format!(
                    "{} is not a loopback address and no credential is set; add [[principals]] or [[jwt]], set [server] token (or env AHP_BRIDGE_TOKEN), or listen on 127.0.0.1",
                    s.listen
                ),
            ));
        }
        if matches!(&s.token, Some(t) if t.len() < 16) {
            return Err(bad("server.token", "must be at least 16 characters"));
        }
        for o in &s.allowed_origins {
            let is_origin = o.split_once("://").is_some_and(|(scheme, rest)| {
                !scheme.is_empty() && !rest.is_empty() && !rest.contains('/')
            });
            if !is_origin {
                return Err(bad(
                    "server.allowed_origins",
                    format!("{o:?} is not an origin: scheme://host, scheme://host:port, or scheme://host:* for any port"),
                ));
            }
        }
        s.validate_limits()
    }
}

/// File descriptors kept for everything but client connections: the
/// listener, the runtimes' pipes or sockets, the audit log and its shipper,
/// the state store, file reads, the admin listener, and tokio's own.
const RESERVED_FDS: usize = 64;
/// Per runtime process: its stdin, stdout, stderr (and a spare).
const FDS_PER_RUNTIME: usize = 4;

impl ServerConfig {
    /// How many connections are held at once, in all and from one address:
    /// as configured, or what the file descriptor limit leaves once the
    /// bridge's own files and its `pool_size` runtimes are counted, so the
    /// defaults never run the process out of descriptors.
    pub fn connection_limits(&self, pool_size: usize) -> (usize, usize) {
        let derived = || {
            let reserve = RESERVED_FDS + FDS_PER_RUNTIME * pool_size;
            fd_limit().saturating_sub(reserve).max(16)
        };
        let total = self.max_connections.unwrap_or_else(derived);
        (total, self.max_connections_per_ip.unwrap_or(total))
    }
}

/// The soft `RLIMIT_NOFILE` of this process.
fn fd_limit() -> usize {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } == 0;
    if !ok || l.rlim_cur == libc::RLIM_INFINITY {
        return 65536;
    }
    usize::try_from(l.rlim_cur).unwrap_or(usize::MAX)
}

impl ServerConfig {
    /// Every bound and deadline is one that can work.
    fn validate_limits(&self) -> Result<(), ConfigError> {
        for (key, d) in [
            ("server.shutdown_timeout", self.shutdown_timeout),
            ("server.handshake_timeout", self.handshake_timeout),
        ] {
            if d.is_zero() {
                return Err(bad(key, "must be more than 0s"));
            }
        }
        for (key, v, min) in [
            ("server.max_frame_bytes", self.max_frame_bytes, 1024),
            ("server.max_json_depth", self.max_json_depth, 1),
            ("server.replay_buffer", self.replay_buffer, 1),
            ("server.outbound_queue", self.outbound_queue, 16),
            (
                "server.max_connections",
                self.max_connections.unwrap_or(1),
                1,
            ),
            (
                "server.max_connections_per_ip",
                self.max_connections_per_ip.unwrap_or(1),
                1,
            ),
            (
                "server.replay_buffer_bytes",
                self.replay_buffer_bytes,
                64 * 1024,
            ),
            (
                "server.outbound_queue_bytes",
                self.outbound_queue_bytes,
                64 * 1024,
            ),
            ("server.max_action_bytes", self.max_action_bytes, 1024),
            ("server.turn_window", self.turn_window, 1),
            (
                "server.turn_window_bytes",
                self.turn_window_bytes,
                64 * 1024,
            ),
            (
                "server.max_working_directories",
                self.max_working_directories,
                1,
            ),
            ("server.max_queued_messages", self.max_queued_messages, 1),
            ("server.max_resource_bytes", self.max_resource_bytes, 1),
        ] {
            if v < min {
                return Err(bad(key, format!("must be at least {min}")));
            }
        }
        // A file goes out in one message, escaped (JSON text, up to 6 bytes a
        // byte) or base64: it must fit a client's outbound queue with room to spare.
        if self.max_resource_bytes > self.outbound_queue_bytes / 8 {
            return Err(bad(
                "server.max_resource_bytes",
                format!(
                    "must be at most server.outbound_queue_bytes / 8 ({}), so a file fits a client's outbound queue",
                    self.outbound_queue_bytes / 8
                ),
            ));
        }
        Ok(())
    }
}
