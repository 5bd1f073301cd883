//! What AHP says, pure and stateless: channel and file URIs ([`uri`]), the
//! error codes ([`errors`]), actions and which a client may dispatch
//! ([`actions`]), the typed params of every request ([`params`]) and
//! version negotiation ([`versions`]).
pub(crate) mod actions;
pub mod errors;
pub(crate) mod params;
pub mod uri;
pub(crate) mod versions;
