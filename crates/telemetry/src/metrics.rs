//! The bridge's metrics, one process-wide set (like the log): what an
//! operator scrapes at `/metrics`. Every label value is bounded: an enum's
//! name, a section id of the catalogue (anything else is `other`), a
//! runtime's slot, a rule of the operator's policy; never a client string.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

use super::process_metrics::ProcessCollector;
use ahp_bridge_base::sections::SECTION_CATALOGUE;

type One = [(&'static str, &'static str); 1];
type Two = [(&'static str, &'static str); 2];
type OwnedTwo = [(&'static str, String); 2];
type Slot = [(&'static str, String); 1];
type BuildLabels = [(&'static str, String); 3];

/// How a turn ended, as `ahp_bridge_turns_total{outcome}` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    Completed,
    Error,
    Cancelled,
}

impl TurnOutcome {
    fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Error => "error",
            Self::Cancelled => "cancelled",
        }
    }
}

/// Why a connection was closed before it could initialize, as
/// `ahp_bridge_connections_refused_total{reason}` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `[server] max_connections` or `max_connections_per_ip`, nothing to close.
    Limit,
    /// Closed, not yet initialized, to make room for a newer connection.
    MadeRoom,
    /// No valid token.
    Unauthorized,
    /// An `Origin` not allowed.
    Origin,
    /// No upgrade or `initialize` within `[server] handshake_timeout`.
    HandshakeTimeout,
    /// Not a WebSocket upgrade this host accepts.
    BadUpgrade,
    /// A TLS handshake that failed: plain text to a TLS port, an old
    /// version, no common cipher, a client certificate not verified.
    Tls,
    /// An upgrade while the bridge drains (after SIGTERM): answered 503.
    Draining,
}

impl Refusal {
    fn as_str(self) -> &'static str {
        match self {
            Self::Limit => "limit",
            Self::MadeRoom => "made_room",
            Self::Unauthorized => "unauthorized",
            Self::Origin => "origin",
            Self::HandshakeTimeout => "handshake_timeout",
            Self::BadUpgrade => "bad_upgrade",
            Self::Tls => "tls",
            Self::Draining => "draining",
        }
    }
}

/// The outcomes of `ahp_bridge_transform_requests_total`.
pub(crate) const TRANSFORM_OUTCOMES: [&str; 9] = [
    "transformed",
    "unchanged",
    "refused",
    "passthrough",
    "timeout",
    "error",
    "malformed",
    "oversize",
    "disconnected",
];

/// The kinds of `ahp_bridge_runtime_protocol_mismatches_total`.
pub(crate) const MISMATCH_KINDS: [&str; 6] = [
    "unknown_event",
    "unknown_request",
    "missing_field",
    "wrong_type",
    "unknown_method",
    "repeated_event",
];

/// Every metric of the bridge, registered once.
pub struct Metrics {
    registry: Registry,
    build_info: Family<BuildLabels, Gauge>,
    sessions: Gauge,
    clients_connected: Gauge,
    connections_refused: Family<One, Counter>,
    turns: Family<One, Counter>,
    turn_duration: Histogram,
    first_token: Histogram,
    transform_requests: Family<One, Counter>,
    transform_sections: Family<Two, Counter>,
    transform_client: Histogram,
    policy_refusals: Family<OwnedTwo, Counter>,
    policy_decisions: Family<Two, Counter>,
    audit_records: Family<One, Counter>,
    audit_write_failures: Counter,
    audit_shipping_gap: Counter,
    tls_reload_failures: Counter,
    config_reload_failures: Counter,
    runtime_mismatches: Family<One, Counter>,
    runtime_up: Family<Slot, Gauge>,
    runtime_restarts: Family<Slot, Counter>,
    rate_limited: Family<One, Counter>,
    trace_spans_dropped: Counter,
    // Resolved once: they count every frame.
    ws_messages_in: Counter,
    ws_messages_out: Counter,
    ws_bytes_in: Counter,
    ws_bytes_out: Counter,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// Seconds, from 1 ms to about 9 minutes.
fn latency_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

/// Seconds, from 0.5 ms to about 4 s: a client's answer to a transform.
fn client_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 14))
}

