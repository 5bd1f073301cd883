//! `authenticate`: a client hands the host a token for a protected resource
//! the host advertised. Without a bring-your-own-key provider the runtime
//! signs in to GitHub, so the host advertises GitHub's API as a protected
//! resource (`AgentInfo.protectedResources`) and keeps the token a principal
//! gives it, in memory only, never logged, for the agent to use on that
//! principal's sessions.

use ahp_types::commands::{AuthenticateParams, AuthenticateResult};
use tracing::info;

use crate::auth::tokens::GITHUB_RESOURCE;
use crate::auth::Principal;
use crate::host::Host;
use ahp_bridge_jsonrpc::{ErrorCode, RpcError};

pub(crate) fn authenticate(
    host: &Host,
    principal: &Principal,
    p: AuthenticateParams,
) -> Result<AuthenticateResult, RpcError> {
    let invalid = |m: String| RpcError::new(ErrorCode::InvalidParams, m);
    if p.token.is_empty() {
        return Err(invalid("field `token` must be a non-empty string".into()));
    }
    let advertised = host.settings().github_sign_in();
    if !advertised || p.resource != GITHUB_RESOURCE {
        let offered = if advertised {
            format!("{GITHUB_RESOURCE:?}")
        } else {
            "none (the runtime uses the operator's model provider)".into()
        };
        return Err(invalid(format!(
            "resource {:?} is not one this host advertised; it advertises {offered}",
            p.resource
        )));
    }
    host.tokens().set(&principal.name, &p.token);
    info!(principal = %principal.name, resource = %p.resource, "client authenticated for the runtime (token kept in memory)");
    host.authenticated(&principal.name);
    Ok(AuthenticateResult {})
}
