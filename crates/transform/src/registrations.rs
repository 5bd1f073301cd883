//! Which sections a runtime session registers, and how: operator overrides
//! as they are, `transform` for the sections a client owns. Registering a
//! section changes how the runtime renders it, even when nobody rewrites it,
//! so with neither there is nothing to register and the prompt is exactly
//! the runtime's default.

use std::collections::{BTreeMap, BTreeSet};

use ahp_bridge_base::config::OverrideConfig;

/// How the runtime is told to render one section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// Rendered, then handed to the owning client (`action: "transform"`).
    Transform,
    /// Fixed by the operator (`[policy.overrides.ID]`).
    Fixed(OverrideConfig),
}

/// The registration of every section that has one; empty: none at all.
pub fn registrations(
    owned: &BTreeSet<String>,
    overrides: &BTreeMap<String, OverrideConfig>,
) -> BTreeMap<String, Registration> {
    let mut out: BTreeMap<String, Registration> = overrides
        .iter()
        .map(|(id, o)| (id.clone(), Registration::Fixed(o.clone())))
        .collect();
    for id in owned {
        // An override is the operator's word; a client never displaces it.
        out.entry(id.clone()).or_insert(Registration::Transform);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_bridge_base::config::OverrideAction;

    #[test]
    fn nothing_registered_sends_nothing() {
        assert!(registrations(&BTreeSet::new(), &BTreeMap::new()).is_empty());
    }

    #[test]
    fn transform_for_registered_and_overrides_kept() {
        let reg: BTreeSet<String> = ["tone".to_string(), "guidelines".to_string()].into();
        let fixed = OverrideConfig {
            action: OverrideAction::Append,
            content: Some("X".into()),
        };
        let ov = BTreeMap::from([("guidelines".to_string(), fixed.clone())]);
        let v = registrations(&reg, &ov);
        assert_eq!(v["tone"], Registration::Transform);
        assert_eq!(v["guidelines"], Registration::Fixed(fixed));
        assert_eq!(v.len(), 2);
    }
}
