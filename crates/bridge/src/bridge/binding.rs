//! What a runtime session is bound to (registered sections, their owners,
//! client tools, the policy), derived from the AHP state; and the config a
//! runtime session gets at create or resume. Pure: the bridge compares the
//! binding a session has with the one it should have, and re-binds
//! (destroy + resume, history kept) when they differ.

use std::collections::{BTreeMap, BTreeSet};

use ahp_types::state::ToolDefinition;
use serde_json::json;
use tracing::{debug, warn};

use super::turn_error::TurnError;
use crate::ahp::ActiveClientView;
use crate::config::{OverrideAction, OverrideConfig};
use crate::policy::{owners, OptIn, Policy};
use crate::runtime::RuntimeConn;
use crate::runtime::RuntimeCustomizations;
use crate::runtime::{ExternalTool, SectionAction, SectionOverride, SessionConfig, SystemMessage};
use crate::runtime::{SessionCreate, SessionResume};
use crate::transform::{registrations, Registration};

/// The part of a runtime session's config that is fixed at create/resume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Binding {
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
    /// The customizations it is given (every field, at every bind: the
    /// runtime keeps none of them across a resume).
    pub customizations: RuntimeCustomizations,
}

impl Binding {
    /// Derives the binding the runtime session should have now.
    pub(crate) fn derive(policy: &Policy, clients: &[ActiveClientView]) -> Self {
        let opt_ins: Vec<OptIn> = clients.iter().map(OptIn::from).collect();
        let owners = owners(policy, &opt_ins);
        let mut tools = BTreeMap::new();
        for c in clients {
            for t in &c.tools {
                // The first client to offer a name owns it.
                tools
                    .entry(t.name.clone())
                    .or_insert_with(|| (c.client_id.clone(), runtime_tool(t)));
            }
        }
        Self {
            registered: owners.keys().cloned().collect(),
            owners,
            tools,
            policy_sha256: policy.policy_sha256(),
            customizations: RuntimeCustomizations::default(),
        }
    }

    /// The `tools` for `session.create`/`resume`.
    pub(crate) fn runtime_tools(&self) -> Vec<ExternalTool> {
        self.tools.values().map(|(_, t)| t.clone()).collect()
    }

    pub(crate) fn tool_owner(&self, name: &str) -> Option<&str> {
        self.tools.get(name).map(|(o, _)| o.as_str())
    }

    /// The runtime's `systemMessage` for the sections this binding
    /// registers under `policy`; `None` when it registers none.
    pub(crate) fn system_message(&self, policy: &Policy) -> Option<SystemMessage> {
        let sections: BTreeMap<String, SectionOverride> =
            registrations(&self.registered, policy.overrides())
                .into_iter()
                .map(|(id, r)| (id, section_override(r)))
                .collect();
        (!sections.is_empty()).then_some(SystemMessage { sections })
    }
}

fn section_override(r: Registration) -> SectionOverride {
    let (action, content) = match r {
        Registration::Transform => (SectionAction::Transform, None),
        Registration::Fixed(OverrideConfig { action, content }) => {
            let action = match action {
                OverrideAction::Append => SectionAction::Append,
                OverrideAction::Prepend => SectionAction::Prepend,
                OverrideAction::Replace => SectionAction::Replace,
                OverrideAction::Remove => SectionAction::Remove,
            };
            (action, content)
        }
    };
    SectionOverride { action, content }
}

/// An AHP tool definition as the runtime wants it.
fn runtime_tool(t: &ToolDefinition) -> ExternalTool {
    ExternalTool {
        name: t.name.clone(),
        description: t.description.clone().unwrap_or_default(),
        parameters: t
            .input_schema
            .clone()
            .unwrap_or(json!({"properties": {}, "type": "object"})),
    }
}

/// Binds a runtime session: `session.resume` once the runtime has it on
/// disk (`persisted`), `session.create` before that. Restored after a
/// restart (`unbound`: never bound since) but lost by the runtime (its home was wiped): a new
/// runtime session under the same id, without the earlier turns.
pub(super) async fn bind(
    conn: &RuntimeConn,
    uri: &str,
    config: &SessionConfig,
    persisted: bool,
    unbound: bool,
) -> Result<(), TurnError> {
    use crate::runtime::Method;
    let (call, bound) = if persisted {
        (
            SessionResume::NAME,
            conn.call::<SessionResume>(config).await,
        )
    } else {
        (
            SessionCreate::NAME,
            conn.call::<SessionCreate>(config).await,
        )
    };
    match bound {
        Ok(_) => {}
        Err(e) if persisted && unbound => {
            warn!(session = uri, runtime = %config.session_id, "the runtime cannot resume this session ({e}); starting it afresh: the model will not see the earlier turns");
            conn.call::<SessionCreate>(config)
                .await
                .map_err(TurnError::call(SessionCreate::NAME))?;
        }
        Err(e) => return Err(TurnError::call(call)(e)),
    }
    debug!(session = uri, runtime = %config.session_id, call, "runtime session bound");
    Ok(())
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
                .map(|t| serde_json::from_value(json!({"name": t, "description": "d"})).unwrap())
                .collect(),
            opt_in: opt.iter().map(|s| s.to_string()).collect(),
            plugins: vec![],
            may_customize: false,
            subject: crate::policy::Subject::nobody(),
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
        assert_eq!(
            empty.system_message(&p),
            None,
            "nothing registered: no systemMessage"
        );
        let tone = a.system_message(&p).unwrap();
        assert_eq!(tone.sections["tone"].action, SectionAction::Transform);
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
}
