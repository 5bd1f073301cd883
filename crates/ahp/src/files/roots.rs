//! Read-only files under a set of roots (the working directories a caller
//! may read). A path is served only when, with every symlink and `..`
//! resolved, it lies under a root; only regular files are read, and only up
//! to a bound; a listing leaves out entries that lead outside or are special
//! files. Blocking filesystem code with no host state: the host runs it off
//! the async threads, under a deadline (see [`super`]).

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Why a file request failed; the host maps each to an AHP error code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileError {
    /// Inside the roots, and not there (NotFound, -32008).
    NotFound(String),
    /// Outside the roots, a special file, or refused by the OS (PermissionDenied, -32009).
    Denied(String),
    /// A file over the read bound (PermissionDenied, -32009: refused, never truncated).
    TooLarge { size: u64, limit: u64 },
    /// Not a usable file URI, or the wrong kind of entry for the request (InvalidParams).
    Invalid(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    File,
    Directory,
    Symlink,
}

impl FileKind {
    /// The name AHP gives it (`DirectoryEntry.type`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FileKind::File => "file",
            FileKind::Directory => "directory",
            FileKind::Symlink => "symlink",
        }
    }

    /// As `ResourceResolveResult.type`.
    pub(crate) fn resource_type(self) -> ahp_types::commands::ResourceType {
        use ahp_types::commands::ResourceType as T;
        match self {
            FileKind::File => T::File,
            FileKind::Directory => T::Directory,
            FileKind::Symlink => T::Symlink,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileEntry {
    pub name: String,
    pub kind: FileKind,
}

/// What `resolve` finds.
#[derive(Debug, Clone)]
pub(crate) struct Stat {
    pub path: PathBuf,
    pub kind: FileKind,
    pub size: u64,
    pub modified: Option<SystemTime>,
}

/// The most entries a directory may have to be listed (a listing is one message).
pub(crate) const MAX_LIST_ENTRIES: usize = 10_000;

fn outside() -> FileError {
    FileError::Denied("outside the working directories this principal may read".into())
}

/// An OS error on a path already found inside the roots.
fn os(e: io::Error) -> FileError {
    match e.kind() {
        io::ErrorKind::NotFound => FileError::NotFound("no such file or directory".into()),
        _ if e.raw_os_error() == Some(libc::ELOOP) => {
            FileError::Denied("the path changed into a symlink while it was opened".into())
        }
        _ => FileError::Denied(e.to_string()),
    }
}

/// The directories files may be read from, resolved.
#[derive(Debug, Clone, Default)]
pub(crate) struct Roots(Vec<PathBuf>);

impl Roots {
    /// Each directory resolved (symlinks, `..`); ones that do not exist or
    /// are not directories are left out.
    pub(crate) fn new(dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        let mut roots: Vec<PathBuf> = dirs
            .into_iter()
            .filter_map(|d| fs::canonicalize(d).ok())
            .filter(|d| d.is_dir())
            .collect();
        roots.sort();
        roots.dedup();
        Self(roots)
    }

    pub(crate) fn dirs(&self) -> &[PathBuf] {
        &self.0
    }

    fn holds(&self, resolved: &Path) -> bool {
        self.0.iter().any(|r| resolved.starts_with(r))
    }

    /// `path` resolved, if it exists and lies under a root. Whether a path
    /// that does not exist would lie inside is decided by its deepest
    /// ancestor that does, resolved the same way: outside, a missing file
    /// is refused exactly like a present one, so nothing about it leaks.
    pub(crate) fn confine(&self, path: &Path) -> Result<PathBuf, FileError> {
        if !path.is_absolute() {
            return Err(FileError::Invalid("not an absolute path".into()));
        }
        match fs::canonicalize(path) {
            Ok(c) if self.holds(&c) => Ok(c),
            Ok(_) => Err(outside()),
            Err(e) => {
                let inside = path
                    .ancestors()
                    .skip(1)
                    .find_map(|a| fs::canonicalize(a).ok())
                    .is_some_and(|a| self.holds(&a));
                let missing =
                    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR);
                Err(match (inside, missing) {
                    (false, _) => outside(),
                    (true, true) => FileError::NotFound("no such file or directory".into()),
                    (true, false) => FileError::Denied(format!("cannot resolve: {e}")),
                })
            }
        }
    }

    /// The bytes of a regular file inside, at most `limit` of them; a larger
    /// file is refused, not cut.
    pub(crate) fn read(&self, path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
        let c = self.confine(path)?;
        let meta = fs::metadata(&c).map_err(os)?;
        if meta.is_dir() {
            return Err(FileError::Invalid(
                "a directory; list it with resourceList".into(),
            ));
        }
        if !meta.is_file() {
            return Err(FileError::Denied("not a regular file".into()));
        }
        if meta.len() > limit {
            return Err(FileError::TooLarge {
                size: meta.len(),
                limit,
            });
        }
        // The path may change between the check and the open: O_NOFOLLOW
        // refuses a last component turned symlink, O_NONBLOCK keeps a FIFO
        // from blocking the open, and what was opened is checked again.
        let f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&c)
            .map_err(os)?;
        self.check_opened(&f)?;
        let mut buf = Vec::with_capacity(meta.len() as usize);
        f.take(limit + 1).read_to_end(&mut buf).map_err(os)?;
        if buf.len() as u64 > limit {
            return Err(FileError::TooLarge {
                size: buf.len() as u64,
                limit,
            });
        }
        Ok(buf)
    }

    /// The file really opened (the kernel's name for it) is a regular file inside.
    fn check_opened(&self, f: &File) -> Result<(), FileError> {
        let real = fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd()))
            .map_err(|e| FileError::Denied(format!("cannot check the opened file: {e}")))?;
        if !self.holds(&real) {
            return Err(outside());
        }
        let meta = f.metadata().map_err(os)?;
        if !meta.is_file() {
            return Err(FileError::Denied("not a regular file".into()));
        }
        Ok(())
    }

    /// The entries of a directory inside, by name; entries that lead outside
    /// (symlinks), are broken, special, or not named in UTF-8 are left out.
    pub(crate) fn list(&self, path: &Path) -> Result<Vec<FileEntry>, FileError> {
        let c = self.confine(path)?;
        if !c.is_dir() {
            return Err(FileError::Invalid("not a directory".into()));
        }
        let mut out = Vec::new();
        for (n, entry) in fs::read_dir(&c).map_err(os)?.enumerate() {
            if n >= MAX_LIST_ENTRIES {
                return Err(FileError::Denied(format!(
                    "more than {MAX_LIST_ENTRIES} entries; too many to list"
                )));
            }
            let Ok(entry) = entry else { continue };
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if let Some(kind) = self.kind_inside(&c.join(&name)) {
                out.push(FileEntry { name, kind });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// A directory entry seen through symlinks: `None` when it leads
    /// outside, is broken, or is neither a file nor a directory.
    fn kind_inside(&self, p: &Path) -> Option<FileKind> {
        let mut meta = fs::symlink_metadata(p).ok()?;
        if meta.file_type().is_symlink() {
            let target = fs::canonicalize(p).ok()?;
            if !self.holds(&target) {
                return None;
            }
            meta = fs::metadata(&target).ok()?;
        }
        if meta.is_dir() {
            Some(FileKind::Directory)
        } else if meta.is_file() {
            Some(FileKind::File)
        } else {
            None
        }
    }

    /// `stat` and `realpath` of a path inside; with `follow` false, a symlink
    /// is reported as one (its directory must be inside; where it points is
    /// not said).
    pub(crate) fn resolve(&self, path: &Path, follow: bool) -> Result<Stat, FileError> {
        let is_link = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        if !follow && is_link {
            let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                return Err(outside());
            };
            let p = self.confine(parent)?.join(name);
            let meta = fs::symlink_metadata(&p).map_err(os)?;
            return Ok(Stat {
                path: p,
                kind: FileKind::Symlink,
                size: meta.len(),
                modified: meta.modified().ok(),
            });
        }
        let c = self.confine(path)?;
        let meta = fs::metadata(&c).map_err(os)?;
        let kind = if meta.is_dir() {
            FileKind::Directory
        } else if meta.is_file() {
            FileKind::File
        } else {
            return Err(FileError::Denied(
                "neither a regular file nor a directory".into(),
            ));
        };
        Ok(Stat {
            path: c,
            kind,
            size: meta.len(),
            modified: meta.modified().ok(),
        })
    }
}

/// A content type from the file name, for the common cases; `None` otherwise.
pub(crate) fn content_type(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "txt" | "log" => "text/plain",
        "md" => "text/markdown",
        "json" => "application/json",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" | "mjs" => "text/javascript",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        _ => return None,
    })
}

#[cfg(test)]
#[path = "roots_tests.rs"]
mod tests;
