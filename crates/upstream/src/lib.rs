//! The bridge as a client of the runtime's own AHP host (`copilot
//! --ahp-host`): what that host announces about authenticating
//! ([`meta`]), the sealed token it wants ([`seal`]), and the errors that
//! never carry a credential ([`error`]). AHP types only; nothing of the
//! bridge's north side or of the runtime's JSON-RPC.

pub mod calls;
pub mod error;
pub mod link;
pub mod meta;
pub mod seal;
mod transport;

pub use error::UpstreamError;
