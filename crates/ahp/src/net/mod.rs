//! The socket side: the listener ([`server`]) with its checks of who is let
//! in ([`gate`]), the
//! first request read whole ([`head`]), the web console's pages
//! ([`console`]), who gets a connection at the limits ([`admission`]), and
//! one connection's reader and writer ([`connection`]); TLS and its
//! certificate reloads ([`tls`]) under one byte stream ([`transport`]); the
//! console's tickets asked for by `POST /ticket` ([`ticket_page`]).
pub(crate) mod admission;
pub(crate) mod connection;
pub(crate) mod console;
pub(crate) mod gate;
pub(crate) mod head;
pub mod server;
pub(crate) mod ticket_page;
pub mod tls;
pub mod transport;
