//! Watches the host's customization folders: a change on disk (after a
//! short quiet spell, so an editor's burst of writes is one change) reads
//! them again, and the sessions that list a changed container get it anew.

use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::bridge::Bridge;

/// How long the folders must be quiet before they are read again.
const QUIET: Duration = Duration::from_millis(300);

/// Starts watching the folders `bridge`'s host containers come from; the
/// watcher lives as long as the bridge (its task ends when the bridge is gone).
pub fn start(bridge: &Arc<Bridge>) {
    let paths = bridge.custom.watched_paths();
    if paths.is_empty() || tokio::runtime::Handle::try_current().is_err() {
        return;
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let watcher =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(e) if !e.kind.is_access() => {
                let _ = tx.send(());
            }
            Ok(_) => {}
            Err(e) => debug!("customization watcher: {e}"),
        });
    let mut watcher = match watcher {
        Ok(w) => w,
        Err(e) => {
            warn!("customization folders are not watched: {e}");
            return;
        }
    };
    watch_each(&mut watcher, &paths);
    tokio::spawn(follow(Arc::downgrade(bridge), watcher, rx));
}

fn watch_each(watcher: &mut RecommendedWatcher, paths: &[PathBuf]) {
    for p in paths {
        if let Err(e) = watcher.watch(p, RecursiveMode::Recursive) {
            warn!(path = %p.display(), "customization folder not watched: {e}");
        }
    }
}

async fn follow(
    bridge: Weak<Bridge>,
    _watcher: RecommendedWatcher,
    mut rx: mpsc::UnboundedReceiver<()>,
) {
    while rx.recv().await.is_some() {
        // Quiet for QUIET since the last event: one change.
        while let Ok(Some(())) = tokio::time::timeout(QUIET, rx.recv()).await {}
        let Some(b) = bridge.upgrade() else { return };
        b.host_changed().await;
    }
}
