//! Why the bridge does not start: each part's own error, kept whole (its
//! words and its cause), for the binary to print with its causes.

use crate::admin::AdminListenError;
use crate::ahp::server::BindError;
use crate::ahp::tls::TlsLoadError;
use crate::ahp::SessionRestoreError;
use crate::audit::AuditError;
use crate::bridge::relay::RelayError;
use crate::bridge::sdk::SdkListenError;
use crate::config::ConfigError;
use crate::store::StoreError;

/// Why `start` did not start the bridge. Each part says in its own
/// words what failed: a variant adds nothing to them.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error(transparent)]
    Relay(#[from] RelayError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Restore(#[from] SessionRestoreError),
    #[error(transparent)]
    Tls(#[from] TlsLoadError),
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error("the AHP listener's address")]
    LocalAddr(#[source] std::io::Error),
    #[error(transparent)]
    Sdk(#[from] SdkListenError),
    #[error(transparent)]
    Admin(#[from] AdminListenError),
}