impl Metrics {
    fn new() -> Self {
        let mut root = Registry::default();
        root.register_collector(Box::new(ProcessCollector));
        let r = root.sub_registry_with_prefix("ahp_bridge");
        let messages = Family::<One, Counter>::default();
        let bytes = Family::<One, Counter>::default();
        r.register(
            "ws_messages",
            "WebSocket messages, by direction",
            messages.clone(),
        );
        r.register(
            "ws_bytes",
            "WebSocket message bytes, by direction",
            bytes.clone(),
        );
        // Counters share their value with their clones: resolved once here.
        let by = |f: &Family<One, Counter>, d| f.get_or_create(&[("direction", d)]).clone();
        let m = Self {
            build_info: Family::default(),
            sessions: Gauge::default(),
            clients_connected: Gauge::default(),
            connections_refused: Family::default(),
            turns: Family::default(),
            turn_duration: latency_buckets(),
            first_token: latency_buckets(),
            transform_requests: Family::default(),
            transform_sections: Family::default(),
            transform_client: client_buckets(),
            policy_refusals: Family::default(),
            policy_decisions: Family::default(),
            audit_records: Family::default(),
            audit_write_failures: Counter::default(),
            audit_shipping_gap: Counter::default(),
            tls_reload_failures: Counter::default(),
            config_reload_failures: Counter::default(),
            runtime_mismatches: Family::default(),
            runtime_up: Family::default(),
            runtime_restarts: Family::default(),
            rate_limited: Family::default(),
            trace_spans_dropped: Counter::default(),
            ws_messages_in: by(&messages, "in"),
            ws_messages_out: by(&messages, "out"),
            ws_bytes_in: by(&bytes, "in"),
            ws_bytes_out: by(&bytes, "out"),
            registry: Registry::default(),
        };
        m.register(r);
        m.zeroes();
        Self {
            registry: root,
            ..m
        }
    }

    fn register(&self, r: &mut Registry) {
        r.register(
            "build_info",
            "The bridge's version and the AHP version it implements",
            self.build_info.clone(),
        );
        r.register("sessions", "Sessions the host holds", self.sessions.clone());
        r.register(
            "clients_connected",
            "Initialized client connections",
            self.clients_connected.clone(),
        );
        r.register(
            "connections_refused",
            "Connections closed before they could initialize, by reason",
            self.connections_refused.clone(),
        );
        r.register("turns", "Turns ended, by outcome", self.turns.clone());
        r.register_with_unit(
            "turn_duration",
            "From a turn's start to its end",
            Unit::Seconds,
            self.turn_duration.clone(),
        );
        r.register_with_unit(
            "time_to_first_token",
            "From a turn's start to the first text of its answer",
            Unit::Seconds,
            self.first_token.clone(),
        );
        r.register(
            "transform_requests",
            "systemMessage.transform requests of the runtime, by outcome",
            self.transform_requests.clone(),
        );
        r.register(
            "transform_sections",
            "Sections of transform requests, by section and decision",
            self.transform_sections.clone(),
        );
        r.register_with_unit(
            "transform_client",
            "From a systemMessageTransform request sent to a client to its answer",
            Unit::Seconds,
            self.transform_client.clone(),
        );
        r.register(
            "policy_refusals",
            "Rewrites refused by the policy, by section and rule",
            self.policy_refusals.clone(),
        );
        r.register(
            "policy_decisions",
            "Decisions of the operator's Rego policy, by point and outcome",
            self.policy_decisions.clone(),
        );
        r.register(
            "audit_records",
            "Audit records written, by kind",
            self.audit_records.clone(),
        );
        r.register(
            "audit_write_failures",
            "Audit records that could not be written",
            self.audit_write_failures.clone(),
        );
        r.register(
            "tls_reload_failures",
            "Certificate reloads refused (a file unreadable, or a key that is not the certificate's); the old pair serves on",
            self.tls_reload_failures.clone(),
        );
        r.register(
            "config_reload_failures",
            "Config reloads refused (SIGHUP or a change of the file): the file does not load; the running config stays",
            self.config_reload_failures.clone(),
        );
        r.register(
            "runtime_protocol_mismatches",
            "Runtime messages not as its schema says (an unknown event or request, a required field missing, a wrong type), by kind; none is passed on",
            self.runtime_mismatches.clone(),
        );
        r.register(
            "audit_shipping_gap",
            "Audit records the syslog shipper had to skip (its queue was full)",
            self.audit_shipping_gap.clone(),
        );
        r.register(
            "runtime_up",
            "Whether each runtime answered its last health ping (1) or not (0)",
            self.runtime_up.clone(),
        );
        r.register(
            "runtime_restarts",
            "Runtimes replaced after they exited or stopped answering",
            self.runtime_restarts.clone(),
        );
        r.register(
            "rate_limited",
            "Requests and actions refused by a per-principal rate limit, by limit",
            self.rate_limited.clone(),
        );
        r.register(
            "trace_spans_dropped",
            "Spans not exported because the export queue was full",
            self.trace_spans_dropped.clone(),
        );
    }

