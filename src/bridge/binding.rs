//! What a runtime session is bound to (registered sections, their owners,
//! client tools), derived from the AHP state; and binding it: create, resume,
//! or re-bind (destroy + resume, history kept) when the derivation changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{json, Value};
use tracing::{debug, info, warn};

use super::Bridge;
use crate::ahp::backend::ActiveClientView;
use crate::config::OverrideConfig;
use crate::policy::{owners, OptIn, Policy};
use crate::runtime::connection::RuntimeConn;
use crate::runtime::wire::{
    self, method, ExternalTool, ModelProvider, Secret, SectionAction, SectionOverride,
    SessionConfig, SystemMessage,
};
use crate::transform::registrations::{registrations, Registration};

/// A client's opt-in as the transform core sees it: its raw opt-in and its
/// principal's allow-list, which the policy evaluates.
impl From<&ActiveClientView> for OptIn {
    fn from(c: &ActiveClientView) -> Self {
        OptIn {
            client_id: c.client_id.clone(),
            sections: c.opt_in.clone(),
            allowed: c.transform_sections.clone(),
        }
    }
}

/// The part of a runtime session's config that is fixed at create/resume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Binding {
    /// Sections registered for `action: "transform"`.
    pub registered: BTreeSet<String>,
    /// Section -> owning client, at binding time.
    pub owners: BTreeMap<String, String>,
    /// Tool name -> (owning client, the definition given to the runtime).
    pub tools: BTreeMap<String, (String, ExternalTool)>,
    /// The policy it was derived under (its overrides are registered too):
    /// a reload that changes the policy re-binds, so the runtime re-renders
    /// the prompt under the new one.
    pub policy_sha256: String,
}

impl Binding {
    /// Derives the binding the runtime session should have now.
    pub fn derive(policy: &Policy, clients: &[ActiveClientView]) -> Self {
        let opt_ins: Vec<OptIn> = clients.iter().map(OptIn::from).collect();
        let owners = owners(policy, &opt_ins);
        let mut tools = BTreeMap::new();
        for c in clients {
            for t in &c.tools {
                let Some(name) = t["name"].as_str() else {
                    continue;
                };
                // The first client to offer a name owns it.
                tools
                    .entry(name.to_owned())
                    .or_insert_with(|| (c.client_id.clone(), runtime_tool(t)));
            }
        }
        Self {
            registered: owners.keys().cloned().collect(),
            owners,
            tools,
            policy_sha256: policy.policy_sha256(),
        }
    }

    /// The `tools` for `session.create`/`resume`.
    pub fn runtime_tools(&self) -> Vec<ExternalTool> {
        self.tools.values().map(|(_, t)| t.clone()).collect()
    }

    pub fn tool_owner(&self, name: &str) -> Option<&str> {
        self.tools.get(name).map(|(o, _)| o.as_str())
    }
}

/// The runtime's `systemMessage` for the sections a binding registers
/// under `policy`; `None` when it registers none.
fn system_message(registered: &BTreeSet<String>, policy: &Policy) -> Option<SystemMessage> {
    let regs = registrations(registered, &policy.overrides);
    let sections: BTreeMap<String, SectionOverride> = regs
        .into_iter()
        .map(|(id, r)| (id, section_override(r)))
        .collect();
    (!sections.is_empty()).then_some(SystemMessage { sections })
}

fn section_override(r: Registration) -> SectionOverride {
    use crate::config::OverrideAction as A;
    match r {
        Registration::Transform => SectionOverride {
            action: SectionAction::Transform,
            content: None,
        },
        Registration::Fixed(OverrideConfig { action, content }) => SectionOverride {
            action: match action {
                A::Append => SectionAction::Append,
                A::Prepend => SectionAction::Prepend,
                A::Replace => SectionAction::Replace,
                A::Remove => SectionAction::Remove,
            },
            content,
        },
    }
}

