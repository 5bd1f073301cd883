//! A client's plugin as a [`PackageSource`]: read access asked first with
//! the server-to-client `resourceRequest`, then its files read with
//! `resourceList` and `resourceRead`, as AHP intends for a client's virtual
//! plugin. Each call has a deadline; what the client answers is held to the
//! caller's bounds.

use std::sync::Arc;
use std::time::Duration;

use ahp_types::commands::ContentEncoding;
use ahp_types::commands::{
    ResourceListParams, ResourceListResult, ResourceReadParams, ResourceReadResult,
    ResourceRequestParams,
};
use data_encoding::BASE64;

use crate::ahp::errors::AhpError;
use crate::customize::{BoxFuture, EntryKind, PackageSource, SourceEntry, SourceError};
use crate::jsonrpc::{CallError, Peer};

/// How long one `resourceList` or `resourceRead` may take.
pub(crate) const CALL_DEADLINE: Duration = Duration::from_secs(10);

pub(crate) struct ClientSource {
    peer: Arc<Peer>,
    /// The session the plugin is published in: the channel of every call.
    channel: String,
    /// The plugin's root URI, as its entry gives it.
    root: String,
}

impl ClientSource {
    pub(crate) fn new(peer: Arc<Peer>, channel: &str, root: &str) -> Self {
        Self {
            peer,
            channel: channel.to_owned(),
            root: root.trim_end_matches('/').to_owned(),
        }
    }

    /// Asks the client for read access to the plugin (`resourceRequest`).
    /// A client that does not know the method (-32601) is read anyway: it
    /// still decides on each `resourceRead`.
    pub(crate) async fn request_access(&self) -> Result<(), SourceError> {
        let params = ResourceRequestParams {
            channel: self.channel.clone(),
            meta: None,
            uri: self.root.clone(),
            read: Some(true),
            write: None,
        };
        match self
            .peer
            .call_sized("resourceRequest", &params, CALL_DEADLINE)
            .await
        {
            Ok(_) => Ok(()),
            Err(CallError::Rpc(e)) if e.code == -32601 => Ok(()),
            Err(CallError::Rpc(e)) if e.code == i32::from(AhpError::PermissionDenied) => Err(
                SourceError::Failed(format!("the client denied read access: {}", e.message)),
            ),
            Err(e) => Err(SourceError::Failed(format!(
                "the client's resourceRequest: {e}"
            ))),
        }
    }

    fn uri(&self, rel: &str) -> String {
        if rel.is_empty() {
            self.root.clone()
        } else {
            format!("{}/{rel}", self.root)
        }
    }

    async fn call<P: serde::Serialize, R: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<R, SourceError> {
        let answer = self
            .peer
            .call_sized(method, params, CALL_DEADLINE)
            .await
            .map_err(|e| match e {
                CallError::Rpc(e) if e.code == i32::from(AhpError::NotFound) => {
                    SourceError::NotFound
                }
                other => SourceError::Failed(format!("the client's {method}: {other}")),
            })?;
        serde_json::from_value(answer.value)
            .map_err(|e| SourceError::Failed(format!("the client's {method} answer: {e}")))
    }
}

fn entry_kind(t: &str) -> EntryKind {
    match t {
        "file" => EntryKind::File,
        "directory" => EntryKind::Directory,
        "symlink" => EntryKind::Symlink,
        _ => EntryKind::Other,
    }
}

impl PackageSource for ClientSource {
    fn list(&self, rel: &str, max: usize) -> BoxFuture<'_, Result<Vec<SourceEntry>, SourceError>> {
        let params = ResourceListParams {
            channel: self.channel.clone(),
            meta: None,
            uri: self.uri(rel),
        };
        Box::pin(async move {
            let r: ResourceListResult = self.call("resourceList", &params).await?;
            if r.entries.len() > max {
                return Err(SourceError::TooMany { max });
            }
            Ok(r.entries
                .into_iter()
                .map(|e| SourceEntry {
                    kind: entry_kind(&e.r#type),
                    name: e.name,
                })
                .collect())
        })
    }

    fn read(&self, rel: &str, max: u64) -> BoxFuture<'_, Result<Vec<u8>, SourceError>> {
        let params = ResourceReadParams {
            channel: self.channel.clone(),
            meta: None,
            uri: self.uri(rel),
            encoding: None,
        };
        Box::pin(async move {
            let r: ResourceReadResult = self.call("resourceRead", &params).await?;
            let bytes = match r.encoding {
                ContentEncoding::Base64 => BASE64
                    .decode(r.data.as_bytes())
                    .map_err(|e| SourceError::Failed(format!("bad base64 from the client: {e}")))?,
                _ => r.data.into_bytes(),
            };
            if bytes.len() as u64 > max {
                return Err(SourceError::TooLarge {
                    size: Some(bytes.len() as u64),
                    max,
                });
            }
            Ok(bytes)
        })
    }
}
