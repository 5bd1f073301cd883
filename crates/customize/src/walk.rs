//! Reading a whole package, within [`Bounds`]: every entry counted as it is
//! listed, every file's size checked before its bytes are taken, and the
//! walk stopped at the first bound passed (a package over a bound is
//! refused whole, so there is no point reading on).

use std::collections::{BTreeMap, BTreeSet};

use super::names::is_safe_file_name;
use super::package_source::{EntryKind, PackageSource, SourceError};
use super::Bounds;

/// Folders never read: version control keeps thousands of files no
/// customization uses.
const SKIPPED_FOLDERS: [&str; 3] = [".git", ".hg", ".svn"];

/// What a walk found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Tree {
    /// Every regular file read, by path.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Every folder found, by path (the root, `""`, included).
    pub dirs: BTreeSet<String>,
    /// Entries that could not be read, by path, and why: a symlink leading
    /// outside, a special file, a name unsafe on disk, a read that failed.
    pub unreadable: BTreeMap<String, String>,
}

impl Tree {
    /// Whether `rel` is something in the tree (a file, a folder, or an
    /// entry that could not be read).
    pub(crate) fn has(&self, rel: &str) -> bool {
        self.files.contains_key(rel) || self.dirs.contains(rel) || self.unreadable.contains_key(rel)
    }

    /// The names directly inside the folder `dir` (files, folders, and
    /// unreadable entries), sorted.
    pub(crate) fn names_in(&self, dir: &str) -> BTreeSet<String> {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let all = self
            .files
            .keys()
            .chain(self.dirs.iter())
            .chain(self.unreadable.keys());
        all.filter_map(|p| p.strip_prefix(&prefix))
            .filter(|rest| !rest.is_empty() && !rest.contains('/'))
            .map(str::to_owned)
            .collect()
    }
}

/// Why a package could not be walked at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WalkError {
    /// Over a bound; the message names the [`Bounds`] field.
    #[error("{0}")]
    Bound(String),
    /// The root itself could not be listed.
    #[error("the package cannot be listed: {0}")]
    Root(SourceError),
}

/// Every file of the package at `source`, or the first bound it passes.
pub(crate) async fn walk(source: &dyn PackageSource, bounds: &Bounds) -> Result<Tree, WalkError> {
    let mut walk = Walk {
        source,
        bounds,
        tree: Tree::default(),
        entries: 0,
        bytes: 0,
    };
    let mut pending = vec![(String::new(), 0usize)];
    while let Some((dir, depth)) = pending.pop() {
        let found = walk.folder(&dir, depth).await?;
        pending.extend(found.into_iter().rev().map(|d| (d, depth + 1)));
    }
    Ok(walk.tree)
}

struct Walk<'a> {
    source: &'a dyn PackageSource,
    bounds: &'a Bounds,
    tree: Tree,
    /// Entries listed so far, against `max_files`.
    entries: usize,
    /// Bytes read so far, against `max_bytes`.
    bytes: u64,
}

impl Walk<'_> {
    /// Lists `dir` (whose entries lie `depth` folders deep), reads its
    /// files, and returns its folders to walk next.
    async fn folder(&mut self, dir: &str, depth: usize) -> Result<Vec<String>, WalkError> {
        let Some(entries) = self.list(dir, depth).await? else {
            return Ok(Vec::new());
        };
        self.tree.dirs.insert(dir.to_owned());
        let mut folders = Vec::new();
        for entry in entries {
            let rel = join(dir, &entry.name);
            if !is_safe_file_name(&entry.name) {
                self.unreadable(&rel, "a name that is not safe as a file name");
                continue;
            }
            match entry.kind {
                EntryKind::Directory if SKIPPED_FOLDERS.contains(&entry.name.as_str()) => {}
                EntryKind::Directory => folders.push(rel),
                EntryKind::File => self.file(&rel).await?,
                EntryKind::Symlink => {
                    self.unreadable(&rel, "a symlink leading outside the package")
                }
                EntryKind::Other => self.unreadable(&rel, "not a regular file"),
            }
        }
        Ok(folders)
    }

    /// The entries of `dir`, counted against `max_files`; `None` when a
    /// folder other than the root cannot be listed (it is noted instead).
    async fn list(
        &mut self,
        dir: &str,
        depth: usize,
    ) -> Result<Option<Vec<super::package_source::SourceEntry>>, WalkError> {
        let room = self.bounds.max_files - self.entries;
        match self.source.list(dir, room).await {
            Ok(entries) if entries.is_empty() => Ok(Some(entries)),
            Ok(_) if depth > self.bounds.max_depth => Err(WalkError::Bound(format!(
                "{dir}: deeper than {} folders (max_depth)",
                self.bounds.max_depth
            ))),
            Ok(entries) => {
                self.entries += entries.len();
                Ok(Some(entries))
            }
            Err(SourceError::TooMany { .. }) => Err(self.too_many()),
            Err(e) if dir.is_empty() => Err(WalkError::Root(e)),
            Err(e) => {
                self.unreadable(dir, &e.to_string());
                Ok(None)
            }
        }
    }

    fn too_many(&self) -> WalkError {
        WalkError::Bound(format!(
            "more than {} files and folders (max_files)",
            self.bounds.max_files
        ))
    }

    async fn file(&mut self, rel: &str) -> Result<(), WalkError> {
        let left = self.bounds.max_bytes - self.bytes;
        let max = self.bounds.max_file_bytes.min(left);
        match self.source.read(rel, max).await {
            Ok(bytes) => {
                self.bytes += bytes.len() as u64;
                self.tree.files.insert(rel.to_owned(), bytes);
                Ok(())
            }
            Err(SourceError::TooLarge { size, .. }) => Err(self.too_large(rel, size, max)),
            Err(e) => {
                self.unreadable(rel, &e.to_string());
                Ok(())
            }
        }
    }

    /// Which bound a refused file passed: its own size, or the total.
    fn too_large(&self, rel: &str, size: Option<u64>, max: u64) -> WalkError {
        let over_its_own = size.map_or(max == self.bounds.max_file_bytes, |s| {
            s > self.bounds.max_file_bytes
        });
        WalkError::Bound(if over_its_own {
            format!(
                "{rel}: larger than {} bytes (max_file_bytes)",
                self.bounds.max_file_bytes
            )
        } else {
            format!(
                "more than {} bytes in all (max_bytes), at {rel}",
                self.bounds.max_bytes
            )
        })
    }

    fn unreadable(&mut self, rel: &str, why: &str) {
        self.tree.unreadable.insert(rel.to_owned(), why.to_owned());
    }
}

