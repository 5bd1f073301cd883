//! The host crate's API is typed: JSON crosses it only where a doc comment
//! says why.

use super::*;

/// The host's API is typed: fewer than 5 `pub fn` of the host crate take
/// or return JSON (`Value`, `JsonObject`), each with a doc comment that
/// says why it is JSON.
#[test]
fn the_hosts_api_is_typed() {
    let mut json = Vec::new();
    for (rel, text) in workspace_sources() {
        if !rel.starts_with("ahp/") || rel.ends_with("_tests.rs") {
            continue;
        }
        let text = product::product(text);
        let lines: Vec<&str> = text.lines().collect();
        for (_, sig, i) in signatures(&text) {
            // `pub` to the crate's users: not `pub(crate)`, not `pub(super)`.
            let head = lines[i].trim_start();
            if !(head.starts_with("pub fn ") || head.starts_with("pub async fn ")) {
                continue;
            }
            if !(sig.contains("Value") || sig.contains("JsonObject") || sig.contains("serde_json"))
            {
                continue;
            }
            let doc: Vec<&str> = lines[..i]
                .iter()
                .rev()
                .take_while(|l| {
                    l.trim_start().starts_with("///") || l.trim_start().starts_with("#[")
                })
                .copied()
                .collect();
            let says_why = doc.iter().any(|l| l.contains("JSON"));
            json.push(format!("{rel}: {} (says why: {says_why})", sig.trim()));
        }
    }
    assert!(
        json.len() < 5,
        "pub fns with JSON in the host:\n{}",
        json.join("\n")
    );
    let unexplained: Vec<&String> = json
        .iter()
        .filter(|l| l.ends_with("(says why: false)"))
        .collect();
    assert!(
        unexplained.is_empty(),
        "no comment says why it is JSON:\n{unexplained:?}"
    );
}
