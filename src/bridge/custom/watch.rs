//! Watches the host's customization folders and says when they changed
//! (after a short quiet spell, so an editor's burst of writes is one
//! change). What a change leads to is the bridge's
//! (`src/bridge/customizing.rs`): the containers are read again.

use std::path::PathBuf;
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tracing::{debug, warn};

/// How long the folders must be quiet before a change is said.
const QUIET: Duration = Duration::from_millis(300);

/// The folders watched; dropping it stops the watcher.
pub struct FolderWatch {
    _watcher: RecommendedWatcher,
    events: mpsc::UnboundedReceiver<()>,
}

impl FolderWatch {
    /// Watches `paths` (each that can be watched; the others are logged).
    /// `None` when there is nothing to watch or no watcher can be made.
    pub fn start(paths: &[PathBuf]) -> Option<Self> {
        if paths.is_empty() {
            return None;
        }
        let (tx, events) = mpsc::unbounded_channel();
        let made =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
                Ok(e) if !e.kind.is_access() => {
                    let _ = tx.send(());
                }
                Ok(_) => {}
                Err(e) => debug!("customization watcher: {e}"),
            });
        let mut watcher = match made {
            Ok(w) => w,
            Err(e) => {
                warn!("customization folders are not watched: {e}");
                return None;
            }
        };
        for p in paths {
            if let Err(e) = watcher.watch(p, RecursiveMode::Recursive) {
                warn!(path = %p.display(), "customization folder not watched: {e}");
            }
        }
        Some(Self {
            _watcher: watcher,
            events,
        })
    }

    /// Waits for the next change, settled; false once the watcher is gone.
    pub async fn changed(&mut self) -> bool {
        if self.events.recv().await.is_none() {
            return false;
        }
        while let Ok(Some(())) = tokio::time::timeout(QUIET, self.events.recv()).await {}
        true
    }
}
