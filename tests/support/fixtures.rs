//! The data files in `fixtures/`: the scripted model's conversations (the
//! fake runtime's scenarios are loaded by `fake_scenario`).

use std::path::{Path, PathBuf};

use ahp_bridge_join::Conversation;
use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;

/// `fixtures/KIND/NAME.json`, from the crate root (not the working directory).
pub(crate) fn fixture_path(kind: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(kind)
        .join(format!("{name}.json"))
}

/// The replies of the scripted conversation `fixtures/model/NAME.json`;
/// panics naming the file and the bad entry if it does not parse.
pub(crate) fn conversation(name: &str) -> Vec<Reply> {
    Conversation::load(&fixture_path("model", name))
        .unwrap_or_else(|e| panic!("{e}"))
        .replies
}

/// Queues the conversation `fixtures/model/NAME.json` on `model`.
pub(crate) fn script(model: &ScriptedModel, name: &str) {
    model.push_all(conversation(name));
}
