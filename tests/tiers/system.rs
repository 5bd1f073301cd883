//! Tier `system`: the integration tests that run the real Copilot CLI on the scripted model, the
//! binary itself, the official SDKs, or a Debian package's daemon (rsyslogd,
//! Prometheus, HAProxy).
//!
//! One test binary per tier, so the crate is linked once for all of them; each
//! file stays a module named as it was (`cargo test --test system FILE::`).

#[path = "../support/mod.rs"]
mod support;

#[path = "../audit_syslog.rs"]
mod audit_syslog;
#[path = "../audit_tamper.rs"]
mod audit_tamper;
#[path = "../cli.rs"]
mod cli;
#[path = "../client_plugins.rs"]
mod client_plugins;
#[path = "../customizations.rs"]
mod customizations;
#[path = "../demo_policy.rs"]
mod demo_policy;
#[path = "../deploy.rs"]
mod deploy;
#[path = "../drain.rs"]
mod drain;
#[path = "../e2e_agent_host.rs"]
mod e2e_agent_host;
#[path = "../e2e_agent_host_config.rs"]
mod e2e_agent_host_config;
#[path = "../e2e_agent_host_sections.rs"]
mod e2e_agent_host_sections;
#[path = "../e2e_policy.rs"]
mod e2e_policy;
#[path = "../e2e_pool.rs"]
mod e2e_pool;
#[path = "../e2e_rego.rs"]
mod e2e_rego;
#[path = "../e2e_restart.rs"]
mod e2e_restart;
#[path = "../e2e_runtime.rs"]
mod e2e_runtime;
#[path = "../e2e_session_config.rs"]
mod e2e_session_config;
#[path = "../e2e_transform.rs"]
mod e2e_transform;
#[path = "../e2e_turn_ends.rs"]
mod e2e_turn_ends;
#[path = "../e2e_working_dir.rs"]
mod e2e_working_dir;
#[path = "../exposure.rs"]
mod exposure;
#[path = "../fleet.rs"]
mod fleet;
#[path = "../host_surface.rs"]
mod host_surface;
#[path = "../limits.rs"]
mod limits;
#[path = "../operations.rs"]
mod operations;
#[path = "../policy_cli.rs"]
mod policy_cli;
#[path = "../principals.rs"]
mod principals;
#[path = "../reload.rs"]
mod reload;
#[path = "../runtime_start.rs"]
mod runtime_start;
#[path = "../sdk_apps.rs"]
mod sdk_apps;
#[path = "../tls.rs"]
mod tls;
#[path = "../vscode.rs"]
mod vscode;
