//! One customization file to one [`Child`]: its name, the frontmatter fields
//! its kind has, its body, its digest, and whether it can be used. A field
//! of the wrong type is left out (the child degraded); a file the runtime
//! would not load (a skill or agent without frontmatter, a skill without a
//! description) is an error for that child only.

use sha2::{Digest, Sha256};

use super::frontmatter::{self, FieldError, Fields};
use super::names::{is_safe_name, unsafe_name_reason};
use super::{Child, ChildKind, Load};

/// Hex SHA-256 of `bytes`.
pub(crate) fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// What a Markdown file is, by where it lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileRole<'a> {
    /// `<folder>/SKILL.md`.
    Skill {
        folder: &'a str,
    },
    /// `commands/<name>.md`: a skill named by its file.
    Command,
    Agent,
    Prompt,
    Rule,
}

/// The suffixes a file of each role may have, longest first: the name is
/// the file's name without the first that matches.
const AGENT_SUFFIXES: &[&str] = &[".agent.md", ".md"];
const PROMPT_SUFFIXES: &[&str] = &[".prompt.md", ".md"];
const RULE_SUFFIXES: &[&str] = &[".instructions.md", ".mdc", ".md"];
const COMMAND_SUFFIXES: &[&str] = &[".md"];

impl FileRole<'_> {
    fn kind(self) -> ChildKind {
        match self {
            FileRole::Skill { .. } | FileRole::Command => ChildKind::Skill,
            FileRole::Agent => ChildKind::Agent,
            FileRole::Prompt => ChildKind::Prompt,
            FileRole::Rule => ChildKind::Rule,
        }
    }

    pub(crate) fn suffixes(self) -> &'static [&'static str] {
        match self {
            FileRole::Skill { .. } => &[],
            FileRole::Command => COMMAND_SUFFIXES,
            FileRole::Agent => AGENT_SUFFIXES,
            FileRole::Prompt => PROMPT_SUFFIXES,
            FileRole::Rule => RULE_SUFFIXES,
        }
    }

    /// The name a file has before its frontmatter is read: the folder's for
    /// a skill, the file's stem otherwise.
    fn default_name<'n>(self, file_name: &'n str) -> &'n str
    where
        Self: 'n,
    {
        match self {
            FileRole::Skill { folder } => folder,
            _ => self
                .suffixes()
                .iter()
                .find_map(|s| file_name.strip_suffix(s))
                .unwrap_or(file_name),
        }
    }

    /// The runtime drops skills and agents without frontmatter.
    fn needs_frontmatter(self) -> bool {
        matches!(self, FileRole::Skill { .. } | FileRole::Agent)
    }
}

/// What went wrong with one child: the first error, or the warnings.
#[derive(Debug, Default)]
struct Notes {
    error: Option<String>,
    warnings: Vec<String>,
}

impl Notes {
    /// A field's value, or nothing (with a warning) when it has the wrong type.
    fn field<T>(&mut self, read: Result<Option<T>, FieldError>) -> Option<T> {
        read.unwrap_or_else(|e| {
            self.warnings.push(format!("{e}; left out"));
            None
        })
    }

    fn into_load(self) -> Load {
        match (self.error, self.warnings.is_empty()) {
            (Some(e), _) => Load::Error(e),
            (None, true) => Load::Loaded,
            (None, false) => Load::Degraded(self.warnings.join("; ")),
        }
    }
}

/// The child the Markdown file at `rel_path` holds.
pub(crate) fn markdown_child(role: FileRole<'_>, rel_path: &str, bytes: &[u8]) -> Child {
    let file_name = rel_path.rsplit('/').next().unwrap_or(rel_path);
    let mut child = Child::new(
        role.kind(),
        role.default_name(file_name),
        rel_path,
        &digest(bytes),
    );
    let mut notes = Notes::default();
    match frontmatter::split(bytes) {
        Err(e) => notes.error = Some(e.to_string()),
        Ok(doc) => {
            child.body = doc.body;
            match doc.fields {
                Some(fields) => read_fields(role, &fields, &mut child, &mut notes),
                None if role.needs_frontmatter() => {
                    notes.error = Some(format!(
                        "no frontmatter: the runtime loads no {} file without a `---` block at its top",
                        role.kind()
                    ));
                }
                None => {}
            }
        }
    }
    if notes.error.is_none() && !is_safe_name(&child.name) {
        notes.error = Some(unsafe_name_reason(&child.name));
    }
    child.load = notes.into_load();
    child
}

fn read_fields(role: FileRole<'_>, f: &Fields, child: &mut Child, notes: &mut Notes) {
    child.description = notes.field(f.text(&["description"]));
    child.disable_model_invocation =
        notes.field(f.flag(&["disable-model-invocation", "disableModelInvocation"]));
    let user_invocable = notes.field(f.flag(&["user-invocable", "userInvocable"]));
    child.disable_user_invocation = user_invocable.map(|u| !u);
    match role {
        FileRole::Skill { folder } => skill_fields(folder, f, child, notes),
        FileRole::Agent => {
            if let Some(name) = notes.field(f.text(&["name"])) {
                child.name = name;
            }
            child.model = notes.field(f.text(&["model"]));
            child.tools = notes.field(f.list(&["tools"]));
        }
        FileRole::Rule => {
            child.always_apply = notes.field(f.flag(&["alwaysApply", "always-apply"]));
            child.globs = notes.field(f.list(&["globs", "applyTo"]));
        }
        FileRole::Command | FileRole::Prompt => {}
    }
}

/// A skill's name and description: a `name` unlike its folder's is an
/// error, and so is a skill with no description (the runtime would not
/// offer it).
fn skill_fields(folder: &str, f: &Fields, child: &mut Child, notes: &mut Notes) {
    match notes.field(f.text(&["name"])) {
        // The Agent Plugins specification requires them to match; the
        // runtime would load it under the frontmatter's name, which a user
        // looking for the folder's would not find.
        Some(name) if name != folder && is_safe_name(&name) => {
            notes.error = Some(format!(
                "its name {name:?} is not its folder's ({folder:?}); a skill's `name` must match its folder"
            ));
            child.name = name;
        }
        Some(name) => child.name = name,
        None => notes
            .warnings
            .push(format!("no `name`; named after its folder, {folder:?}")),
    }
    if child
        .description
        .as_deref()
        .is_none_or(|d| d.trim().is_empty())
    {
        notes.error = Some("no `description`: a skill says what it does and when to use it".into());
    }
}

/// The child for a `hooks/hooks.json`: listed so a user sees it, never run
/// (the bridge runs no package's commands).
pub(crate) fn hooks_child(rel_path: &str, bytes: &[u8]) -> Child {
    let mut child = Child::new(ChildKind::Hook, "hooks", rel_path, &digest(bytes));
    child.load = match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(v) if v.is_object() => Load::Degraded("hooks are listed, not run by this bridge".into()),
        Ok(_) => Load::Error("not a JSON object".into()),
        Err(e) => Load::Error(format!("not valid JSON: {e}")),
    };
    child
}

#[cfg(test)]
#[path = "children_tests.rs"]
mod tests;
