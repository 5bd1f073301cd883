//! Who may do what: the role each request and each client action needs.
//! A refusal names the missing role; the caller logs every decision at debug
//! with the principal.

use super::principal::{Denied, Principal};
use crate::protocol::actions::Action;
use crate::protocol::params::HostMethod;
use ahp_bridge_base::config::Role;

/// The role a request needs, and what it is for (for the refusal).
pub(crate) fn role_for_request(method: HostMethod) -> Option<(Role, &'static str)> {
    use HostMethod as M;
    Some(match method {
        M::Subscribe | M::ListSessions | M::FetchTurns => (Role::Observe, "read sessions"),
        M::Authenticate => (Role::Participate, "sign the runtime in"),
        M::ResolveSessionConfig | M::SessionConfigCompletions => {
            (Role::Participate, "configure new sessions")
        }
        // Files are read only where a session the caller sees works.
        M::ResourceRead
        | M::ResourceList
        | M::ResourceResolve
        | M::ResourceRequest
        | M::Completions => (Role::Observe, "read files in the working directories"),
        M::CreateSession => (Role::Participate, "create sessions"),
        M::DisposeSession => (Role::Participate, "dispose sessions"),
        M::Ping | M::Initialize | M::Reconnect => return None,
    })
}

/// Whether `p` may dispatch `action` (an active-client entry with an
/// opt-in needs `transform`).
pub(crate) fn check_action(p: &Principal, action: &Action) -> Result<(), Denied> {
    use ahp_types::actions::StateAction;
    let opts_in = action.opt_in.is_some();
    match &action.action {
        StateAction::SessionActiveClientSet(a) => {
            let c = &a.active_client;
            let participates =
                !c.tools.is_empty() || c.customizations.as_ref().is_some_and(|v| !v.is_empty());
            if participates {
                p.require(Role::Participate, "join with tools or customizations")?;
            }
            if opts_in {
                p.require(Role::Transform, "opt in to section transforms")?;
            }
            if !participates && !opts_in && !p.has(Role::Transform) {
                p.require(Role::Participate, "become an active client")?;
            }
            Ok(())
        }
        // Leaving is always allowed (the host checks it is the sender's own id).
        StateAction::SessionActiveClientRemoved(_) => Ok(()),
        _ => p.require(Role::Participate, "change sessions or chats"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::extension::TransformOptIn;
    use ahp_bridge_base::config::Visibility;

    fn action(v: serde_json::Value) -> Action {
        Action::from(serde_json::from_value::<ahp_types::actions::StateAction>(v).unwrap())
    }

    fn opting_in(mut a: Action) -> Action {
        a.opt_in = Some(TransformOptIn {
            sections: vec!["tone".into()],
        });
        a
    }

    fn check_action_opt(p: &Principal, a: &Action, opts_in: bool) -> Result<(), String> {
        let a = if opts_in {
            opting_in(a.clone())
        } else {
            a.clone()
        };
        check_action(p, &a).map_err(|d| d.0)
    }

    #[test]
    fn roles_for_actions() {
        let observer = Principal::new("dash", &[Role::Observe], None, Visibility::All);
        let policy = Principal::new("policy", &[Role::Transform], None, Visibility::All);
        let ide = Principal::new("ide", &[Role::Participate], None, Visibility::Owner);
        let turn = action(json!({"type": "chat/turnStarted", "turnId": "t",
            "startedAt": "2026-01-01T00:00:00Z", "message": {"text": "x", "origin": {"kind": "user"}}}));
        let e = check_action_opt(&observer, &turn, false).unwrap_err();
        assert!(e.contains("`participate`"), "{e}");
        assert!(check_action_opt(&ide, &turn, false).is_ok());
        let join = action(
            json!({"type": "session/activeClientSet", "activeClient": {"clientId": "c", "tools": []}}),
        );
        assert!(
            check_action_opt(&policy, &join, true).is_ok(),
            "a policy service joins to transform"
        );
        let e = check_action_opt(&ide, &join, true).unwrap_err();
        assert!(e.contains("`transform`"), "{e}");
        assert!(check_action_opt(&observer, &join, false).is_err());
        let with_tools = action(
            json!({"type": "session/activeClientSet", "activeClient": {"clientId": "c",
            "tools": [{"name": "t", "description": "d", "inputSchema": {"type": "object"}}]}}),
        );
        assert!(check_action_opt(&policy, &with_tools, true)
            .unwrap_err()
            .contains("`participate`"));
        let leave = action(json!({"type": "session/activeClientRemoved", "clientId": "c"}));
        assert!(check_action_opt(&observer, &leave, false).is_ok());
        assert_eq!(
            role_for_request(HostMethod::CreateSession).unwrap().0,
            Role::Participate
        );
        assert_eq!(
            role_for_request(HostMethod::Subscribe).unwrap().0,
            Role::Observe
        );
    }
}
