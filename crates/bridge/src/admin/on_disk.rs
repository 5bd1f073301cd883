//! Whether the config on disk is the one in force. A reload that is
//! refused (a module set that fails the strict check, a bad key) changes
//! nothing, so the bridge serves on with the last good config: correct,
//! but an operator must be able to see that the file they edited is not in
//! force without reading the log. `/healthz` and `/readyz` say so, naming
//! the file (neither fails for it: the bridge serves as before).

use std::sync::Mutex;

/// The last reload's refusal, until a reload succeeds.
#[derive(Debug, Default)]
pub struct OnDisk {
    refused: Mutex<Option<String>>,
}

impl OnDisk {
    /// Why the file on disk is not in force, if it is not: the file and
    /// the first line of the refusal.
    pub fn refused(&self) -> Option<String> {
        self.refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// A reload of `file` was refused for `why`.
    pub fn refuse(&self, file: &std::path::Path, why: &str) {
        let first = why.lines().next().unwrap_or(why);
        let said = format!(
            "{} is refused, the last good config serves: {first}",
            file.display()
        );
        *self.refused.lock().unwrap_or_else(|p| p.into_inner()) = Some(said);
    }

    /// A reload succeeded: the file is in force.
    pub fn in_force(&self) {
        *self.refused.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}
