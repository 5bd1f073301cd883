//! The offline demo's pieces; the scripted model also serves the tests.
pub(crate) mod conversation;
mod fake_http;
pub(crate) mod github;
pub(crate) mod model;
pub(crate) mod scripted_reply;
pub(crate) mod try_policy;

pub use conversation::Conversation;
pub use github::GitHubFake;
pub use model::{ScriptedModel, DEFAULT_REPLY};
pub use scripted_reply::Reply;
pub use try_policy::TryPolicy;
