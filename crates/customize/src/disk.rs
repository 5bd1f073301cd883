//! A package on disk, confined to its root: every path is resolved (each
//! symlink and `..`) and must stay inside the resolved root; a symlink that
//! leads outside is listed as [`EntryKind::Symlink`] and never followed.
//! The filesystem work runs on tokio's blocking threads.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use super::package_source::{BoxFuture, EntryKind, PackageSource, SourceEntry, SourceError};

/// The folder at `root`, read only inside it.
#[derive(Debug, Clone)]
pub struct DiskSource {
    root: PathBuf,
}

impl DiskSource {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl PackageSource for DiskSource {
    fn list(&self, rel: &str, max: usize) -> BoxFuture<'_, Result<Vec<SourceEntry>, SourceError>> {
        let (root, rel) = (self.root.clone(), rel.to_owned());
        Box::pin(blocking(move || list(&root, &rel, max)))
    }

    fn read(&self, rel: &str, max: u64) -> BoxFuture<'_, Result<Vec<u8>, SourceError>> {
        let (root, rel) = (self.root.clone(), rel.to_owned());
        Box::pin(blocking(move || read(&root, &rel, max)))
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SourceError> + Send + 'static,
) -> Result<T, SourceError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(SourceError::Failed(format!("the read stopped: {e}"))))
}

fn os(e: io::Error) -> SourceError {
    match e.kind() {
        io::ErrorKind::NotFound => SourceError::NotFound,
        _ if e.raw_os_error() == Some(libc::ELOOP) => SourceError::Outside,
        _ => SourceError::Failed(e.to_string()),
    }
}

/// The root, resolved; it must be a directory.
fn resolved_root(root: &Path) -> Result<PathBuf, SourceError> {
    let real = fs::canonicalize(root).map_err(os)?;
    if !real.is_dir() {
        return Err(SourceError::NotADirectory);
    }
    Ok(real)
}

/// `rel` resolved under the resolved `root`, or `Outside`. Only plain
/// components are accepted, so `..` and absolute paths never get as far as
/// the filesystem.
fn confine(root: &Path, rel: &str) -> Result<PathBuf, SourceError> {
    let rel_path = Path::new(rel);
    if !rel_path
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
    {
        return Err(SourceError::Outside);
    }
    let real = fs::canonicalize(root.join(rel_path)).map_err(os)?;
    if !real.starts_with(root) {
        return Err(SourceError::Outside);
    }
    Ok(real)
}

fn list(root: &Path, rel: &str, max: usize) -> Result<Vec<SourceEntry>, SourceError> {
    let root = resolved_root(root)?;
    let dir = confine(&root, rel)?;
    if !dir.is_dir() {
        return Err(SourceError::NotADirectory);
    }
    let mut out = Vec::new();
    for entry in fs::read_dir(&dir).map_err(os)? {
        // Stop at the first entry over the bound: a huge folder is refused
        // after `max` entries, not after all of them.
        if out.len() == max {
            return Err(SourceError::TooMany { max });
        }
        let entry = entry.map_err(os)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = kind_of(&root, &entry.path());
        out.push(SourceEntry { name, kind });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// What an entry is, with a symlink reported as what it leads to when that
/// lies inside the root, and as `Symlink` (not to be followed) otherwise.
fn kind_of(root: &Path, path: &Path) -> EntryKind {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return EntryKind::Other;
    };
    if meta.file_type().is_symlink() {
        return match fs::canonicalize(path) {
            Ok(target) if target.starts_with(root) => kind_of(root, &target),
            _ => EntryKind::Symlink,
        };
    }
    if meta.is_dir() {
        EntryKind::Directory
    } else if meta.is_file() {
        EntryKind::File
    } else {
        EntryKind::Other
    }
}

fn read(root: &Path, rel: &str, max: u64) -> Result<Vec<u8>, SourceError> {
    let root = resolved_root(root)?;
    let path = confine(&root, rel)?;
    let meta = fs::metadata(&path).map_err(os)?;
    if !meta.is_file() {
        return Err(SourceError::NotAFile);
    }
    if meta.len() > max {
        return Err(SourceError::TooLarge {
            size: Some(meta.len()),
            max,
        });
    }
    // The path may change between the check and the open: O_NOFOLLOW
    // refuses a last component turned symlink, O_NONBLOCK keeps a FIFO from
    // blocking the open, and what was opened is checked again.
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .map_err(os)?;
    check_opened(&root, &file)?;
    let mut buf = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1).read_to_end(&mut buf).map_err(os)?;
    if buf.len() as u64 > max {
        return Err(SourceError::TooLarge { size: None, max });
    }
    Ok(buf)
}

