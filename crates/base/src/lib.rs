//! The bottom of ahp-copilot-bridge: the operator's config ([`config`]) and
//! the system prompt's section catalogue ([`sections`]), which every other
//! layer reads. JSON-RPC framing, the prompt policy, the state store and the
//! telemetry are crates of their own (`crates/jsonrpc`, `crates/policy`,
//! `crates/store`, `crates/telemetry`). No AHP crate and no other crate of
//! the workspace is a dependency here, so the compiler keeps that rule.

pub mod config;
pub mod sections;
