//! The bridge as a client of the runtime's own AHP host (`copilot
//! --ahp-host`): what that host announces about authenticating
//! ([`meta`]), the sealed token it wants ([`seal`]), and the errors that
//! never carry a credential ([`upstream_error`]). AHP types only; nothing of the
//! bridge's north side or of the runtime's JSON-RPC.

pub mod host_commands;
pub mod link;
pub mod meta;
pub mod seal;
pub mod upstream_error;
mod ws_transport;

pub use upstream_error::UpstreamError;
