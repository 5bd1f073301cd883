//! Watches folders and says when something in them changed (after a short
//! quiet spell, so an editor's burst of writes, or a certificate and its key
//! written one after the other, is one change). What a change leads to is
//! the watcher's owner's: the customization folders are read again
//! (`crates/bridge/src/bridge/customizing.rs`), a certificate reloaded
//! (`crates/ahp/src/net/tls.rs`), the config file and its Rego files reloaded
//! (`crates/bridge/src/reload.rs`). The last two watch only their own files in the
//! folders ([`Watched`]): a neighbour written all the time would otherwise
//! keep the quiet spell from ever ending.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tracing::{debug, warn};

/// How long the folders must be quiet before a change is said.
const QUIET: Duration = Duration::from_millis(300);

/// The entries a Kubernetes ConfigMap or Secret mount re-points on an
/// update (`..data_tmp` renamed over `..data`); the mounted files are links
/// through `..data`, so their own names see no event then.
const MOUNT_ENTRIES: [&str; 2] = ["..data", "..data_tmp"];

/// The entries of some folders that count as a change: files by name, and
/// in some folders every file with one of some extensions (a folder or a
/// glob of Rego modules, where a module added counts too), and in each
/// folder its mount's `..data`. Anything else in those folders (a log or an
/// audit log beside the config file, written several times a second) is
/// not a change.
#[derive(Debug, Clone, Default)]
pub struct Watched {
    folders: BTreeMap<PathBuf, Entries>,
}

#[derive(Debug, Clone, Default)]
struct Entries {
    names: BTreeSet<OsString>,
    extensions: BTreeSet<OsString>,
}

impl Watched {
    /// `files`, each by its name in its folder.
    pub fn files(files: &[PathBuf]) -> Self {
        let mut w = Self::default();
        for f in files {
            w.file(f);
        }
        w
    }

    /// `path` by its name in its folder.
    pub fn file(&mut self, path: &Path) {
        if let Some(name) = path.file_name() {
            let entries = self.folders.entry(folder_of(path)).or_default();
            entries.names.insert(name.to_owned());
        }
    }

    /// Every file of `folder` whose name ends in `.EXT`, for each of `extensions`.
    pub fn any_in(&mut self, folder: &Path, extensions: &[&str]) {
        let entries = self.folders.entry(folder.to_owned()).or_default();
        entries
            .extensions
            .extend(extensions.iter().map(OsString::from));
    }

    /// The folders to watch, each once.
    pub fn folders(&self) -> Vec<PathBuf> {
        self.folders.keys().cloned().collect()
    }

    /// Whether an event on `path` (an entry of a watched folder, as the
    /// watcher names it: the folder joined with the entry's name) counts.
    pub fn counts(&self, path: &Path) -> bool {
        let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
            return false;
        };
        // A bare name's folder is ".", as `folder_of` says.
        let folder = if folder.as_os_str().is_empty() {
            Path::new(".")
        } else {
            folder
        };
        let Some(entries) = self.folders.get(folder) else {
            return false;
        };
        MOUNT_ENTRIES.iter().any(|m| name == *m)
            || entries.names.contains(name)
            || path
                .extension()
                .is_some_and(|x| entries.extensions.contains(x))
    }
}

/// The folder holding `file` ("." for a bare name).
fn folder_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// The folders watched; dropping it stops the watcher.
pub struct FolderWatch {
    _watcher: RecommendedWatcher,
    events: mpsc::UnboundedReceiver<()>,
}

impl FolderWatch {
    /// Watches `paths` and below (each that can be watched; the others are
    /// logged): any entry's change counts. `None` when there is nothing to
    /// watch or no watcher can be made.
    pub fn start(paths: &[PathBuf]) -> Option<Self> {
        Self::start_with(paths, RecursiveMode::Recursive, "customization", None)
    }

    /// Watches the folders of `watched` themselves, not below: one of its
    /// files written, created, renamed over or re-linked.
    pub fn files(watched: &Watched, what: &'static str) -> Option<Self> {
        let folders = watched.folders();
        let only = Some(watched.clone());
        Self::start_with(&folders, RecursiveMode::NonRecursive, what, only)
    }

    fn start_with(
        paths: &[PathBuf],
        mode: RecursiveMode,
        what: &'static str,
        only: Option<Watched>,
    ) -> Option<Self> {
        if paths.is_empty() {
            return None;
        }
        let (tx, events) = mpsc::unbounded_channel();
        let counts = move |e: &notify::Event| {
            // Events were dropped (the kernel's queue overflowed): any of
            // them may have been ours.
            e.need_rescan()
                || (!e.kind.is_access()
                    && only
                        .as_ref()
                        .is_none_or(|w| e.paths.iter().any(|p| w.counts(p))))
        };
        let made =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
                Ok(e) if counts(&e) => {
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

/// Calls `on_change` after each settled change of `watched`, and every
/// `poll` besides (a change the folders' events missed: a network file
/// system, a watcher that could not be made), until `stop` or until
/// `on_change` returns false (its owner is gone).
pub fn watch_files(
    watched: Watched,
    poll: Duration,
    what: &'static str,
    stop: tokio_util::sync::CancellationToken,
    mut on_change: impl FnMut() -> bool + Send + 'static,
) {
    tokio::spawn(async move {
        let mut watch = FolderWatch::files(&watched, what);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_watched_entries_count() {
        let mut w = Watched::files(&["/etc/bridge/bridge.toml".into(), "bare.toml".into()]);
        w.any_in(Path::new("/etc/policy"), &["rego"]);
        let counts = |p: &str| w.counts(Path::new(p));
        assert!(counts("/etc/bridge/bridge.toml"));
        assert!(counts("/etc/bridge/..data"), "a mount's swap");
        assert!(counts("/etc/bridge/..data_tmp"));
        assert!(counts("./bare.toml"));
        assert!(counts("/etc/policy/added.rego"), "a module added");
        assert!(!counts("/etc/bridge/audit.jsonl"), "a neighbour");
        assert!(!counts("/etc/bridge/.bridge.toml.swp"));
        assert!(!counts("/etc/policy/notes.txt"));
        assert!(!counts("/etc/other/bridge.toml"), "the same name elsewhere");
        assert!(!counts("/etc/bridge"), "the folder itself");
    }
}
