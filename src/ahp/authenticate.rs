//! `authenticate`: a client hands the host a token for a protected resource
//! the host advertised. Without a bring-your-own-key provider the runtime
//! signs in to GitHub, so the host advertises GitHub's API as a protected
//! resource (`AgentInfo.protectedResources`) and keeps the token a principal
//! gives it, in memory only, never logged, for the agent to use on that
//! principal's sessions.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{json, Value};
use tracing::info;

use super::auth::Principal;
use super::host::Host;
use crate::config::Config;
use crate::jsonrpc::{ErrorCode, RpcError};

/// The resource the runtime's GitHub sign-in needs.
pub const GITHUB_RESOURCE: &str = "https://api.github.com";

/// Tokens by principal name. Not `Debug`: a token must never reach a log.
#[derive(Default)]
pub struct Tokens(Mutex<HashMap<String, String>>);

impl Tokens {
    fn set(&self, principal: &str, token: &str) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.insert(principal.to_owned(), token.to_owned());
    }

    fn get(&self, principal: &str) -> Option<String> {
        let g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.get(principal).cloned()
    }
}

/// What the root state advertises: GitHub when the runtime signs in there
/// (no `[runtime.provider]`), nothing with a provider of the operator's.
pub fn protected_resources(cfg: &Config) -> Option<Value> {
    cfg.runtime.provider.is_none().then(|| {
        json!([{
            "resource": GITHUB_RESOURCE,
            "resource_name": "GitHub Copilot",
            "authorization_servers": ["https://github.com/login/oauth"],
            "scopes_supported": ["read:user", "user:email"],
            "required": true,
        }])
    })
}

impl Host {
    pub(super) fn authenticate(
        &self,
        principal: &Principal,
        params: &Value,
    ) -> Result<Value, RpcError> {
        let invalid = |m: String| RpcError::new(ErrorCode::InvalidParams, m);
        let resource = params
            .get("resource")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("field `resource` must be a string".into()))?;
        let token = params
            .get("token")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| invalid("field `token` must be a non-empty string".into()))?;
        if protected_resources(&self.cfg).is_none() || resource != GITHUB_RESOURCE {
            let offered = if protected_resources(&self.cfg).is_some() {
                format!("{GITHUB_RESOURCE:?}")
            } else {
                "none (the runtime uses the operator's model provider)".into()
            };
            return Err(invalid(format!(
                "resource {resource:?} is not one this host advertised; it advertises {offered}"
            )));
        }
        self.tokens.set(&principal.name, token);
        info!(principal = %principal.name, resource, "client authenticated for the runtime (token kept in memory)");
        if let Some(b) = self.backend() {
            b.authenticated(&principal.name);
        }
        Ok(json!({}))
    }

    /// The GitHub token the owner of `session` gave, if any.
    pub fn github_token_for(&self, session: &str) -> Option<String> {
        let owner = self.lock().sessions.get(session)?.owner.clone();
        self.tokens.get(&owner)
    }

    /// The sessions `principal` created.
    pub fn sessions_owned_by(&self, principal: &str) -> Vec<String> {
        let st = self.lock();
        st.sessions
            .iter()
            .filter(|(_, e)| e.owner == principal)
            .map(|(u, _)| u.clone())
            .collect()
    }
}
