//! North side: the AHP host that clients connect to.
pub mod connection;
pub mod dispatch;
pub mod host;
pub mod server;
