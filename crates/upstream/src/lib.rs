//! The bridge as a client of the runtime's own AHP host (`copilot
//! --ahp-host`): what that host announces about authenticating
//! ([`meta`]), the sealed token it wants ([`seal`]), and the errors that
//! never carry a credential ([`upstream_error`]). AHP types only; nothing of the
//! bridge's north side or of the runtime's JSON-RPC.

mod host_commands;

pub use host_commands::{
    config_schema, create_session, default_chat, dispatch, dispose_session, session_state,
    subscribe,
};
mod link;
mod meta;
mod seal;
mod upstream_error;
mod ws_transport;
pub use link::{link, Target};
pub use meta::CopilotMeta;
pub use seal::{sealed_token, SealBinding};

pub use upstream_error::UpstreamError;
