//! The offline demo's pieces; the scripted model also serves the tests.
pub mod conversation;
mod fake_http;
pub mod github;
pub mod model;
pub mod scripted_reply;
pub mod try_policy;
