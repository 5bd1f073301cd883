//! The join of ahp-copilot-bridge, an AHP host in front of the GitHub Copilot
//! agent runtime: every owner the binary (`src/main.rs`) starts.
//!
//! Data flow: clients speak AHP over WebSocket to the north side ([`ahp`]);
//! the south side ([`runtime`]) speaks Content-Length JSON-RPC to the Copilot
//! CLI; the bridge ties one AHP session to one runtime session; [`transform`]
//! routes the runtime's `systemMessage.transform` calls to opted-in clients;
//! [`audit`] writes the hash-chained record of every such call;
//! [`customize`] reads and vets customization packages (plugins, skills,
//! agents, rules, MCP servers) and writes them out for the runtime.

mod admin;
mod app;
mod bridge;
mod demo;
mod policy_cli;
mod reload;
mod run;
mod start_error;

// What the binary starts and the tests drive; the rest is the join's own.
pub use admin::readyz;
pub use app::{start, Agent, Running};
pub use bridge::HostClients;
pub use demo::{Conversation, GitHubFake, Reply, ScriptedModel, TryPolicy, DEFAULT_REPLY};
pub use policy_cli::{eval_policy, test_policies, TestArgs};
pub use run::{demo_origins, offline_runtime, serve, serve_demo};
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
