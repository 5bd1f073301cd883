//! What a turn ended by a graceful shutdown is told. Apart from the stop's
//! owner (`shutdown.rs`, which holds the SDK gate), so that the SDK gate
//! can use it without a circle.

/// What a turn ended by a shutdown tells the client (and the runtime).
pub const SHUTTING_DOWN: &str = "the host is shutting down";
