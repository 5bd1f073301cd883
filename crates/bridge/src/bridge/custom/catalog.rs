//! The containers the host provides, read from disk: each configured
//! directory and plugin as a [`Package`] (MCP servers have nothing to
//! read), and each in AHP's shape for a session.

use std::sync::Arc;

use ahp_types::state::{Customization, CustomizationLoadState};

use super::shape;
use crate::ahp::{host_container, host_uri};
use crate::config::{Contents, HostContainer, HostSource};
use crate::customize::{read_directory, read_package, Bounds, ChildKind, DiskSource, Package};

/// One host container as last read.
#[derive(Debug, Clone)]
pub(crate) struct HostEntry {
    pub container: HostContainer,
    /// What was read (`None` for an MCP server: nothing to read).
    pub package: Option<Arc<Package>>,
}

fn kind_of(c: Contents) -> ChildKind {
    match c {
        Contents::Skill => ChildKind::Skill,
        Contents::Agent => ChildKind::Agent,
        Contents::Prompt => ChildKind::Prompt,
        Contents::Rule => ChildKind::Rule,
    }
}

/// Reads one host container within `bounds`.
pub(crate) async fn read(container: &HostContainer, bounds: &Bounds) -> HostEntry {
    let package = match &container.source {
        HostSource::Directory { path, contents } => {
            let src = DiskSource::new(path);
            let mut pkg = read_directory(&src, kind_of(*contents), bounds).await;
            pkg.name = container.name.clone();
            Some(Arc::new(pkg))
        }
        HostSource::Plugin { path } => {
            Some(Arc::new(read_package(&DiskSource::new(path), bounds).await))
        }
        HostSource::McpServer { .. } => None,
    };
    HostEntry {
        container: container.clone(),
        package,
    }
}

impl HostEntry {
    /// The container as a session lists it: its load state and children
    /// (an MCP server: `stopped` until the runtime says otherwise).
    pub(crate) fn shape(&self) -> Customization {
        let Some(pkg) = &self.package else {
            return host_container(&self.container, None);
        };
        let load: CustomizationLoadState = shape::load_of(pkg, &[]);
        let mut c = host_container(&self.container, Some(load));
        let kids = shape::children(pkg, &self.container.id, &host_uri(&self.container));
        match &mut c {
            Customization::Directory(d) => d.children = Some(kids),
            Customization::Plugin(p) => {
                p.children = Some(kids);
                p.version = pkg.version.clone();
            }
            _ => {}
        }
        c
    }

    /// A digest of what was read: changes when any file does.
    pub(crate) fn digest(&self) -> String {
        self.package
            .as_deref()
            .map(package_digest)
            .unwrap_or_default()
    }
}

/// The SHA-256 of a package's file list with each file's hash.
pub(crate) fn package_digest(pkg: &Package) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for f in &pkg.files {
        h.update(f.rel_path.as_bytes());
        h.update([0]);
        h.update(f.sha256.as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())
}
