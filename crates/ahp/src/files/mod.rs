//! The requests that read files: `resourceRead`, `resourceList`,
//! `resourceResolve`, `resourceRequest` (read access only) and
//! `completions`. Who may read where: a caller (with the `observe` role)
//! reads under the working directories of the sessions it sees (a session
//! without one works in `[runtime] working_directory`, the configured
//! default); a caller with `participate`, which could create a session
//! there, also reads the default. A session or chat channel narrows that to
//! its session. The filesystem work runs off the async threads, a few at a
//! time, under a deadline; it is in [`super::files`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ahp_types::commands::{
    CompletionItemKind, CompletionsResult, ContentEncoding, DirectoryEntry, ResourceListResult,
    ResourceReadResult, ResourceRequestResult, ResourceResolveResult,
};
use data_encoding::BASE64;
use serde_json::Value;
use tokio::sync::Semaphore;
use tracing::debug;

use self::completions::{complete, path_word, PathWord};
use self::roots::{content_type, FileError, Roots};
use super::auth::Principal;
use super::cmd::reply::to_result;
use super::host::Host;
use super::protocol::errors::AhpError;
use super::protocol::params::Request;
use super::protocol::uri::{file_uri_of, local_path};
use ahp_bridge_jsonrpc::ReplyFuture;
use ahp_bridge_jsonrpc::{ErrorCode, RpcError};

pub(crate) mod completions;
pub(crate) mod roots;

/// How long one file request may take, waiting for a worker included.
pub(crate) const FILE_DEADLINE: Duration = Duration::from_secs(10);

/// File requests running at once, host-wide (each may hold a file of
/// `[server] max_resource_bytes`).
pub(crate) const FILE_WORKERS: usize = 4;

/// One file request, checked and ready to run.
enum FileOp {
    Read { path: PathBuf, base64: bool },
    List { path: PathBuf },
    Resolve { path: PathBuf, follow: bool },
    Request { path: PathBuf },
    Complete { word: PathWord },
}

struct FileJob {
    op: FileOp,
    dirs: Vec<PathBuf>,
    limit: u64,
}

fn invalid(msg: impl Into<String>) -> RpcError {
    RpcError::new(ErrorCode::InvalidParams, msg)
}

fn path_of(uri: &str) -> Result<PathBuf, RpcError> {
    local_path(uri).map_err(|e| invalid(e.to_string()))
}

fn rpc_error(e: FileError) -> RpcError {
    match e {
        FileError::NotFound(m) => RpcError::new(AhpError::NotFound, m),
        FileError::Denied(m) => RpcError::new(AhpError::PermissionDenied, m),
        FileError::TooLarge { size, limit } => RpcError::new(
            AhpError::PermissionDenied,
            format!("the file is {size} bytes, over [server] max_resource_bytes ({limit}); it is not read"),
        ),
        FileError::Invalid(m) => invalid(m),
    }
}

/// A request that touches the filesystem (a `resource*` read or
/// `completions`) from `principal`, answered when done.
pub(crate) fn request(
    host: Arc<Host>,
    principal: Arc<Principal>,
    workers: Arc<Semaphore>,
    request: Request,
) -> ReplyFuture {
    let job = file_job(&host, &principal, request);
    Box::pin(async move {
        let answer = match job {
            Err(e) => Err(e),
            Ok(None) => to_result(CompletionsResult { items: vec![] }),
            Ok(Some(job)) => run(workers, job).await,
        };
        debug!(ok = answer.is_ok(), error = ?answer.as_ref().err().map(|e| e.code), "file request");
        answer
    })
}

