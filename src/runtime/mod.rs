//! South side: the Copilot CLI in server mode, over stdio or TCP.
pub mod client;
pub mod codec;
pub mod events;
pub mod process;
