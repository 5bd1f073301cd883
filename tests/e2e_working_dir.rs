//! A session's working directory is one path, whoever reads it: the real
//! runtime works there (its system prompt names it) and the host's file
//! reads are confined to it. A `file:` URI with a %-escape is decoded once,
//! the same way for both.

use crate::support;

use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;
use serde_json::{json, Value};
use support::e2e::*;
use support::*;

#[tokio::test]
async fn a_percent_escaped_working_directory_is_one_path_for_the_runtime_and_for_reads() {
    let st = start_stack(|_| {}).await;
    let tmp = st.dir.path().display().to_string();
    let wd = st.dir.path().join("a b");
    std::fs::create_dir_all(&wd).unwrap();
    std::fs::write(wd.join("notes.txt"), "inside a b\n").unwrap();
    let escaped = format!("file://{tmp}/a%20b");

    let c = initialized(&st.bridge, "wd").await;
    let _: Value = c
        .request(
            "createSession",
            json!({"channel": "ahp-session:/wd", "workingDirectories": [escaped]}),
        )
        .await
        .unwrap();
    assert_eq!(creation_outcome(&c, "ahp-session:/wd").await, None);
    st.model.push(Reply::Text("done".into()));
    let end = run_turn(&c, "wd", "t1", "where are you?").await;
    assert_eq!(end.kind, "complete", "{end:?}");

    let requests = st.model.requests();
    let prompt = ScriptedModel::system_prompt(requests.last().unwrap()).unwrap();
    assert!(
        prompt.contains(&format!("{tmp}/a b")),
        "the runtime works in the decoded directory"
    );
    assert!(!prompt.contains("a%20b"), "never the escaped form");

    let read: Value = c
        .request(
            "resourceRead",
            json!({"channel": "ahp-session:/wd", "uri": format!("{escaped}/notes.txt")}),
        )
        .await
        .unwrap();
    assert_eq!(read["data"], "inside a b\n", "files are read there too");
}
