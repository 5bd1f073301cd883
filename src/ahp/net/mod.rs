//! The socket side: the listener with its upgrade checks and connection
//! limits ([`server`]), and one connection's reader and writer
//! ([`connection`]).
pub mod connection;
pub mod server;