/// An AHP tool definition as the runtime wants it.
fn runtime_tool(t: &Value) -> ExternalTool {
    ExternalTool {
        name: t["name"].as_str().unwrap_or_default().to_owned(),
        description: t
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        parameters: t
            .get("inputSchema")
            .cloned()
            .unwrap_or(json!({"type": "object", "properties": {}})),
    }
}

/// `file:///x/y` -> `/x/y`; plain paths pass.
pub fn path_of_uri(uri: &str) -> String {
    uri.strip_prefix("file://").unwrap_or(uri).to_owned()
}

impl Bridge {
    /// The config a runtime session gets at create/resume.
    fn session_config(
        &self,
        uri: &str,
        runtime_id: &str,
        model: &str,
        binding: &Binding,
        policy: &Policy,
    ) -> SessionConfig {
        let working_directory = self
            .host()
            .and_then(|h| h.working_directory(uri))
            .map(|u| path_of_uri(&u))
            .or_else(|| {
                self.cfg
                    .runtime
                    .working_directory
                    .as_ref()
                    .map(|p| p.display().to_string())
            })
            .or_else(|| {
                std::env::current_dir()
                    .ok()
                    .map(|p| p.display().to_string())
            })
            .unwrap_or_else(|| "/".into());
        SessionConfig {
            session_id: runtime_id.to_owned(),
            model: model.to_owned(),
            working_directory,
            tools: binding.runtime_tools(),
            provider: self.cfg.runtime.provider.as_ref().map(|p| ModelProvider {
                kind: p.kind.clone(),
                base_url: p.base_url.clone(),
                api_key: p.resolved_api_key(),
            }),
            system_message: system_message(&binding.registered, policy),
            github_token: self
                .host()
                .and_then(|h| h.github_token_for(uri))
                .map(Secret),
        }
    }

    /// Creates, resumes or re-binds the runtime session so that it matches the
    /// AHP state now. Registration is fixed at create/resume, so a change of
    /// opt-ins, owners or tools means destroy + resume (history is kept).
    pub(super) async fn ensure_bound(
        &self,
        uri: &str,
    ) -> anyhow::Result<(Arc<RuntimeConn>, String)> {
        let slot = self
            .slot_of_session(uri)
            .ok_or_else(|| anyhow::anyhow!("session {uri} is gone"))?;
        let (conn, generation) = self.runtime(slot).await?;
        let host = self.host().ok_or_else(|| anyhow::anyhow!("host gone"))?;
        let policy = self.policy.current();
        let want = Binding::derive(&policy, &host.active_clients(uri));
        let (runtime_id, bound, persisted) = {
            let s = self.sessions();
            let c = s
                .get(uri)
                .ok_or_else(|| anyhow::anyhow!("session {uri} is gone"))?;
            (
                c.runtime_id.clone(),
                c.binding_in(generation).cloned(),
                c.persisted,
            )
        };
        if bound.as_ref() == Some(&want) {
            return Ok((conn, runtime_id));
        }
        let model = self.session_model(uri);
        let params = self
            .session_config(uri, &runtime_id, &model, &want, &policy)
            .to_params();
        // Before its first message the runtime has nothing on disk to resume.
        let call = if persisted {
            method::SESSION_RESUME
        } else {
            method::SESSION_CREATE
        };
        if bound.is_some() {
            info!(session = uri, registered = ?want.registered, owners = ?want.owners, "opt-ins, owners or tools changed; re-binding the runtime session");
            if let Err(e) = conn
                .call(method::SESSION_DESTROY, wire::session_ref(&runtime_id))
                .await
            {
                debug!("session.destroy before re-bind: {e}");
            }
        }
        match conn.call(call, params.clone()).await {
            Ok(_) => {}
            Err(e) if call == method::SESSION_RESUME && bound.is_none() => {
                // Restored after a restart, but the runtime no longer has it
                // (its home was wiped): a new runtime session, same id.
                warn!(session = uri, %runtime_id, "the runtime cannot resume this session ({e}); starting it afresh: the model will not see the earlier turns");
                conn.call(method::SESSION_CREATE, params)
                    .await
                    .map_err(|e| anyhow::anyhow!("{}: {e}", method::SESSION_CREATE))?;
            }
            Err(e) => return Err(anyhow::anyhow!("{call}: {e}")),
        }
        debug!(session = uri, %runtime_id, call, registered = ?want.registered, "runtime session bound");
        if let Some(c) = self.sessions().get_mut(uri) {
            c.bound = Some((want, generation));
            c.model = Some(model);
        }
        Ok((conn, runtime_id))
    }

