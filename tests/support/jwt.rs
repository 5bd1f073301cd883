//! Tokens an issuer signs in the test (the issuer's keys are
//! `ahp_bridge_testkit::oidc_issuer`'s, shared with the host crate's unit tests),
//! and the config that trusts it.

use std::path::Path;

// Each tier compiles all of support; not every tier signs tokens.
#[allow(unused_imports)]
pub(crate) use ahp_bridge_testkit::{
    es256, fixture, forged, now, rs256, sign, write_jwks, TokenSigner, ISSUER,
};
use serde_json::{json, Value};

/// `sub` for ten minutes, in `groups`.
pub(crate) fn claims(sub: &str, groups: &[&str]) -> Value {
    json!({"iss": ISSUER, "aud": "ahp", "sub": sub, "exp": now() + 600, "groups": groups})
}

/// `[[jwt]] corp` reading the key set at `jwks`: `copilot-users` participate
/// and transform, `copilot-admins` administer, everyone observes.
pub(crate) fn jwt_toml(jwks: &Path) -> String {
    format!(
        "[[jwt]]\nname = \"corp\"\nissuer = \"{ISSUER}\"\naudiences = [\"ahp\"]\njwks = {:?}\n\
         roles_claim = \"groups\"\ndefault_roles = [\"observe\"]\n[jwt.roles]\n\
         \"copilot-admins\" = [\"admin\"]\n\"copilot-users\" = [\"participate\", \"transform\"]\n",
        jwks.display().to_string()
    )
}
