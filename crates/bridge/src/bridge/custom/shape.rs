//! A container as read, in AHP's shapes: its load state (`loaded`,
//! `degraded` with what is wrong, `error` with why) and its children with
//! their frontmatter. A new shape keeps the toggles a session's clients
//! made on the one it replaces.

use ahp_types::state::{
    AgentCustomization, ChildCustomization, Customization, CustomizationDegradedState,
    CustomizationErrorState, CustomizationLoadState, CustomizationLoadedState,
    CustomizationLoadingState, HookCustomization, McpServerState, PromptCustomization,
    RuleCustomization, SkillCustomization,
};

use crate::ahp::{mcp_server_error, stopped_mcp_server};
use crate::customize::{Child, ChildKind, Load, Package};

/// How many child problems a container's message names before it counts.
const NAMED_PROBLEMS: usize = 5;

/// `loading`, for a container whose files are being read.
pub(crate) fn loading() -> CustomizationLoadState {
    CustomizationLoadState::Loading(CustomizationLoadingState {})
}

/// `error` with `message`.
pub(crate) fn error(message: impl Into<String>) -> CustomizationLoadState {
    CustomizationLoadState::Error(CustomizationErrorState {
        message: message.into(),
    })
}

/// The state of a package: its own refusal, else the problems of its
/// children (and `warnings`, e.g. what a policy removed), else loaded.
pub(crate) fn load_of(pkg: &Package, warnings: &[String]) -> CustomizationLoadState {
    if let Load::Error(why) = &pkg.load {
        return error(why.clone());
    }
    let mut problems: Vec<String> = pkg
        .children
        .iter()
        .filter_map(|c| match &c.load {
            Load::Loaded => None,
            Load::Degraded(why) | Load::Error(why) => Some(format!("{} {}: {why}", c.kind, c.name)),
        })
        .collect();
    if let Load::Degraded(why) = &pkg.load {
        problems.insert(0, why.clone());
    }
    problems.extend(warnings.iter().cloned());
    if problems.is_empty() {
        return CustomizationLoadState::Loaded(CustomizationLoadedState {});
    }
    let more = problems.len().saturating_sub(NAMED_PROBLEMS);
    problems.truncate(NAMED_PROBLEMS);
    let mut message = problems.join("; ");
    if more > 0 {
        message.push_str(&format!("; and {more} more"));
    }
    CustomizationLoadState::Degraded(CustomizationDegradedState { message })
}

/// A child's id in a session: unique under its container.
pub(crate) fn child_id(container: &str, child: &Child) -> String {
    format!("{container}/{}/{}", child.kind, child.name)
}

/// The usable children of `pkg`, as AHP lists them; `base` is the
/// container's URI (a child's is under it).
pub(crate) fn children(pkg: &Package, container: &str, base: &str) -> Vec<ChildCustomization> {
    pkg.children
        .iter()
        .filter(|c| c.load.usable())
        .map(|c| child(c, child_id(container, c), under(base, &c.rel_path)))
        .collect()
}

fn under(base: &str, rel: &str) -> String {
    format!("{}/{rel}", base.trim_end_matches('/'))
}

fn child(c: &Child, id: String, uri: String) -> ChildCustomization {
    let name = c.name.clone();
    let description = c.description.clone();
    match c.kind {
        ChildKind::Skill => ChildCustomization::Skill(SkillCustomization {
            id,
            uri,
            name,
            icons: None,
            range: None,
            meta: None,
            enabled: None,
            description,
            disable_model_invocation: c.disable_model_invocation,
            disable_user_invocation: c.disable_user_invocation,
        }),
        ChildKind::Agent => ChildCustomization::Agent(AgentCustomization {
            id,
            uri,
            name,
            icons: None,
            range: None,
            meta: None,
            enabled: None,
            description,
            model: c.model.clone(),
            tools: c.tools.clone(),
            disable_model_invocation: c.disable_model_invocation,
            disable_user_invocation: c.disable_user_invocation,
        }),
        ChildKind::Prompt => ChildCustomization::Prompt(PromptCustomization {
            id,
            uri,
            name,
            icons: None,
            range: None,
            meta: None,
            enabled: None,
            description,
        }),
        ChildKind::Rule => ChildCustomization::Rule(rule(c, id, uri)),
        ChildKind::Hook => ChildCustomization::Hook(HookCustomization {
            id,
            uri,
            name,
            icons: None,
            range: None,
            meta: None,
            enabled: None,
        }),
        ChildKind::McpServer => {
            ChildCustomization::McpServer(Box::new(stopped_mcp_server(id, uri, name)))
        }
    }
}

fn rule(c: &Child, id: String, uri: String) -> RuleCustomization {
    RuleCustomization {
        id,
        uri,
        name: c.name.clone(),
        icons: None,
        range: None,
        meta: None,
        enabled: None,
        description: c.description.clone(),
        always_apply: c.always_apply,
        globs: c.globs.clone(),
    }
}

/// `fresh` with the toggles a client made on `old` (the same container as
/// the session had it): the container's enablement, each child's `enabled`.
pub(crate) fn keep_toggles(mut fresh: Customization, old: Option<&Customization>) -> Customization {
    let Some(old) = old else { return fresh };
    match (&mut fresh, old) {
        (Customization::Plugin(f), Customization::Plugin(o)) => {
            f.enablement = o.enablement.clone();
            keep_child_toggles(f.children.as_mut(), o.children.as_deref());
        }
        (Customization::Directory(f), Customization::Directory(o)) => {
            f.enabled = o.enabled;
            keep_child_toggles(f.children.as_mut(), o.children.as_deref());
        }
        (Customization::McpServer(f), Customization::McpServer(o)) => {
            f.enablement = o.enablement.clone();
            f.state = o.state.clone();
        }
        _ => {}
    }
    fresh
}