    /// A new AHP session: its runtime session is created now, and the AHP
    /// session becomes ready or failed.
    pub(super) async fn create(self: Arc<Self>, uri: String) {
        let runtime_id = uuid::Uuid::new_v4().to_string();
        self.by_runtime
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(runtime_id.clone(), uri.clone());
        self.place_session(&uri, runtime_id, false);
        let action = match self.ensure_bound(&uri).await {
            Ok(_) => json!({"type": "session/ready"}),
            Err(e) => {
                warn!(session = %uri, "runtime session not created: {e:#}");
                json!({"type": "session/creationFailed", "error": {"errorType": "runtime", "message": format!("{e:#}")}})
            }
        };
        self.emit(&uri, vec![action]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: &str, opt: &[&str], tools: &[&str]) -> ActiveClientView {
        ActiveClientView {
            transform_sections: None,
            client_id: id.into(),
            tools: tools
                .iter()
                .map(|t| json!({"name": t, "description": "d"}))
                .collect(),
            opt_in: opt.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn derive_and_compare() {
        // The default policy: `safety` restricted.
        let p = Policy::from_config(&crate::config::Config::default()).unwrap();
        let a = Binding::derive(
            &p,
            &[
                client("a", &["tone", "safety"], &["t1"]),
                client("b", &["tone", "guidelines"], &["t1", "t2"]),
            ],
        );
        assert_eq!(
            a.registered,
            ["guidelines".to_string(), "tone".to_string()].into()
        );
        assert_eq!(a.owners["tone"], "a");
        assert_eq!(a.tool_owner("t1"), Some("a"));
        assert_eq!(a.tool_owner("t2"), Some("b"));
        assert_eq!(a.runtime_tools().len(), 2);
        assert_eq!(a.runtime_tools()[0].parameters["type"], "object");
        // Same opt-ins, different order: the owners change, so the binding differs.
        let b = Binding::derive(
            &p,
            &[
                client("b", &["tone", "guidelines"], &["t1", "t2"]),
                client("a", &["tone", "safety"], &["t1"]),
            ],
        );
        assert_ne!(a, b);
        let empty = Binding::derive(&p, &[]);
        assert!(empty.registered.is_empty() && empty.tools.is_empty());
        assert_eq!(empty.policy_sha256, p.policy_sha256());
    }

    #[test]
    fn a_principal_allow_list_narrows_the_opt_in() {
        let mut c = client("policy", &["tone", "guidelines"], &[]);
        c.transform_sections = Some(["tone".to_string()].into());
        let b = Binding::derive(&Policy::default(), &[c.clone()]);
        assert_eq!(b.registered, ["tone".to_string()].into());
        c.transform_sections = Some(Default::default());
        let b = Binding::derive(&Policy::default(), &[c]);
        assert!(b.registered.is_empty(), "no transform role: no sections");
    }

    #[test]
    fn a_changed_policy_changes_the_binding() {
        let c = [client("a", &["tone"], &[])];
        let before = Policy::from_config(&crate::config::Config::default()).unwrap();
        let mut cfg = crate::config::Config::default();
        cfg.policy.transform_timeout = std::time::Duration::from_secs(9);
        let after = Policy::from_config(&cfg).unwrap();
        assert_eq!(Binding::derive(&before, &c), Binding::derive(&before, &c));
        assert_ne!(
            Binding::derive(&before, &c),
            Binding::derive(&after, &c),
            "a reload re-binds, so the runtime renders again"
        );
    }

    #[test]
    fn uris() {
        assert_eq!(path_of_uri("file:///tmp/x"), "/tmp/x");
        assert_eq!(path_of_uri("/tmp/y"), "/tmp/y");
    }
}
