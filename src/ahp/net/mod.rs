//! The socket side: the listener with its upgrade checks ([`server`]), who
//! gets a connection at the limits ([`admission`]), and one connection's
//! reader and writer ([`connection`]).
pub mod admission;
pub mod connection;
pub mod server;