pub(crate) fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() || name.is_empty() {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::package_source::{BoxFuture, MemorySource, SourceEntry};

    fn small() -> Bounds {
        Bounds {
            max_files: 10,
            max_bytes: 100,
            max_file_bytes: 40,
            max_depth: 2,
        }
    }

    #[tokio::test]
    async fn everything_within_the_bounds_is_read() {
        let s = MemorySource::new()
            .file("plugin.json", "{}")
            .file("skills/a/SKILL.md", "x")
            .file(".git/HEAD", "ref")
            .outside_link("skills/out");
        let tree = walk(&s, &small()).await.unwrap();
        assert_eq!(
            tree.files.keys().collect::<Vec<_>>(),
            ["plugin.json", "skills/a/SKILL.md"]
        );
        assert!(tree.dirs.contains("skills/a") && !tree.dirs.contains(".git"));
        assert_eq!(
            tree.unreadable.get("skills/out").map(String::as_str),
            Some("a symlink leading outside the package")
        );
        assert_eq!(
            tree.names_in("skills"),
            ["a", "out"].map(String::from).into()
        );
    }

    #[tokio::test]
    async fn each_bound_is_named_when_passed() {
        let deep = MemorySource::new().file("a/b/c/d", "x");
        let err = walk(&deep, &small()).await.unwrap_err();
        assert_eq!(
            err,
            WalkError::Bound("a/b/c: deeper than 2 folders (max_depth)".into())
        );
        let big = MemorySource::new().file("big", vec![b'x'; 41]);
        let err = walk(&big, &small()).await.unwrap_err();
        assert_eq!(
            err,
            WalkError::Bound("big: larger than 40 bytes (max_file_bytes)".into())
        );
        let total = (0..3).fold(MemorySource::new(), |s, i| {
            s.file(&format!("f{i}"), vec![b'x'; 40])
        });
        let err = walk(&total, &small()).await.unwrap_err();
        assert_eq!(
            err,
            WalkError::Bound("more than 100 bytes in all (max_bytes), at f2".into())
        );
        let many = (0..11).fold(MemorySource::new(), |s, i| s.file(&format!("d/f{i}"), ""));
        let err = walk(&many, &small()).await.unwrap_err();
        assert_eq!(
            err,
            WalkError::Bound("more than 10 files and folders (max_files)".into())
        );
        let just = (0..9).fold(MemorySource::new(), |s, i| s.file(&format!("d/f{i}"), ""));
        assert_eq!(walk(&just, &small()).await.unwrap().files.len(), 9);
    }

    #[tokio::test]
    async fn unsafe_names_from_a_source_are_never_used() {
        struct Lying;
        impl PackageSource for Lying {
            fn list(
                &self,
                _: &str,
                _: usize,
            ) -> BoxFuture<'_, Result<Vec<SourceEntry>, SourceError>> {
                let names = ["..", "a/b", "ok", "\u{7}bell"];
                let entries = names
                    .map(|n| SourceEntry {
                        name: n.into(),
                        kind: EntryKind::File,
                    })
                    .to_vec();
                Box::pin(async move { Ok(entries) })
            }
            fn read(&self, _: &str, _: u64) -> BoxFuture<'_, Result<Vec<u8>, SourceError>> {
                Box::pin(async { Ok(b"x".to_vec()) })
            }
        }
        let tree = walk(&Lying, &small()).await.unwrap();
        assert_eq!(tree.files.keys().collect::<Vec<_>>(), ["ok"]);
        assert_eq!(tree.unreadable.len(), 3);
    }

    #[tokio::test]
    async fn a_root_that_cannot_be_listed_is_said_so() {
        let s = MemorySource::new().file("x", "");
        let err = walk(&Sub(&s, "nope"), &small()).await.unwrap_err();
        assert_eq!(err, WalkError::Root(SourceError::NotFound));
    }

    /// A source seen from one of its folders.
    struct Sub<'a>(&'a MemorySource, &'a str);
    impl PackageSource for Sub<'_> {
        fn list(
            &self,
            rel: &str,
            max: usize,
        ) -> BoxFuture<'_, Result<Vec<SourceEntry>, SourceError>> {
            self.0.list(&join(self.1, rel), max)
        }
        fn read(&self, rel: &str, max: u64) -> BoxFuture<'_, Result<Vec<u8>, SourceError>> {
            self.0.read(&join(self.1, rel), max)
        }
    }
}
