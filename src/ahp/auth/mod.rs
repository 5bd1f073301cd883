//! Who a connection is and what it may do: principals from tokens
//! ([`principals`]), the role each request and action needs ([`access`]),
//! and the runtime tokens clients hand over with `authenticate` ([`tokens`]).
pub mod access;
pub mod principals;
pub mod tokens;

pub use principals::{Denied, Principal, Principals};
