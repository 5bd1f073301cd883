//! Test helpers used by the tests of more than one crate (a helper used by
//! one crate's tests stays with them: tests/support for the binary's).

mod oidc_issuer;

pub use oidc_issuer::{
    ed25519, es256, fixture, forged, jwks_json, now, rs256, sign, sign_as, write_jwks, TokenSigner,
    ISSUER,
};
