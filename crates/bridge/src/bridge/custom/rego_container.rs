//! A container as the operator's Rego policy sees it (`ahp.customization`):
//! its kind, name and source, a stdio MCP server's command, a plugin's own
//! MCP servers. Pure: the decision and what follows it are the caller's.

use super::runtime_map::{Contribution, RuntimeContents};
use crate::audit::Source;
use crate::policy::{Customization, Server};

pub(crate) fn customization_of(c: &Contribution) -> Customization {
    let source = match c.source {
        Source::ClientPlugin => "client",
        Source::HostDirectory | Source::HostPlugin | Source::HostMcpServer => "host",
    };
    let mut out = Customization {
        kind: String::new(),
        name: c.name.clone(),
        source: source.to_owned(),
        command: None,
        args: vec![],
        url: None,
        servers: vec![],
    };
    match &c.contents {
        RuntimeContents::Server(_, cfg) => {
            out.kind = "mcp_server".to_owned();
            out.command = Some(cfg.command.clone());
            out.args = cfg.args.clone();
        }
        RuntimeContents::Package(pkg) => {
            out.kind = match c.source {
                // A directory holds children of one kind: it is that kind.
                Source::HostDirectory => pkg
                    .children
                    .first()
                    .map_or("directory", |ch| ch.kind.as_str())
                    .to_owned(),
                _ => "plugin".to_owned(),
            };
            out.servers = pkg
                .mcp_servers
                .iter()
                .map(|s| Server {
                    name: s.name.clone(),
                    command: s.command.clone(),
                    args: s.args.clone(),
                })
                .collect();
        }
    }
    out
}