/// The file really opened (the kernel's name for it) is a regular file
/// inside the root.
fn check_opened(root: &Path, file: &File) -> Result<(), SourceError> {
    let real = fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_err(|e| SourceError::Failed(format!("cannot check the opened file: {e}")))?;
    if !real.starts_with(root) {
        return Err(SourceError::Outside);
    }
    if !file.metadata().map_err(os)?.is_file() {
        return Err(SourceError::NotAFile);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tree() -> (tempfile::TempDir, DiskSource) {
        let dir = tempfile::tempdir().unwrap();
        let pkg = dir.path().join("pkg");
        fs::create_dir_all(pkg.join("skills/a")).unwrap();
        fs::write(pkg.join("skills/a/SKILL.md"), "skill").unwrap();
        fs::write(dir.path().join("secret"), "outside").unwrap();
        let source = DiskSource::new(&pkg);
        (dir, source)
    }

    #[tokio::test]
    async fn a_symlink_out_of_the_root_is_listed_as_such_and_never_read() {
        let (dir, source) = tree();
        symlink(dir.path().join("secret"), source.root().join("skills/leak")).unwrap();
        symlink(dir.path(), source.root().join("up")).unwrap();
        let skills = source.list("skills", 10).await.unwrap();
        let leak = skills.iter().find(|e| e.name == "leak").unwrap();
        assert_eq!(leak.kind, EntryKind::Symlink);
        let root = source.list("", 10).await.unwrap();
        assert_eq!(
            root.iter().find(|e| e.name == "up").unwrap().kind,
            EntryKind::Symlink
        );
        assert_eq!(
            source.read("skills/leak", 100).await,
            Err(SourceError::Outside)
        );
        assert_eq!(
            source.read("up/secret", 100).await,
            Err(SourceError::Outside)
        );
        assert_eq!(source.list("up", 100).await, Err(SourceError::Outside));
        assert_eq!(
            source.read("../secret", 100).await,
            Err(SourceError::Outside)
        );
        assert_eq!(
            source.read("/etc/passwd", 100).await,
            Err(SourceError::Outside)
        );
    }

    #[tokio::test]
    async fn a_symlink_inside_the_root_is_what_it_leads_to() {
        let (_dir, source) = tree();
        symlink("a/SKILL.md", source.root().join("skills/alias.md")).unwrap();
        symlink("skills/a", source.root().join("a-link")).unwrap();
        let skills = source.list("skills", 10).await.unwrap();
        let alias = skills.iter().find(|e| e.name == "alias.md").unwrap();
        assert_eq!(alias.kind, EntryKind::File);
        assert_eq!(source.read("skills/alias.md", 100).await.unwrap(), b"skill");
        let root = source.list("", 10).await.unwrap();
        let link = root.iter().find(|e| e.name == "a-link").unwrap();
        assert_eq!(link.kind, EntryKind::Directory);
    }

    #[tokio::test]
    async fn a_large_file_is_refused_by_its_size_without_reading_it() {
        let (_dir, source) = tree();
        let big = File::create(source.root().join("big")).unwrap();
        // Sparse: 50 MB that were never written, so a read of them all would show.
        big.set_len(50 * 1024 * 1024).unwrap();
        assert_eq!(
            source.read("big", 1024 * 1024).await,
            Err(SourceError::TooLarge {
                size: Some(50 * 1024 * 1024),
                max: 1024 * 1024
            })
        );
    }

    #[tokio::test]
    async fn a_large_folder_is_refused_at_the_bound() {
        let (_dir, source) = tree();
        for i in 0..20 {
            fs::write(source.root().join(format!("f{i}")), "").unwrap();
        }
        assert_eq!(
            source.list("", 5).await,
            Err(SourceError::TooMany { max: 5 })
        );
        assert_eq!(source.list("", 21).await.unwrap().len(), 21);
    }

    #[tokio::test]
    async fn special_files_missing_ones_and_folders_are_not_read() {
        let (_dir, source) = tree();
        let fifo = source.root().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) reads the NUL-terminated path it is given.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let root = source.list("", 10).await.unwrap();
        assert_eq!(
            root.iter().find(|e| e.name == "fifo").unwrap().kind,
            EntryKind::Other
        );
        assert_eq!(source.read("fifo", 100).await, Err(SourceError::NotAFile));
        assert_eq!(source.read("skills", 100).await, Err(SourceError::NotAFile));
        assert_eq!(source.read("nope", 100).await, Err(SourceError::NotFound));
        assert_eq!(
            source.list("skills/a/SKILL.md", 10).await,
            Err(SourceError::NotADirectory)
        );
        let gone = DiskSource::new(source.root().join("missing"));
        assert_eq!(gone.list("", 10).await, Err(SourceError::NotFound));
    }
}
