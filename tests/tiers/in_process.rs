//! Tier `in_process`: the integration tests that need nothing outside the test process: no Copilot CLI,
//! browser, Node app or Debian package (the fake runtime is in-process; mcp_fixture
//! runs python3, which the README requires). `scripts/test.sh --quick` runs this tier
//! and the unit tests.
//!
//! One test binary per tier, so the crate is linked once for all of them; each
//! file stays a module named as it was (`cargo test --test in_process FILE::`).

#[path = "../support/mod.rs"]
mod support;

#[path = "../audit_write_failure.rs"]
mod audit_write_failure;
#[path = "../channels.rs"]
mod channels;
#[path = "../config_file.rs"]
mod config_file;
#[path = "../conformance.rs"]
mod conformance;
#[path = "../documents.rs"]
mod documents;
#[path = "../fake_runtime.rs"]
mod fake_runtime;
#[path = "../host.rs"]
mod host;
#[path = "../host_bad_input.rs"]
mod host_bad_input;
#[path = "../host_files.rs"]
mod host_files;
#[path = "../host_paging.rs"]
mod host_paging;
#[path = "../host_turns.rs"]
mod host_turns;
#[path = "../jwt.rs"]
mod jwt;
#[path = "../layout.rs"]
mod layout;
#[path = "../mcp_fixture.rs"]
mod mcp_fixture;
#[path = "../runtime_wire.rs"]
mod runtime_wire;
