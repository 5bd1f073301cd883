//! South side: the Copilot CLI in server mode, over stdio or TCP. Speaks only
//! the runtime's wire (typed in [`wire`]); knows nothing of AHP.
pub mod codec;
pub mod connection;
pub mod customizations;
pub mod process;
pub mod wire;
