//! Who a connection is and what it may do: principals from tokens and
//! client certificates ([`principals`]), the console's one-use tickets
//! ([`tickets`]), the role each request and action needs ([`access`]),
//! how much each principal may do ([`rate_limiter`]), and the runtime tokens
//! clients hand over with `authenticate` ([`tokens`]).
pub mod access;
mod jwks;
mod jwks_fetch;
pub mod jwt;
mod principal;
pub mod principals;
pub mod rate_limiter;
pub mod tickets;
pub mod tokens;

pub use principal::{Denied, Principal};
pub use principals::{Authenticated, Credential, Principals, Standing};
