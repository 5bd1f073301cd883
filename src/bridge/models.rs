//! Which model a runtime session uses: the one it was last given, else its
//! session config's, else `[runtime] model`; a message that chooses another
//! switches the runtime session before its turn (`session.model.switchTo`,
//! which makes the runtime re-render the prompt, so opted-in clients are
//! asked again and the audit records it).

use std::sync::Arc;

use tracing::info;

use super::Bridge;
use crate::runtime::connection::RuntimeConn;
use crate::runtime::wire::{self, method};

impl Bridge {
    /// The model a (re)bind gives the runtime session of `uri`.
    pub(super) fn session_model(&self, uri: &str) -> String {
        let current = self.sessions().get(uri).and_then(|s| s.model.clone());
        current
            .or_else(|| self.host().and_then(|h| h.session_model(uri)))
            .unwrap_or_else(|| self.cfg.runtime.model.clone())
    }

    /// Switches the runtime session to `wanted` when it uses another model.
    pub(super) async fn switch_model(
        &self,
        conn: &Arc<RuntimeConn>,
        uri: &str,
        runtime_id: &str,
        wanted: Option<&str>,
    ) -> anyhow::Result<()> {
        let Some(wanted) = wanted else {
            return Ok(());
        };
        let current = self.sessions().get(uri).and_then(|s| s.model.clone());
        if current.as_deref() == Some(wanted) {
            return Ok(());
        }
        conn.call(
            method::MODEL_SWITCH,
            wire::model_switch_params(runtime_id, wanted),
        )
        .await
        .map_err(|e| anyhow::anyhow!("{}: {e}", method::MODEL_SWITCH))?;
        info!(session = %uri, from = ?current, to = %wanted, "model switched");
        if let Some(s) = self.sessions().get_mut(uri) {
            s.model = Some(wanted.to_owned());
        }
        Ok(())
    }
}

impl Bridge {
    /// A principal authenticated: its live runtime sessions get the token
    /// now (new ones get it at create or resume, see `binding`).
    pub(super) fn hand_credentials(&self, principal: &str) {
        let Some(host) = self.host() else { return };
        for uri in host.sessions_owned_by(principal) {
            let live = self
                .sessions()
                .get(&uri)
                .filter(|s| s.bound.is_some())
                .map(|s| s.runtime_id.clone());
            let (Some(runtime_id), Some(token)) = (live, host.github_token_for(&uri)) else {
                continue;
            };
            let params = wire::github_credentials_params(&runtime_id, &wire::Secret(token));
            self.spawn_call(&runtime_id, method::SET_GITHUB_CREDENTIALS, params);
        }
    }
}
