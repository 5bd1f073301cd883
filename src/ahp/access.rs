//! Who may do what: the role each request and each client action needs.
//! A refusal names the missing role; the caller logs every decision at debug
//! with the principal.

use ahp_types::actions::StateAction;

use super::auth::Principal;
use crate::config::Role;

/// The role a request needs, and what it is for (for the refusal).
pub fn role_for_request(method: &str) -> Option<(Role, &'static str)> {
    Some(match method {
        "subscribe" | "listSessions" | "fetchTurns" => (Role::Observe, "read sessions"),
        "authenticate" => (Role::Participate, "sign the runtime in"),
        "resolveSessionConfig" | "sessionConfigCompletions" => {
            (Role::Participate, "configure new sessions")
        }
        // Files are read only where a session the caller sees works.
        "resourceRead" | "resourceList" | "resourceResolve" | "resourceRequest" | "completions" => {
            (Role::Observe, "read files in the working directories")
        }
        "createSession" => (Role::Participate, "create sessions"),
        "disposeSession" => (Role::Participate, "dispose sessions"),
        _ => return None,
    })
}

/// Whether `p` may dispatch `action`. `opts_in`: the action is an
/// active-client entry that carries a `systemMessageTransform` opt-in.
pub fn check_action(p: &Principal, action: &StateAction, opts_in: bool) -> Result<(), String> {
    match action {
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
    use crate::config::Visibility;

    fn action(v: serde_json::Value) -> StateAction {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn roles_for_actions() {
        let observer = Principal::new("dash", &[Role::Observe], None, Visibility::All);
        let policy = Principal::new("policy", &[Role::Transform], None, Visibility::All);
        let ide = Principal::new("ide", &[Role::Participate], None, Visibility::Owner);
        let turn = action(json!({"type": "chat/turnStarted", "turnId": "t",
            "startedAt": "2026-01-01T00:00:00Z", "message": {"text": "x", "origin": {"kind": "user"}}}));
        let e = check_action(&observer, &turn, false).unwrap_err();
        assert!(e.contains("`participate`"), "{e}");
        assert!(check_action(&ide, &turn, false).is_ok());
        let join = action(
            json!({"type": "session/activeClientSet", "activeClient": {"clientId": "c", "tools": []}}),
        );
        assert!(
            check_action(&policy, &join, true).is_ok(),
            "a policy service joins to transform"
        );
        let e = check_action(&ide, &join, true).unwrap_err();
        assert!(e.contains("`transform`"), "{e}");
        assert!(check_action(&observer, &join, false).is_err());
        let with_tools = action(
            json!({"type": "session/activeClientSet", "activeClient": {"clientId": "c",
            "tools": [{"name": "t", "description": "d", "inputSchema": {"type": "object"}}]}}),
        );
        assert!(check_action(&policy, &with_tools, true)
            .unwrap_err()
            .contains("`participate`"));
        let leave = action(json!({"type": "session/activeClientRemoved", "clientId": "c"}));
        assert!(check_action(&observer, &leave, false).is_ok());
        assert_eq!(
            role_for_request("createSession").unwrap().0,
            Role::Participate
        );
        assert_eq!(role_for_request("subscribe").unwrap().0, Role::Observe);
    }
}