/// The checked request; `None` when there is nothing to look up
/// (a completion for a word that is no path).
fn file_job(
    host: &Host,
    principal: &Principal,
    request: Request,
) -> Result<Option<FileJob>, RpcError> {
    let (channel, op) = match request {
        Request::ResourceRead(p) => (
            p.channel,
            FileOp::Read {
                path: path_of(&p.uri)?,
                base64: p.encoding == Some(ContentEncoding::Base64),
            },
        ),
        Request::ResourceList(p) => (
            p.channel,
            FileOp::List {
                path: path_of(&p.uri)?,
            },
        ),
        Request::ResourceResolve(p) => (
            p.channel,
            FileOp::Resolve {
                path: path_of(&p.uri)?,
                follow: p.follow_symlinks.unwrap_or(true),
            },
        ),
        Request::ResourceRequest(p) => {
            if p.write == Some(true) {
                return Err(RpcError::new(
                    AhpError::PermissionDenied,
                    "write access is refused: files are read-only on this host",
                ));
            }
            (
                p.channel,
                FileOp::Request {
                    path: path_of(&p.uri)?,
                },
            )
        }
        Request::Completions(p) => {
            let word = path_word(&p.text, p.offset).map_err(|e| invalid(e.0))?;
            match (p.kind, word) {
                (CompletionItemKind::UserMessage, Some(word)) => {
                    (p.channel, FileOp::Complete { word })
                }
                _ => return Ok(None),
            }
        }
        _ => {
            return Err(RpcError::new(
                ErrorCode::InternalError,
                "not a file request",
            ))
        }
    };
    Ok(Some(FileJob {
        op,
        dirs: host.session_list().readable_dirs(principal, &channel)?,
        limit: host.settings().server().max_resource_bytes as u64,
    }))
}

/// Runs a job on a blocking thread once a worker is free, within the deadline.
async fn run(workers: Arc<Semaphore>, job: FileJob) -> Result<Value, RpcError> {
    let work = async move {
        let permit = workers.acquire_owned().await;
        tokio::task::spawn_blocking(move || {
            // Held until the filesystem answers, even past the deadline.
            let _permit = permit;
            job.run()
        })
        .await
    };
    match tokio::time::timeout(FILE_DEADLINE, work).await {
        Ok(Ok(answer)) => to_result(answer.map_err(rpc_error)?),
        Ok(Err(e)) => Err(RpcError::new(
            ErrorCode::InternalError,
            format!("the file request failed: {e}"),
        )),
        Err(_) => Err(RpcError::new(
            ErrorCode::InternalError,
            format!("the filesystem did not answer within {FILE_DEADLINE:?}"),
        )),
    }
}

/// A file request's answer, as its official result type.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum FileAnswer {
    Read(ResourceReadResult),
    List(ResourceListResult),
    Resolve(ResourceResolveResult),
    Request(ResourceRequestResult),
    Complete(CompletionsResult),
}

impl FileJob {
    fn run(self) -> Result<FileAnswer, FileError> {
        let roots = Roots::new(self.dirs);
        match self.op {
            FileOp::Read { path, base64 } => {
                let bytes = roots.read(&path, self.limit)?;
                let (data, encoding) = match String::from_utf8(bytes) {
                    Ok(text) if !base64 => (text, ContentEncoding::Utf8),
                    Ok(text) => (BASE64.encode(text.as_bytes()), ContentEncoding::Base64),
                    Err(e) => (BASE64.encode(e.as_bytes()), ContentEncoding::Base64),
                };
                Ok(FileAnswer::Read(ResourceReadResult {
                    data,
                    encoding,
                    content_type: content_type(&path).map(String::from),
                }))
            }
            FileOp::List { path } => {
                let entries = roots
                    .list(&path)?
                    .into_iter()
                    .map(|e| DirectoryEntry {
                        name: e.name,
                        r#type: e.kind.as_str().into(),
                    })
                    .collect();
                Ok(FileAnswer::List(ResourceListResult { entries }))
            }
            FileOp::Resolve { path, follow } => {
                let s = roots.resolve(&path, follow)?;
                let modified = s.modified.and_then(|m| jiff::Timestamp::try_from(m).ok());
                Ok(FileAnswer::Resolve(ResourceResolveResult {
                    uri: file_uri_of(&s.path),
                    r#type: s.kind.resource_type(),
                    size: (s.kind != roots::FileKind::Directory)
                        .then(|| i64::try_from(s.size).unwrap_or(i64::MAX)),
                    mtime: modified.map(|t| t.to_string()),
                    ctime: None,
                    content_type: content_type(&s.path).map(String::from),
                    etag: None,
                }))
            }
            // Read access is granted wherever a read would be allowed.
            FileOp::Request { path } => match roots.confine(&path) {
                Ok(_) | Err(FileError::NotFound(_)) => {
                    Ok(FileAnswer::Request(ResourceRequestResult {}))
                }
                Err(e) => Err(e),
            },
            FileOp::Complete { word } => Ok(FileAnswer::Complete(CompletionsResult {
                items: complete(&roots, &word),
            })),
        }
    }
}
