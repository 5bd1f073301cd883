//! The join of ahp-copilot-bridge, an AHP host in front of the GitHub Copilot
//! agent runtime: every owner the binary (`src/main.rs`) starts.
//!
//! Data flow: clients speak AHP over WebSocket to the north side ([`ahp`]);
//! the south side ([`runtime`]) speaks Content-Length JSON-RPC to the Copilot
//! CLI; [`bridge`] ties one AHP session to one runtime session; [`transform`]
//! routes the runtime's `systemMessage.transform` calls to opted-in clients;
//! [`audit`] writes the hash-chained record of every such call;
//! [`customize`] reads and vets customization packages (plugins, skills,
//! agents, rules, MCP servers) and writes them out for the runtime.

pub mod admin;
pub mod app;
pub mod bridge;
pub mod demo;
pub mod policy_cli;
pub mod reload;
pub mod run;
mod start_error;

pub use start_error::StartError;

// The layers' crates, under the module names the join and the tests use.
pub use ahp_bridge_audit as audit;
pub use ahp_bridge_base::{config, sections};
pub use ahp_bridge_customize as customize;
pub use ahp_bridge_host as ahp;
pub use ahp_bridge_jsonrpc as jsonrpc;
pub use ahp_bridge_policy as policy;
pub use ahp_bridge_runtime as runtime;
pub use ahp_bridge_store as store;
pub use ahp_bridge_telemetry as telemetry;
pub use ahp_bridge_transform as transform;
pub use ahp_bridge_upstream as upstream;
