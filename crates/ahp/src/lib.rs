//! North side: the AHP host that clients connect to. Speaks only AHP; the
//! agent behind it is a [`backend::Backend`].
//!
//! - [`net`]: the listener and each connection (frames in, queue out);
//! - [`cmd`]: each request, parsed and answered, one file per group;
//! - [`host`]: the state, each part owned by one type, and the action path;
//! - [`files`]: read-only file requests under the working directories;
//! - [`auth`]: principals, roles, runtime tokens;
//! - [`protocol`]: URIs, error codes, actions, typed params, versions;
//! - [`extension`]: the `systemMessageTransform` extension's wire shapes;
//! - [`channels`]: the host's own `x-` channels (the audit log's tail, the policy, the status);
//! - [`ahp_customizations`]: skills, agents, rules, MCP servers in AHP's shapes;
//! - [`backend`]: the seam to the agent.
mod ahp_customizations;
mod auth;
mod backend;
mod channels;
mod cmd;
mod extension;
mod files;
mod host;
mod net;
mod protocol;
pub use auth::{Authenticated, Credential, Denied, Principal, Principals, Standing};
pub use backend::{ActiveClientView, Backend, ClientPhase, ClientPlugin, Dispatcher};
pub use channels::WrittenRecord;
pub use cmd::{config_schema, session_commands};
pub use extension::{TransformParams, TransformResult, TRANSFORM_METHOD};
pub use host::{
    sessions, BackendConfig, BackendView, Connected, Connections, Creator, CredentialsReloaded,
    Host, HostSettings, NewSession, Reconnected, SessionList, SessionRestoreError, SessionStart,
};
pub use net::{server, tls, transport};
pub use protocol::{errors, uri};

pub use ahp_customizations::{
    children_of, container_enabled, effective, host_container, host_uri, id_of, mcp_server_error,
    plugin, stopped_mcp_server, PluginOrigin,
};
