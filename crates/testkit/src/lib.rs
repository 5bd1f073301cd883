//! Test helpers used by the tests of more than one crate (a helper used by
//! one crate's tests stays with them: tests/support for the binary's).

pub mod oidc_issuer;