    /// Every value of a fixed label at 0 from the start, so a rate over
    /// it is defined before the first event.
    fn zeroes(&self) {
        use Refusal::*;
        for r in [
            Limit,
            MadeRoom,
            Unauthorized,
            Origin,
            HandshakeTimeout,
            BadUpgrade,
            Tls,
            Draining,
        ] {
            let _ = self
                .connections_refused
                .get_or_create(&[("reason", r.as_str())]);
        }
        for o in [
            TurnOutcome::Completed,
            TurnOutcome::Error,
            TurnOutcome::Cancelled,
        ] {
            let _ = self.turns.get_or_create(&[("outcome", o.as_str())]);
        }
        for o in TRANSFORM_OUTCOMES {
            let _ = self.transform_requests.get_or_create(&[("outcome", o)]);
        }
        for k in MISMATCH_KINDS {
            let _ = self.runtime_mismatches.get_or_create(&[("kind", k)]);
        }
        for k in [
            "transform",
            "customization",
            "policy",
            "checkpoint",
            "recovered",
            "rotation",
            "sdk_session",
            "decision",
        ] {
            let _ = self.audit_records.get_or_create(&[("kind", k)]);
        }
        for l in ["max_sessions", "turns_per_minute", "actions_per_second"] {
            let _ = self.rate_limited.get_or_create(&[("limit", l)]);
        }
    }

    /// The pool's runtimes, down until started.
    pub fn runtimes(&self, count: usize) {
        for slot in 0..count {
            let _ = self
                .runtime_up
                .get_or_create(&[("runtime", slot.to_string())]);
            let _ = self
                .runtime_restarts
                .get_or_create(&[("runtime", slot.to_string())]);
        }
    }

    /// Runtime `slot`: whether it is up, and how many times it was replaced.
    pub fn runtime_state(&self, slot: usize) -> (bool, u64) {
        let label = [("runtime", slot.to_string())];
        let up = self.runtime_up.get_or_create(&label).get() > 0;
        (up, self.runtime_restarts.get_or_create(&label).get())
    }

