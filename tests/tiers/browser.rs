//! Tier `browser`: the web console in a real browser (chromium), against the real CLI on the scripted model.
//!
//! One test binary per tier, so the crate is linked once for all of them; each
//! file stays a module named as it was (`cargo test --test browser FILE::`).

#[path = "../support/mod.rs"]
mod support;

#[path = "../console.rs"]
mod console;
#[path = "../console_chat.rs"]
mod console_chat;
#[path = "../console_customizations.rs"]
mod console_customizations;
#[path = "../console_sdk.rs"]
mod console_sdk;
#[path = "../console_tls.rs"]
mod console_tls;
