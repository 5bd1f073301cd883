//! The offline demo's pieces; the scripted model also serves the tests.
pub mod conversation;
pub mod github;
mod http;
pub mod model;
pub mod policy;
pub mod reply;