fn keep_child_toggles(
    fresh: Option<&mut Vec<ChildCustomization>>,
    old: Option<&[ChildCustomization]>,
) {
    let (Some(fresh), Some(old)) = (fresh, old) else {
        return;
    };
    for f in fresh.iter_mut() {
        let Some(id) = child_ref(f).map(|(id, _)| id.to_owned()) else {
            continue;
        };
        let was = old.iter().find_map(|o| match child_ref(o) {
            Some((oid, enabled)) if oid == id => Some(enabled),
            _ => None,
        });
        if let Some(enabled) = was {
            set_child_enabled(f, enabled);
        }
    }
}

/// A child's id and whether it is enabled (`None`: as its container).
pub(crate) fn child_ref(c: &ChildCustomization) -> Option<(&str, Option<bool>)> {
    Some(match c {
        ChildCustomization::Agent(a) => (&a.id, a.enabled),
        ChildCustomization::Skill(s) => (&s.id, s.enabled),
        ChildCustomization::Prompt(p) => (&p.id, p.enabled),
        ChildCustomization::Rule(r) => (&r.id, r.enabled),
        ChildCustomization::Hook(h) => (&h.id, h.enabled),
        ChildCustomization::McpServer(m) => (
            &m.id,
            m.enablement
                .as_deref()
                .map(|e| crate::ahp::effective(Some(e))),
        ),
        ChildCustomization::Unknown(_) => return None,
    })
}

fn set_child_enabled(c: &mut ChildCustomization, enabled: Option<bool>) {
    match c {
        ChildCustomization::Agent(a) => a.enabled = enabled,
        ChildCustomization::Skill(s) => s.enabled = enabled,
        ChildCustomization::Prompt(p) => p.enabled = enabled,
        ChildCustomization::Rule(r) => r.enabled = enabled,
        ChildCustomization::Hook(h) => h.enabled = enabled,
        ChildCustomization::McpServer(_) | ChildCustomization::Unknown(_) => {}
    }
}

/// How a container the operator's policy withholds is shown.
pub(crate) enum Withheld {
    /// A package with an error load state.
    Container(Customization),
    /// An MCP server in the error state.
    Server(String, McpServerState),
}

/// `c` shown withheld by the operator's policy, with `why`; `None` when it
/// already is.
pub(crate) fn withheld(c: &Customization, why: &str) -> Option<Withheld> {
    let mut out = c.clone();
    match &mut out {
        Customization::Plugin(p) => set_error(&mut p.load, why)?,
        Customization::Directory(d) => set_error(&mut d.load, why)?,
        Customization::McpServer(m) => {
            if matches!(&m.state, McpServerState::Error(e) if e.error.message == why) {
                return None;
            }
            let state = mcp_server_error("policy", why.to_owned());
            return Some(Withheld::Server(m.id.clone(), state));
        }
        Customization::Unknown(_) => return None,
    }
    Some(Withheld::Container(out))
}

fn set_error(load: &mut Option<CustomizationLoadState>, why: &str) -> Option<()> {
    if matches!(load, Some(CustomizationLoadState::Error(e)) if e.message == why) {
        return None;
    }
    *load = Some(error(why));
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::customize::{Bounds, MemorySource};

    async fn pkg(src: MemorySource) -> Package {
        crate::customize::read_directory(&src, ChildKind::Skill, &Bounds::default()).await
    }

    #[tokio::test]
    async fn a_skill_without_frontmatter_degrades_its_container_and_is_not_listed() {
        let src = MemorySource::new()
            .file(
                "good/SKILL.md",
                "---\nname: good\ndescription: Good.\n---\nbody",
            )
            .file("bad/SKILL.md", "no frontmatter");
        let p = pkg(src).await;
        let CustomizationLoadState::Degraded(d) = load_of(&p, &[]) else {
            panic!("{:?}", load_of(&p, &[]));
        };
        assert!(d.message.contains("bad"), "{}", d.message);
        let kids = children(&p, "host-dir-0", "file:///skills");
        assert_eq!(kids.len(), 1);
        let ChildCustomization::Skill(s) = &kids[0] else {
            panic!()
        };
        assert_eq!(s.id, "host-dir-0/skill/good");
        assert_eq!(s.uri, "file:///skills/good/SKILL.md");
        assert_eq!(s.description.as_deref(), Some("Good."));
    }

    #[tokio::test]
    async fn toggles_survive_a_new_shape() {
        let src = MemorySource::new().file("a/SKILL.md", "---\nname: a\ndescription: A.\n---\nx");
        let p = pkg(src).await;
        let shape = |enabled| {
            let mut kids = children(&p, "c", "file:///d");
            if let Some(e) = enabled {
                set_child_enabled(&mut kids[0], Some(e));
            }
            Customization::Directory(ahp_types::state::DirectoryCustomization {
                id: "c".into(),
                uri: "file:///d".into(),
                name: "d".into(),
                icons: None,
                range: None,
                meta: None,
                client_id: None,
                load: Some(load_of(&p, &[])),
                children: Some(kids),
                enabled: enabled.unwrap_or(true),
                contents: ahp_types::state::CustomizationType::Skill,
                writable: false,
            })
        };
        let old = shape(Some(false));
        let kept = keep_toggles(shape(None), Some(&old));
        assert_eq!(kept, old);
    }
}
