//! Tokens clients gave with `authenticate`, by principal: kept in memory
//! only, never logged, for the agent to use on that principal's sessions.

use std::collections::HashMap;
use std::sync::Mutex;

use ahp_types::state::ProtectedResourceMetadata;

/// The resource the runtime's GitHub sign-in needs.
pub(crate) const GITHUB_RESOURCE: &str = "https://api.github.com";

/// What the root state advertises: GitHub when the runtime signs in there
/// (no `[runtime.provider]`), nothing with a provider of the operator's.
pub(crate) fn protected_resources(github_sign_in: bool) -> Option<Vec<ProtectedResourceMetadata>> {
    github_sign_in.then(|| {
        vec![ProtectedResourceMetadata {
            resource: GITHUB_RESOURCE.into(),
            resource_name: Some("GitHub Copilot".into()),
            authorization_servers: Some(vec!["https://github.com/login/oauth".into()]),
            jwks_uri: None,
            scopes_supported: Some(vec!["read:user".into(), "user:email".into()]),
            bearer_methods_supported: None,
            resource_signing_alg_values_supported: None,
            resource_documentation: None,
            resource_policy_uri: None,
            resource_tos_uri: None,
            required: Some(true),
        }]
    })
}

/// Tokens by principal name. Not `Debug`: a token must never reach a log.
#[derive(Default)]
pub struct Tokens(Mutex<HashMap<String, String>>);

impl Tokens {
    pub fn set(&self, principal: &str, token: &str) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.insert(principal.to_owned(), token.to_owned());
    }

    pub fn get(&self, principal: &str) -> Option<String> {
        let g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.get(principal).cloned()
    }

    /// Forgets the tokens of principals not in `names` (a reload removed them).
    pub fn retain(&self, names: &[String]) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.retain(|p, _| names.contains(p));
    }
}
