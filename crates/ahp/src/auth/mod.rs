//! Who a connection is and what it may do: principals from tokens and
//! client certificates ([`principals`]), the console's one-use tickets
//! ([`tickets`]), the role each request and action needs ([`access`]),
//! how much each principal may do ([`rate_limiter`]), and the runtime tokens
//! clients hand over with `authenticate` ([`tokens`]).
pub(crate) mod access;
mod jwks;
mod jwks_fetch;
pub(crate) mod jwt;
mod principal;
pub(crate) mod principals;
pub(crate) mod rate_limiter;
pub(crate) mod tickets;
pub(crate) mod tokens;

pub use principal::{Denied, Principal};
pub use principals::{Authenticated, Credential, Principals, Standing};
