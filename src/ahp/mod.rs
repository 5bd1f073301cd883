//! North side: the AHP host that clients connect to. Speaks only AHP; the
//! agent behind it is a [`backend::Backend`].
pub mod access;
pub mod auth;
pub mod authenticate;
pub mod backend;
pub mod clients;
pub mod completions;
pub mod connection;
pub mod cursor;
pub mod dispatch;
pub mod durable;
pub mod errors;
pub mod extension;
pub mod files;
pub mod handshake;
pub mod host;
pub mod listing;
pub mod methods;
pub mod outbound;
pub mod pending;
pub mod resources;
pub mod server;
pub mod session_config;
pub mod sessions;
pub mod state;
pub mod surface;
pub mod uri;
