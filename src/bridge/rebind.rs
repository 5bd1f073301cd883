//! Binding a runtime session to what the AHP state wants: created, resumed
//! or re-bound (destroy + resume, history kept) when its binding differs;
//! the model it runs and the working directory it is given.

use std::sync::Arc;

use tracing::info;

use super::binding::{self, Binding};
use super::Bridge;
use crate::ahp::host::Host;
use crate::runtime::connection::RuntimeConn;
use crate::runtime::wire::{self, method, ModelProvider, Secret, SessionConfig};

impl Bridge {
    /// Creates, resumes or re-binds the runtime session so that it matches the
    /// AHP state now. Registration is fixed at create/resume, so a change of
    /// opt-ins, owners, tools or policy means destroy + resume (history kept).
    pub(super) async fn ensure_bound(
        &self,
        uri: &str,
    ) -> anyhow::Result<(Arc<RuntimeConn>, String)> {
        let gone = || anyhow::anyhow!("session {uri} is gone");
        let slot = self.slot_of_session(uri).ok_or_else(gone)?;
        let (conn, generation) = self.runtime(slot).await?;
        let host = self.host().ok_or_else(|| anyhow::anyhow!("host gone"))?;
        let policy = self.policy.current();
        let mut want = Binding::derive(&policy, &host.active_clients(uri));
        let custom = self.for_runtime(uri).await;
        want.customizations = custom.fields;
        let (runtime_id, bound, persisted) = self
            .sessions
            .with(uri, |s| {
                let bound = s.binding_in(generation).cloned();
                (s.runtime_id().to_owned(), bound, s.persisted())
            })
            .ok_or_else(gone)?;
        if bound.as_ref() == Some(&want) {
            return Ok((conn, runtime_id));
        }
        let model = self.session_model(uri);
        let config = SessionConfig {
            session_id: runtime_id.clone(),
            model: model.clone(),
            working_directory: self.working_directory(&host, uri),
            tools: want.runtime_tools(),
            provider: self.cfg.runtime.provider.as_ref().map(|p| ModelProvider {
                kind: p.kind.clone(),
                base_url: p.base_url.clone(),
                api_key: p.resolved_api_key(),
            }),
            system_message: want.system_message(&policy),
            github_token: host.github_token_for(uri).map(Secret),
            customizations: want.customizations.clone(),
        };
        if bound.is_some() {
            info!(session = uri, registered = ?want.registered, owners = ?want.owners, "opt-ins, owners, tools, policy or customizations changed; re-binding the runtime session");
            if let Err(e) = conn
                .call(method::SESSION_DESTROY, wire::session_ref(&runtime_id))
                .await
            {
                tracing::debug!("session.destroy before re-bind: {e}");
            }
        }
        binding::bind(&conn, uri, &config, persisted, bound.is_none()).await?;
        self.write_records(custom.records);
        self.sessions
            .with(uri, |s| s.bound(want, generation, model));
        Ok((conn, runtime_id))
    }

    /// The working directory a runtime session is given: the session's
    /// first, else `[runtime] working_directory`, else the bridge's own.
    pub(super) fn working_directory(&self, host: &Host, uri: &str) -> String {
        host.working_directory(uri)
            .or_else(|| self.cfg.runtime.working_directory.clone())
            .or_else(|| std::env::current_dir().ok())
            .map_or_else(|| "/".into(), |p| p.display().to_string())
    }

    /// The model a (re)bind gives the runtime session of `uri`: the one it
    /// was last given, else its session config's, else `[runtime] model`.
    pub(super) fn session_model(&self, uri: &str) -> String {
        let current = self
            .sessions
            .with(uri, |s| s.model().map(String::from))
            .flatten();
        current
            .or_else(|| self.host().and_then(|h| h.session_model(uri)))
            .unwrap_or_else(|| self.cfg.runtime.model.clone())
    }

    /// Switches the runtime session to `wanted` when it uses another model
    /// (the runtime re-renders the prompt, so opted-in clients are asked
    /// again and the audit records it).
    pub(super) async fn switch_model(
        &self,
        conn: &RuntimeConn,
        uri: &str,
        runtime_id: &str,
        wanted: Option<&str>,
    ) -> anyhow::Result<()> {
        let Some(wanted) = wanted else { return Ok(()) };
        let current = self
            .sessions
            .with(uri, |s| s.model().map(String::from))
            .flatten();
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
        self.sessions.with(uri, |s| s.set_model(wanted));
        Ok(())
    }
}
