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
pub mod ahp_customizations;
pub mod auth;
pub mod backend;
pub mod channels;
pub mod cmd;
pub mod extension;
pub mod files;
pub mod host;
pub mod net;
pub mod protocol;
