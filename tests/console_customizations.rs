//! The web console's view of a session's customizations (in the policy
//! pane), in Chromium against the real CLI: a host directory of skills is
//! listed with its load state and its skill, and turning it off in the page
//! takes it out of the model's prompt at the next turn; a custom agent
//! chosen in the chat pane reaches the model with the message.

use crate::support;

use ahp_bridge_join::config::{Contents, DirectoryConfig};
use support::console::*;
use support::e2e::last_system_prompt;

const SKILL: &str = "---\nname: alpha\ndescription: ALPHA_DESC_MARKER use when the user says alpha.\n---\n# Alpha\nDo the alpha thing.\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_directory_is_listed_and_toggled_off_from_the_page() {
    let root = tempfile::tempdir().unwrap();
    let skill = root.path().join("skills/alpha/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(&skill, SKILL).unwrap();
    let skills = root.path().join("skills");
    let st = stack_tuned(|cfg| {
        cfg.customizations.directories = vec![DirectoryConfig {
            path: skills,
            contents: Contents::Skill,
            name: Some("team-skills".into()),
        }];
    })
    .await;
    let b = open_console(&st).await;
    new_session(&b).await;
    assert_eq!(send_and_wait(&b, "hello").await, "turnComplete");
    assert!(last_system_prompt(&st.model).contains("ALPHA_DESC_MARKER"));
    b.click("#tab-policy").await;
    let listed = b
        .wait(
            "the host directory, loaded, with its skill",
            "(li => li && li.textContent)(document.querySelector('#customizations li[data-customization=\"host-dir-0\"]'))",
        )
        .await;
    let listed = listed.as_str().unwrap();
    assert!(
        listed.contains("team-skills")
            && listed.contains("loaded")
            && listed.contains("skill alpha"),
        "{listed}"
    );
    b.click("#custom-host-dir-0").await;
    b.wait(
        "the toggle taken",
        "(c => c && !c.checked)(document.getElementById('custom-host-dir-0'))",
    )
    .await;
    b.click("#tab-chat").await;
    assert_eq!(send_and_wait(&b, "again").await, "turnComplete");
    let prompt = last_system_prompt(&st.model);
    assert!(
        !prompt.contains("ALPHA_DESC_MARKER"),
        "toggled off: {prompt}"
    );
}

const AGENT: &str = "---\nname: reviewer\ndescription: Reviews code.\ntools: [\"view\"]\n---\nREVIEWER_PROMPT_MARKER You review code.\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_agent_chosen_in_the_page_reaches_the_model() {
    let root = tempfile::tempdir().unwrap();
    let agents = root.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("reviewer.agent.md"), AGENT).unwrap();
    let st = stack_tuned(|cfg| {
        cfg.customizations.directories = vec![DirectoryConfig {
            path: agents,
            contents: Contents::Agent,
            name: Some("team-agents".into()),
        }];
    })
    .await;
    let b = open_console(&st).await;
    new_session(&b).await;
    b.wait(
        "the agent offered",
        "[...document.querySelectorAll('#agent option')].some(o => o.textContent === 'reviewer')",
    )
    .await;
    b.eval("(s => { s.value = [...s.options].find(o => o.textContent === 'reviewer').value; })(document.getElementById('agent'))")
        .await;
    assert_eq!(send_and_wait(&b, "review this").await, "turnComplete");
    let prompt = last_system_prompt(&st.model);
    assert!(
        prompt.contains("REVIEWER_PROMPT_MARKER"),
        "selected: {prompt}"
    );
    b.eval("document.getElementById('agent').value = ''").await;
    assert_eq!(send_and_wait(&b, "plain").await, "turnComplete");
    let prompt = last_system_prompt(&st.model);
    assert!(!prompt.contains("REVIEWER_PROMPT_MARKER"), "none: {prompt}");
}
