//! The socket side: the listener with its upgrade checks ([`server`]), the
//! first request read whole ([`head`]), the web console's pages
//! ([`console`]), who gets a connection at the limits ([`admission`]), and
//! one connection's reader and writer ([`connection`]).
pub mod admission;
pub mod connection;
pub mod console;
pub mod head;
pub mod server;
