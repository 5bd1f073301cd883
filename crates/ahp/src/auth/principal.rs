//! One principal: who a connection is (its name, its roles, its section
//! allow-list, which sessions it sees, a JWT's claims) and what it may do.
//! Its own file because every credential makes one: the token and
//! certificate table (`principals.rs`) and the JWT issuers (`jwt.rs`) both
//! import it, and neither imports the other.

use std::collections::BTreeSet;
use std::sync::Arc;

use ahp_bridge_base::config::{PrincipalConfig, Role, Visibility};
use ahp_bridge_policy::{ClientKind, Subject};

/// A principal may not do something; says which role it lacks and for what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Denied(pub String);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    roles: BTreeSet<Role>,
    /// With `transform`: the only sections it may transform (`None`: any).
    sections: Option<BTreeSet<String>>,
    /// Sees every session, not only its own.
    sees_all: bool,
    /// A JWT principal's verified claims, for the operator's Rego policy
    /// (`input.claims`); `None` for every other credential.
    claims: Option<Arc<serde_json::Value>>,
}

impl Principal {
    /// Everyone, when no authentication is configured (loopback only).
    pub fn local() -> Self {
        Self {
            name: "local".into(),
            roles: Role::ALL.into_iter().collect(),
            sections: None,
            sees_all: true,
            claims: None,
        }
    }

    pub fn new(
        name: &str,
        roles: &[Role],
        sections: Option<&[String]>,
        visibility: Visibility,
    ) -> Self {
        let roles: BTreeSet<Role> = roles.iter().copied().collect();
        Self {
            name: name.to_owned(),
            sees_all: visibility == Visibility::All || roles.contains(&Role::Admin),
            roles,
            sections: sections.map(|s| s.iter().cloned().collect()),
            claims: None,
        }
    }

    /// A `[[principals]]` entry's principal; its sessions are seen as
    /// `server` (`[server] session_visibility`) says unless it says itself.
    pub fn from_config(p: &PrincipalConfig, server: Visibility) -> Self {
        let visibility = p.session_visibility.unwrap_or(server);
        Self::new(&p.name, &p.roles, p.sections.as_deref(), visibility)
    }

    /// The same principal, carrying the verified claims of its JWT.
    pub(crate) fn with_claims(
        mut self,
        claims: serde_json::Map<String, serde_json::Value>,
    ) -> Self {
        self.claims = Some(Arc::new(serde_json::Value::Object(claims)));
        self
    }

    /// Who it is to the operator's Rego policy: its name, roles and claims,
    /// with the client that asks.
    pub fn subject(&self, client_id: Option<&str>, kind: ClientKind) -> Subject {
        Subject::new(
            Some(self.name.clone()),
            self.roles.iter().map(|r| r.as_str()).collect(),
            self.claims.clone(),
            client_id.map(str::to_owned),
            kind,
        )
    }

    pub fn has(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }

    /// `Ok` with the role, or the refusal that names what is missing.
    pub fn require(&self, role: Role, to: &str) -> Result<(), Denied> {
        if self.has(role) {
            Ok(())
        } else {
            Err(Denied(format!(
                "principal {:?} lacks the `{}` role needed to {to}",
                self.name,
                role.as_str()
            )))
        }
    }

    pub fn sees(&self, owner: &str) -> bool {
        self.sees_all || owner == self.name
    }

    pub fn is_admin(&self) -> bool {
        self.has(Role::Admin)
    }

    /// The sections it may transform: `None` for any (policy still applies),
    /// an empty set without the `transform` role.
    pub fn transform_sections(&self) -> Option<BTreeSet<String>> {
        if !self.has(Role::Transform) {
            return Some(BTreeSet::new());
        }
        self.sections.clone()
    }
}