    /// The exposition: OpenMetrics text, or the Prometheus text format 0.0.4.
    pub fn encode(&self, openmetrics: bool) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            return String::new();
        }
        if openmetrics {
            out
        } else {
            super::exposition::to_text_004(&out)
        }
    }

    /// `build_info{version,protocol,instance}` = 1; `protocol` the AHP
    /// version the host implements (the north side knows it), `instance`
    /// this bridge's name in a fleet (validated: a host-name's characters).
    pub fn set_build_info(&self, protocol: &'static str, instance: &str) {
        self.build_info
            .get_or_create(&[
                ("version", env!("CARGO_PKG_VERSION").to_owned()),
                ("protocol", protocol.to_owned()),
                ("instance", instance.to_owned()),
            ])
            .set(1);
    }

    pub fn set_sessions(&self, n: usize) {
        self.sessions.set(n as i64);
    }

    pub fn set_clients_connected(&self, n: usize) {
        self.clients_connected.set(n as i64);
    }

    pub fn connection_refused(&self, why: Refusal) {
        self.connections_refused
            .get_or_create(&[("reason", why.as_str())])
            .inc();
    }

    pub fn turn_ended(&self, outcome: TurnOutcome, took: Duration) {
        self.turns
            .get_or_create(&[("outcome", outcome.as_str())])
            .inc();
        self.turn_duration.observe(took.as_secs_f64());
    }

    pub fn first_token(&self, after: Duration) {
        self.first_token.observe(after.as_secs_f64());
    }

    /// One transform request, `outcome` a fixed word (see docs/operations.md).
    pub fn transform_request(&self, outcome: &'static str) {
        self.transform_requests
            .get_or_create(&[("outcome", outcome)])
            .inc();
    }

    /// One section of a transform request and what became of it.
    pub fn transform_section(&self, section: &str, decision: &'static str) {
        let section = catalogued(section);
        self.transform_sections
            .get_or_create(&[("section", section), ("decision", decision)])
            .inc();
    }

    pub fn transform_client_answered(&self, after: Duration) {
        self.transform_client.observe(after.as_secs_f64());
    }

    /// A rewrite of `section` refused by `rule` (as the config spells it).
    pub fn policy_refusal(&self, section: &str, rule: String) {
        let section = catalogued(section).to_owned();
        self.policy_refusals
            .get_or_create(&[("section", section), ("rule", rule)])
            .inc();
    }

    /// One decision of the operator's Rego policy: `point` and `outcome`
    /// are fixed words (the five points, the five outcomes).
    pub fn policy_decision(&self, point: &'static str, outcome: &'static str) {
        self.policy_decisions
            .get_or_create(&[("point", point), ("outcome", outcome)])
            .inc();
    }

    pub fn audit_record(&self, kind: &'static str) {
        self.audit_records.get_or_create(&[("kind", kind)]).inc();
    }

    pub fn audit_write_failed(&self) {
        self.audit_write_failures.inc();
    }

    pub fn tls_reload_failed(&self) {
        self.tls_reload_failures.inc();
    }

    pub fn config_reload_failed(&self) {
        self.config_reload_failures.inc();
    }

    /// A runtime message not as its schema says; `kind` is a fixed word.
    pub fn runtime_mismatch(&self, kind: &'static str) {
        self.runtime_mismatches
            .get_or_create(&[("kind", kind)])
            .inc();
    }

    pub fn audit_shipping_gap(&self, skipped: u64) {
        self.audit_shipping_gap.inc_by(skipped);
    }

    pub fn runtime_up(&self, slot: usize, up: bool) {
        self.runtime_up
            .get_or_create(&[("runtime", slot.to_string())])
            .set(i64::from(up));
    }

    pub fn runtime_restarted(&self, slot: usize) {
        self.runtime_restarts
            .get_or_create(&[("runtime", slot.to_string())])
            .inc();
    }

    /// A request or action refused by the per-principal limit `limit`.
    pub fn rate_limited(&self, limit: &'static str) {
        self.rate_limited.get_or_create(&[("limit", limit)]).inc();
    }

    pub fn trace_spans_dropped(&self, n: u64) {
        self.trace_spans_dropped.inc_by(n);
    }

    pub fn ws_received(&self, bytes: usize) {
        self.ws_messages_in.inc();
        self.ws_bytes_in.inc_by(bytes as u64);
    }

    pub fn ws_sent(&self, bytes: usize) {
        self.ws_messages_out.inc();
        self.ws_bytes_out.inc_by(bytes as u64);
    }
}

/// A section id of the catalogue, or `other`: label values stay bounded
/// whatever a runtime sends.
fn catalogued(section: &str) -> &'static str {
    SECTION_CATALOGUE
        .iter()
        .find(|s| s.id == section)
        .map_or("other", |s| s.id)
}
