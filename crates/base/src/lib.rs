//! The bottom layer of ahp-copilot-bridge: what every other layer may use and
//! which uses none of them. The operator's config ([`config`]), JSON-RPC
//! framing ([`jsonrpc`]), the prompt policy, built-in rules and Rego
//! ([`policy`]), the durable state store ([`store`]), the system prompt's
//! section catalogue ([`sections`]) and the counters, logs and traces
//! ([`telemetry`]). No AHP crate and no other crate of the workspace is a
//! dependency here, so the compiler keeps that rule.

pub mod config;
pub mod jsonrpc;
pub mod policy;
pub mod sections;
pub mod store;
pub mod telemetry;
