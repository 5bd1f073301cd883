//! The transform core, pure: each runtime `systemMessage.transform` request
//! routed to the owning clients and back ([`router`]), by the decisions of
//! [`plan`], under the policy of [`ahp_bridge_policy`]; which sections a runtime
//! session registers ([`registrations`]).
//!
//! It speaks neither AHP nor the runtime's wire: sections go in and come out
//! as typed text ([`Sections`]); clients are reached through
//! [`TransformClients`] and the audit log through [`AuditPort`], both
//! provided by the bridge (and by in-process doubles in the tests).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use ahp_bridge_audit::TransformRecord;
use ahp_bridge_policy::OptIn;

mod counted;
mod plan;
mod registrations;
mod router;
pub use registrations::{registrations, Registration};
pub use router::{RecordOptions, Router};

/// Section id -> its text.
pub type Sections = BTreeMap<String, String>;

/// An owner's answer, as read off the wire by whoever asked it: the
/// sections it returned and the size of the answer in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientAnswer {
    pub sections: Sections,
    pub bytes: usize,
}

/// Why an owner's answer is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskError {
    /// No answer by the deadline it was given.
    Timeout,
    /// Not connected, or gone before it answered.
    Disconnected,
    /// It answered with an error.
    Failed,
    /// It answered something that is not a transform result (`bytes` long).
    Malformed { bytes: usize },
}

pub type AskFuture = Pin<Box<dyn Future<Output = Result<ClientAnswer, AskError>> + Send>>;

/// The clients a transform is routed to: the bridge implements this over
/// the AHP host, a test over an in-process peer.
pub trait TransformClients: Send + Sync {
    /// The session's active clients with their opt-ins, in active-client order.
    fn opt_ins(&self, session: &str) -> Vec<OptIn>;
    /// Asks `client_id` to rewrite `sections` of `session`, waiting at most
    /// `timeout`; fails at once when the client is not connected.
    fn ask(
        &self,
        client_id: &str,
        session: &str,
        sections: &Sections,
        timeout: Duration,
    ) -> AskFuture;
}

/// A record the audit log did not take, with why (the log's own error, as
/// text: the core only logs it and applies `on_failure`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AppendError(pub String);

impl From<ahp_bridge_audit::AuditError> for AppendError {
    /// The log's error as text: each names its file and the reason.
    fn from(e: ahp_bridge_audit::AuditError) -> Self {
        Self(e.to_string())
    }
}

pub type AppendFuture = Pin<Box<dyn Future<Output = Result<(), AppendError>> + Send>>;

/// Where the router's records go: the audit log, as the bridge writes it.
pub trait AuditPort: Send + Sync {
    /// Appends one record; done when it is written (audit before answer).
    fn append(&self, record: TransformRecord) -> AppendFuture;
}
