//! Watches folders and says when something in them changed (after a short
//! quiet spell, so an editor's burst of writes, or a certificate and its key
//! written one after the other, is one change). What a change leads to is
//! the watcher's owner's: the customization folders are read again
//! (`src/bridge/customizing.rs`), a certificate reloaded
//! (`src/ahp/net/tls.rs`).

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
    /// Watches `paths` and below (each that can be watched; the others are
    /// logged). `None` when there is nothing to watch or no watcher can be made.
    pub fn start(paths: &[PathBuf]) -> Option<Self> {
        Self::start_with(paths, RecursiveMode::Recursive, "customization")
    }

    /// Watches the folders `paths` themselves, not below: a file in them
    /// written, created, renamed over or re-linked.
    pub fn files_in(paths: &[PathBuf], what: &'static str) -> Option<Self> {
        Self::start_with(paths, RecursiveMode::NonRecursive, what)
    }

    fn start_with(paths: &[PathBuf], mode: RecursiveMode, what: &'static str) -> Option<Self> {
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
                Err(e) => debug!("{what} watcher: {e}"),
            });
        let mut watcher = match made {
            Ok(w) => w,
            Err(e) => {
                warn!("{what} folders are not watched: {e}");
                return None;
            }
        };
        for p in paths {
            if let Err(e) = watcher.watch(p, mode) {
                warn!(path = %p.display(), "{what} folder not watched: {e}");
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

/// Calls `on_change` after each settled change in `dirs`, and every `poll`
/// besides (a change the folder's events missed: a network file system, a
/// watcher that could not be made), until `stop` or until `on_change`
/// returns false (its owner is gone).
pub fn watch_folders(
    dirs: Vec<PathBuf>,
    poll: Duration,
    what: &'static str,
    stop: tokio_util::sync::CancellationToken,
    mut on_change: impl FnMut() -> bool + Send + 'static,
) {
    tokio::spawn(async move {
        let mut watch = FolderWatch::files_in(&dirs, what);
        loop {
            let changed = async {
                match &mut watch {
                    Some(w) => matches!(
                        tokio::time::timeout(poll, w.changed()).await,
                        Err(_) | Ok(true)
                    ),
                    None => {
                        tokio::time::sleep(poll).await;
                        true
                    }
                }
            };
            let alive = tokio::select! {
                _ = stop.cancelled() => return,
                alive = changed => alive,
            };
            if !alive {
                watch = None;
            }
            if !on_change() {
                return;
            }
        }
    });
}
