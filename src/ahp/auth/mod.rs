//! Who a connection is and what it may do: principals from tokens
//! ([`principals`]), the role each request and action needs ([`access`]),
//! how much each principal may do ([`limits`]), and the runtime tokens
//! clients hand over with `authenticate` ([`tokens`]).
pub mod access;
pub mod limits;
pub mod principals;
pub mod tokens;

pub use principals::{Authenticated, Credential, Denied, Principal, Principals, Standing};
