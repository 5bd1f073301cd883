use super::*;

fn skill(folder: &str, text: &str) -> Child {
    markdown_child(
        FileRole::Skill { folder },
        &format!("skills/{folder}/SKILL.md"),
        text.as_bytes(),
    )
}

#[test]
fn a_skill_reads_its_fields_and_body() {
    let c = skill(
        "alpha",
        "---\nname: alpha\ndescription: Use for alpha.\ndisable-model-invocation: true\n\
         user-invocable: false\nmetadata:\n  a: b\n---\n# Alpha\n",
    );
    assert_eq!(c.kind, ChildKind::Skill);
    assert_eq!(c.name, "alpha");
    assert_eq!(c.rel_path, "skills/alpha/SKILL.md");
    assert_eq!(c.description.as_deref(), Some("Use for alpha."));
    assert_eq!(c.disable_model_invocation, Some(true));
    assert_eq!(c.disable_user_invocation, Some(true));
    assert_eq!(c.body, "# Alpha\n");
    assert_eq!(c.load, Load::Loaded);
    assert_eq!(
        c.sha256,
        hex::encode(Sha256::digest(
            "---\nname: alpha\ndescription: Use for alpha.\ndisable-model-invocation: true\n\
             user-invocable: false\nmetadata:\n  a: b\n---\n# Alpha\n"
        ))
    );
}

#[test]
fn a_skill_named_unlike_its_folder_is_an_error() {
    let c = skill(
        "mismatch",
        "---\nname: other-name\ndescription: d\n---\nbody",
    );
    assert_eq!(
        c.load,
        Load::Error(
            "its name \"other-name\" is not its folder's (\"mismatch\"); a skill's `name` must match its folder"
                .into()
        )
    );
}

#[test]
fn a_skill_without_frontmatter_or_description_is_an_error() {
    let c = skill("nofm", "just a body\n");
    assert!(
        matches!(&c.load, Load::Error(m) if m.starts_with("no frontmatter")),
        "{c:?}"
    );
    assert_eq!(c.body, "just a body\n");
    let c = skill("nodesc", "---\nname: nodesc\n---\nbody");
    assert!(
        matches!(&c.load, Load::Error(m) if m.starts_with("no `description`")),
        "{c:?}"
    );
    let c = skill("unclosed", "---\nname: x\n");
    assert_eq!(
        c.load,
        Load::Error("the frontmatter has no closing `---` line".into())
    );
}

#[test]
fn a_skill_with_an_unsafe_name_is_an_error() {
    for name in ["Bad Name!", "../up", "a/b"] {
        let c = skill(
            "x",
            &format!("---\nname: \"{name}\"\ndescription: d\n---\n"),
        );
        assert!(
            matches!(&c.load, Load::Error(m) if m.contains("not usable")),
            "{c:?}"
        );
    }
}

#[test]
fn a_field_of_the_wrong_type_is_left_out() {
    let c = skill(
        "alpha",
        "---\nname: alpha\ndescription: d\ndisable-model-invocation: sometimes\n---\n",
    );
    assert_eq!(c.disable_model_invocation, None);
    assert_eq!(
        c.load,
        Load::Degraded(
            "`disable-model-invocation` is \"sometimes\", not true or false; left out".into()
        )
    );
}

#[test]
fn an_agent_takes_its_name_from_frontmatter_or_file() {
    let c = markdown_child(
        FileRole::Agent,
        "agents/filer.agent.md",
        b"---\nname: filer\ndescription: Files.\ntools: [\"view\", \"grep\"]\nmodel: gpt-5\n---\nYou file.\n",
    );
    assert_eq!((c.kind, c.name.as_str()), (ChildKind::Agent, "filer"));
    assert_eq!(c.tools, Some(vec!["view".into(), "grep".into()]));
    assert_eq!(c.model.as_deref(), Some("gpt-5"));
    assert_eq!(c.body, "You file.\n");
    assert_eq!(c.load, Load::Loaded);
    let c = markdown_child(
        FileRole::Agent,
        "agents/noname.agent.md",
        b"---\ndescription: d\ntools: Read, Grep\n---\nx",
    );
    assert_eq!(c.name, "noname");
    assert_eq!(c.tools, Some(vec!["Read".into(), "Grep".into()]));
    let c = markdown_child(
        FileRole::Agent,
        "agents/plain.md",
        b"---\ndescription: d\n---\n",
    );
    assert_eq!(c.name, "plain");
    let c = markdown_child(FileRole::Agent, "agents/nofm.agent.md", b"no frontmatter");
    assert!(matches!(c.load, Load::Error(_)));
}

#[test]
fn rules_read_always_apply_and_globs_or_apply_to() {
    let c = markdown_child(
        FileRole::Rule,
        "rules/py.mdc",
        b"---\ndescription: py\nalwaysApply: false\nglobs: \"**/*.py\"\n---\nUse black.\n",
    );
    assert_eq!((c.kind, c.name.as_str()), (ChildKind::Rule, "py"));
    assert_eq!(c.always_apply, Some(false));
    assert_eq!(c.globs, Some(vec!["**/*.py".into()]));
    let c = markdown_child(
        FileRole::Rule,
        "ts.instructions.md",
        b"---\napplyTo: \"**/*.ts, **/*.tsx\"\n---\nx",
    );
    assert_eq!(c.name, "ts");
    assert_eq!(c.globs, Some(vec!["**/*.ts".into(), "**/*.tsx".into()]));
    let c = markdown_child(FileRole::Rule, "general.instructions.md", b"Be nice.\n");
    assert_eq!(
        (c.name.as_str(), c.body.as_str()),
        ("general", "Be nice.\n")
    );
    assert_eq!((c.globs.clone(), c.load.clone()), (None, Load::Loaded));
}

#[test]
fn commands_and_prompts_are_named_by_their_file() {
    let c = markdown_child(
        FileRole::Command,
        "commands/deploy.md",
        b"---\ndescription: Deploy.\n---\nRun $ARGUMENTS",
    );
    assert_eq!((c.kind, c.name.as_str()), (ChildKind::Skill, "deploy"));
    assert_eq!(c.description.as_deref(), Some("Deploy."));
    assert_eq!(c.load, Load::Loaded);
    let c = markdown_child(FileRole::Prompt, "fix.prompt.md", b"Fix it.");
    assert_eq!((c.kind, c.name.as_str()), (ChildKind::Prompt, "fix"));
    assert_eq!(c.load, Load::Loaded);
    let c = markdown_child(FileRole::Prompt, "bad\u{1}name.md", b"x");
    assert!(matches!(c.load, Load::Error(_)));
}

#[test]
fn hooks_are_listed_and_never_loaded_as_usable_code() {
    let c = hooks_child("hooks/hooks.json", br#"{"hooks": {}}"#);
    assert_eq!((c.kind, c.name.as_str()), (ChildKind::Hook, "hooks"));
    assert!(matches!(c.load, Load::Degraded(_)));
    let c = hooks_child("hooks/hooks.json", b"{nope");
    assert!(matches!(&c.load, Load::Error(m) if m.starts_with("not valid JSON")));
}
