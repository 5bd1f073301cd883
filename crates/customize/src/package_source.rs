//! Where a package's files come from: a disk folder ([`super::DiskSource`]),
//! bytes in memory ([`MemorySource`]), or a client's files over AHP (the
//! bridge implements [`PackageSource`] over `resourceList`/`resourceRead`).
//! Paths are relative to the package root, `/`-separated, `""` for the root.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;

/// A boxed future that may cross threads, so the trait stays object safe
/// without an `async_trait` dependency.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a directory entry is, as the source sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Directory,
    /// A link the source will not follow: it leads outside the package, or
    /// nowhere. A link that stays inside is reported as what it leads to.
    Symlink,
    /// A socket, FIFO or device: never read.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceEntry {
    pub name: String,
    pub kind: EntryKind,
}

/// Why a source could not list or read a path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error("not found")]
    NotFound,
    #[error("leads outside the package")]
    Outside,
    #[error("not a regular file")]
    NotAFile,
    #[error("not a directory")]
    NotADirectory,
    /// Refused, not truncated; `size` when the source knew it up front.
    #[error("larger than {max} bytes{}", size.map(|s| format!(" ({s} bytes)")).unwrap_or_default())]
    TooLarge { size: Option<u64>, max: u64 },
    /// A directory with more entries than the caller would take.
    #[error("more than {max} entries")]
    TooMany { max: usize },
    /// Anything else, said by the source (an OS error, a peer's answer).
    #[error("{0}")]
    Failed(String),
}

/// Where package files come from. Implementations copy `rel` into the
/// future they return (it borrows only `self`).
pub trait PackageSource: Send + Sync {
    /// The entries of the directory at `rel`, at most `max` of them: more is
    /// [`SourceError::TooMany`], so a huge directory is refused without
    /// being listed whole where the source can help it.
    fn list(&self, rel: &str, max: usize) -> BoxFuture<'_, Result<Vec<SourceEntry>, SourceError>>;

    /// The bytes of the regular file at `rel`; over `max` bytes is
    /// [`SourceError::TooLarge`], found without reading them all where the
    /// source can help it.
    fn read(&self, rel: &str, max: u64) -> BoxFuture<'_, Result<Vec<u8>, SourceError>>;
}

/// Files held in memory: for tests, and for packages that arrive whole.
/// Folders are implied by the paths of the files in them.
#[derive(Debug, Clone, Default)]
pub struct MemorySource {
    files: BTreeMap<String, Vec<u8>>,
    links: BTreeSet<String>,
}

impl MemorySource {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the file at `rel` (its folders come with it).
    pub fn file(mut self, rel: &str, bytes: impl Into<Vec<u8>>) -> Self {
        self.files.insert(rel.to_owned(), bytes.into());
        self
    }

    /// Adds a link at `rel` that leads outside: listed, never read.
    pub fn outside_link(mut self, rel: &str) -> Self {
        self.links.insert(rel.to_owned());
        self
    }

    fn entries(&self, rel: &str) -> Option<Vec<SourceEntry>> {
        let prefix = if rel.is_empty() {
            String::new()
        } else {
            format!("{rel}/")
        };
        let mut found: BTreeMap<String, EntryKind> = BTreeMap::new();
        let paths = self.files.keys().map(|p| (p, false));
        for (path, link) in paths.chain(self.links.iter().map(|p| (p, true))) {
            let Some(rest) = path.strip_prefix(&prefix) else {
                continue;
            };
            let kind = match rest.split_once('/') {
                Some(_) => EntryKind::Directory,
                None if link => EntryKind::Symlink,
                None => EntryKind::File,
            };
            let name = rest.split('/').next().unwrap_or_default();
            found.insert(name.to_owned(), kind);
        }
        (!found.is_empty() || rel.is_empty()).then(|| {
            found
                .into_iter()
                .map(|(name, kind)| SourceEntry { name, kind })
                .collect()
        })
    }
}

impl PackageSource for MemorySource {
    fn list(&self, rel: &str, max: usize) -> BoxFuture<'_, Result<Vec<SourceEntry>, SourceError>> {
        let answer = if self.files.contains_key(rel) {
            Err(SourceError::NotADirectory)
        } else {
            match self.entries(rel) {
                Some(e) if e.len() > max => Err(SourceError::TooMany { max }),
                Some(e) => Ok(e),
                None => Err(SourceError::NotFound),
            }
        };
        Box::pin(async move { answer })
    }

    fn read(&self, rel: &str, max: u64) -> BoxFuture<'_, Result<Vec<u8>, SourceError>> {
        let answer = match self.files.get(rel) {
            Some(b) if b.len() as u64 > max => Err(SourceError::TooLarge {
                size: Some(b.len() as u64),
                max,
            }),
            Some(b) => Ok(b.clone()),
            None if self.links.contains(rel) => Err(SourceError::Outside),
            None => Err(SourceError::NotFound),
        };
        Box::pin(async move { answer })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_lists_folders_implied_by_files() {
        let s = MemorySource::new()
            .file("plugin.json", "{}")
            .file("skills/a/SKILL.md", "x")
            .outside_link("skills/escape");
        let root = s.list("", 10).await.unwrap();
        assert_eq!(
            root,
            vec![
                SourceEntry {
                    name: "plugin.json".into(),
                    kind: EntryKind::File
                },
                SourceEntry {
                    name: "skills".into(),
                    kind: EntryKind::Directory
                },
            ]
        );
        let skills = s.list("skills", 10).await.unwrap();
        assert_eq!(skills[1].kind, EntryKind::Symlink);
        assert_eq!(s.list("nope", 10).await, Err(SourceError::NotFound));
        assert_eq!(
            s.list("plugin.json", 10).await,
            Err(SourceError::NotADirectory)
        );
        assert_eq!(
            s.list("skills", 1).await,
            Err(SourceError::TooMany { max: 1 })
        );
    }

    #[tokio::test]
    async fn memory_refuses_what_is_over_the_bound() {
        let s = MemorySource::new().file("big", vec![0u8; 10]);
        assert_eq!(
            s.read("big", 9).await,
            Err(SourceError::TooLarge {
                size: Some(10),
                max: 9
            })
        );
        assert_eq!(s.read("big", 10).await.unwrap().len(), 10);
    }
}
