//! Customizations in AHP's shapes: the containers the host provides, as
//! `AgentInfo.customizations` lists them (unresolved), and the states a
//! session's containers move through. Which container is enabled, read
//! back from a session's state, for the runtime.

use ahp_types::state::{
    ChildCustomization, Customization, CustomizationEnablement, CustomizationLoadState,
    CustomizationType, DirectoryCustomization, ErrorInfo, McpServerCustomization,
    McpServerErrorState, McpServerState, McpServerStoppedState, PluginCustomization,
};

use crate::protocol::uri::file_uri_of;
use ahp_bridge_base::config::{Contents, HostContainer, HostSource};

/// The AHP type of a directory's contents.
fn contents_type(c: Contents) -> CustomizationType {
    match c {
        Contents::Skill => CustomizationType::Skill,
        Contents::Agent => CustomizationType::Agent,
        Contents::Prompt => CustomizationType::Prompt,
        Contents::Rule => CustomizationType::Rule,
    }
}

/// The URI a host container names where it comes from.
pub fn host_uri(c: &HostContainer) -> String {
    match &c.source {
        HostSource::Directory { path, .. } | HostSource::Plugin { path } => file_uri_of(path),
        HostSource::McpServer { name, .. } => format!("urn:ahp-copilot-bridge:mcp-server:{name}"),
    }
}

/// A host container before it is read: no `load`, no `children` (as the
/// root's agent lists them), or with `load` when a session resolves it.
pub fn host_container(c: &HostContainer, load: Option<CustomizationLoadState>) -> Customization {
    let (id, uri, name) = (c.id.clone(), host_uri(c), c.name.clone());
    match &c.source {
        HostSource::Directory { contents, .. } => {
            Customization::Directory(DirectoryCustomization {
                id,
                uri,
                name,
                icons: None,
                range: None,
                meta: None,
                client_id: None,
                load,
                children: None,
                enabled: true,
                contents: contents_type(*contents),
                // Files are read-only through AHP here.
                writable: false,
            })
        }
        HostSource::Plugin { .. } => plugin(
            PluginOrigin {
                id,
                uri,
                name,
                client_id: None,
            },
            load,
            None,
            None,
        ),
        HostSource::McpServer { .. } => {
            Customization::McpServer(Box::new(stopped_mcp_server(id, uri, name)))
        }
    }
}

/// Who provides a plugin and where it comes from.
pub struct PluginOrigin {
    pub id: String,
    pub uri: String,
    pub name: String,
    /// The client that published it; `None` for the host's own.
    pub client_id: Option<String>,
}

/// A plugin as a session lists it: the host's (from `[customizations]`) and
/// a client's (read over `resourceRead`) alike.
pub fn plugin(
    origin: PluginOrigin,
    load: Option<CustomizationLoadState>,
    children: Option<Vec<ChildCustomization>>,
    version: Option<String>,
) -> Customization {
    Customization::Plugin(PluginCustomization {
        id: origin.id,
        uri: origin.uri,
        name: origin.name,
        icons: None,
        range: None,
        meta: None,
        client_id: origin.client_id,
        load,
        children,
        enablement: None,
        version,
    })
}

/// The containers the host provides, for `AgentInfo.customizations`.
pub(crate) fn configured(containers: &[HostContainer]) -> Vec<Customization> {
    containers.iter().map(|c| host_container(c, None)).collect()
}

/// A container's id.
pub fn id_of(c: &Customization) -> Option<&str> {
    match c {
        Customization::Plugin(p) => Some(&p.id),
        Customization::Directory(d) => Some(&d.id),
        Customization::McpServer(m) => Some(&m.id),
        Customization::Unknown(_) => None,
    }
}

/// What the enablement decisions say: the first (most specific) decides;
/// none means enabled.
pub fn effective(enablement: Option<&[CustomizationEnablement]>) -> bool {
    match enablement.and_then(|e| e.first()) {
        None => true,
        Some(CustomizationEnablement::Global { enabled })
        | Some(CustomizationEnablement::Workspace { enabled, .. })
        | Some(CustomizationEnablement::Session { enabled }) => *enabled,
        Some(CustomizationEnablement::Unknown(_)) => false,
    }
}

/// Whether a session's container is enabled as a whole.
pub fn container_enabled(c: &Customization) -> bool {
    match c {
        Customization::Plugin(p) => effective(p.enablement.as_deref()),
        Customization::Directory(d) => d.enabled,
        Customization::McpServer(m) => effective(m.enablement.as_deref()),
        Customization::Unknown(_) => false,
    }
}

/// The children a container lists (a plugin's or a directory's); none for
/// an MCP server, or before the host parsed it.
pub fn children_of(c: &Customization) -> &[ChildCustomization] {
    match c {
        Customization::Plugin(p) => p.children.as_deref().unwrap_or_default(),
        Customization::Directory(d) => d.children.as_deref().unwrap_or_default(),
        _ => &[],
    }
}

/// An MCP server's `error` state: `error_type` says whose (`policy`,
/// `mcp`), `message` why.
pub fn mcp_server_error(error_type: &str, message: String) -> McpServerState {
    McpServerState::Error(McpServerErrorState {
        error: ErrorInfo {
            error_type: error_type.into(),
            message,
            stack: None,
            meta: None,
        },
    })
}

/// An MCP server the runtime has not started (yet).
pub fn stopped_mcp_server(id: String, uri: String, name: String) -> McpServerCustomization {
    McpServerCustomization {
        id,
        uri,
        name,
        icons: None,
        range: None,
        meta: None,
        enablement: None,
        state: McpServerState::Stopped(McpServerStoppedState {}),
        channel: None,
        mcp_app: None,
    }
}
