//! The part of a config that a reload puts in force. A component handed a
//! [`Reloadable`] can read these keys and no others; one handed `&Config`
//! (or settings built from it) reads the rest once, at start, and a restart
//! applies a change to them. So which settings a reload reaches is the
//! type's business, not a comment's.

use std::collections::BTreeMap;

use super::{
    Config, CustomizationsConfig, JwtConfig, PolicyConfig, PrincipalConfig, RateLimits, Visibility,
};

/// The reloadable keys of a config: `[[principals]]`, `[server] token` and
/// `session_visibility` (the principals' default), `[[jwt]]`, the rate
/// limits (`[server]` defaults and each principal's own), `[policy]` and
/// `[customizations]`. The same view serves at start and at each reload.
/// One entry is read at start even so: the one `[sdk] principal` names,
/// with the rest of `[sdk]` (docs/sdk.md, "Limits").
#[derive(Clone, Copy)]
pub struct Reloadable<'a>(pub(super) &'a Config);

impl<'a> Reloadable<'a> {
    pub fn principals(self) -> &'a [PrincipalConfig] {
        &self.0.principals
    }

    /// `[server] token`: one principal with every role.
    pub fn token(self) -> Option<&'a str> {
        self.0.server.token.as_deref()
    }

    /// `[server] session_visibility`: a principal's unless it sets its own.
    pub fn session_visibility(self) -> Visibility {
        self.0.server.session_visibility
    }

    pub fn jwt(self) -> &'a [JwtConfig] {
        &self.0.jwt
    }

    /// Each named principal's limits (see [`Config::all_rate_limits`]).
    pub fn all_rate_limits(self) -> Vec<(String, RateLimits)> {
        self.0.all_rate_limits()
    }

    /// The limits of a client no entry names.
    pub fn default_rate_limits(self) -> RateLimits {
        self.0.default_rate_limits()
    }

    pub fn policy(self) -> &'a PolicyConfig {
        &self.0.policy
    }

    /// Who may transform which section: the policy's principals (see
    /// [`Config::transform_principals`]).
    pub fn transform_principals(self) -> BTreeMap<String, Option<Vec<String>>> {
        self.0.transform_principals()
    }

    pub fn customizations(self) -> &'a CustomizationsConfig {
        &self.0.customizations
    }
}
