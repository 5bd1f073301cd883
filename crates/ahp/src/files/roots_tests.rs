use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;

use super::*;

fn denied() -> FileError {
    outside()
}

/// A working directory `wd` and a sibling `outside`, each with a file.
fn tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let wd = t.path().join("wd");
    let outside = t.path().join("outside");
    fs::create_dir_all(wd.join("src")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(wd.join("src/main.rs"), "fn main() {}\n").unwrap();
    fs::write(outside.join("secret.txt"), "secret").unwrap();
    (t, wd, outside)
}

#[test]
fn reads_inside_refuses_every_way_out() {
    let (_t, wd, outside) = tree();
    let roots = Roots::new([wd.clone()]);
    assert_eq!(
        roots.read(&wd.join("src/main.rs"), 1024).unwrap(),
        b"fn main() {}\n"
    );
    // `..`, an absolute path outside, a symlink to a file or a directory outside.
    symlink(outside.join("secret.txt"), wd.join("link.txt")).unwrap();
    symlink(&outside, wd.join("linkdir")).unwrap();
    for p in [
        wd.join("../outside/secret.txt"),
        wd.join("src/../../outside/secret.txt"),
        outside.join("secret.txt"),
        wd.join("link.txt"),
        wd.join("linkdir/secret.txt"),
    ] {
        assert_eq!(roots.read(&p, 1024), Err(denied()), "{p:?}");
    }
    // A symlink that stays inside is followed.
    symlink(wd.join("src/main.rs"), wd.join("inside-link.rs")).unwrap();
    assert!(roots.read(&wd.join("inside-link.rs"), 1024).is_ok());
    // Missing inside is NotFound; missing outside is refused like present outside.
    assert!(matches!(
        roots.read(&wd.join("nope.txt"), 1024),
        Err(FileError::NotFound(_))
    ));
    assert_eq!(roots.read(&outside.join("nope.txt"), 1024), Err(denied()));
    assert_eq!(
        roots.read(&wd.join("linkdir/nope.txt"), 1024),
        Err(denied())
    );
    assert!(matches!(
        roots.read(Path::new("relative.txt"), 1024),
        Err(FileError::Invalid(_))
    ));
}

#[test]
fn special_and_large_files_are_refused() {
    let (_t, wd, _) = tree();
    let roots = Roots::new([wd.clone()]);
    let fifo = wd.join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // Refused without blocking (a FIFO with no writer would block a plain open).
    assert!(matches!(roots.read(&fifo, 1024), Err(FileError::Denied(_))));
    fs::write(wd.join("big.bin"), vec![7u8; 2048]).unwrap();
    assert_eq!(
        roots.read(&wd.join("big.bin"), 1024),
        Err(FileError::TooLarge {
            size: 2048,
            limit: 1024
        })
    );
    assert_eq!(roots.read(&wd.join("big.bin"), 2048).unwrap().len(), 2048);
    assert!(matches!(
        roots.read(&wd.join("src"), 1024),
        Err(FileError::Invalid(_))
    ));
    let names: Vec<String> = roots
        .list(&wd)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert!(!names.contains(&"fifo".to_string()), "{names:?}");
}

#[test]
fn listing_leaves_out_what_leads_outside() {
    let (_t, wd, outside) = tree();
    let roots = Roots::new([wd.clone()]);
    symlink(&outside, wd.join("out")).unwrap();
    symlink(wd.join("src"), wd.join("in")).unwrap();
    symlink(wd.join("gone"), wd.join("broken")).unwrap();
    let got = roots.list(&wd).unwrap();
    assert_eq!(
        got,
        vec![
            FileEntry {
                name: "in".into(),
                kind: FileKind::Directory
            },
            FileEntry {
                name: "src".into(),
                kind: FileKind::Directory
            },
        ]
    );
    assert_eq!(roots.list(&outside), Err(denied()));
    assert_eq!(roots.list(&wd.join("out")), Err(denied()));
    assert!(matches!(
        roots.list(&wd.join("src/main.rs")),
        Err(FileError::Invalid(_))
    ));
}

#[test]
fn resolve_follows_or_reports_the_link() {
    let (_t, wd, outside) = tree();
    let roots = Roots::new([wd.clone()]);
    symlink(wd.join("src/main.rs"), wd.join("m.rs")).unwrap();
    symlink(outside.join("secret.txt"), wd.join("s.txt")).unwrap();
    let s = roots.resolve(&wd.join("m.rs"), true).unwrap();
    assert_eq!(s.kind, FileKind::File);
    assert_eq!(s.path, fs::canonicalize(wd.join("src/main.rs")).unwrap());
    assert_eq!(s.size, 13);
    assert!(s.modified.is_some());
    let l = roots.resolve(&wd.join("s.txt"), false).unwrap();
    assert_eq!(l.kind, FileKind::Symlink);
    assert_eq!(
        roots.resolve(&wd.join("s.txt"), true).unwrap_err(),
        denied()
    );
    assert_eq!(roots.resolve(&wd, true).unwrap().kind, FileKind::Directory);
    assert_eq!(roots.resolve(&wd, false).unwrap().kind, FileKind::Directory);
    assert_eq!(
        roots
            .resolve(&outside.join("secret.txt"), false)
            .unwrap_err(),
        denied()
    );
}

#[test]
fn no_roots_reads_nothing() {
    let (_t, wd, _) = tree();
    let roots = Roots::new([wd.join("missing")]);
    assert!(roots.dirs().is_empty());
    assert_eq!(roots.read(&wd.join("src/main.rs"), 1024), Err(denied()));
}
