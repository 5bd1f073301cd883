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

use serde_json::{json, Value};
use tokio::sync::Semaphore;
use tracing::debug;

use super::auth::Principal;
use super::clients::ConnId;
use super::completions::{complete, path_word, PathWord};
use super::errors::AhpError;
use super::files::{content_type, file_uri_of, path_of_dir, path_of_file_uri, FileError, Roots};
use super::host::Host;
use super::uri::{channel_kind, ChannelKind, ROOT_URI};
use crate::config::Role;
use crate::jsonrpc::inbound::ReplyFuture;
use crate::jsonrpc::{ErrorCode, RpcError};

/// The requests answered here, off the connection's reader.
pub const FILE_METHODS: &[&str] = &[
    "resourceRead",
    "resourceList",
    "resourceResolve",
    "resourceRequest",
    "completions",
];

/// How long one file request may take, waiting for a worker included.
pub const FILE_DEADLINE: Duration = Duration::from_secs(10);

/// File requests running at once, host-wide (each may hold a file of
/// `[server] max_resource_bytes`).
pub const FILE_WORKERS: usize = 4;

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

fn uri_path(params: &Value) -> Result<PathBuf, RpcError> {
    let uri = params
        .get("uri")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("field `uri` must be a string"))?;
    path_of_file_uri(uri).map_err(rpc_error)
}

fn flag(params: &Value, name: &str, default: bool) -> Result<bool, RpcError> {
    match params.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(invalid(format!("field `{name}` must be a boolean"))),
    }
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

impl Host {
    /// A request that touches the filesystem, answered when done: `None`
    /// when `method` is not one.
    pub fn file_request(
        self: &Arc<Self>,
        conn: ConnId,
        method: &str,
        params: &Value,
    ) -> Option<ReplyFuture> {
        if !FILE_METHODS.contains(&method) {
            return None;
        }
        let job = self
            .caller(conn, method, params)
            .and_then(|principal| self.file_job(&principal, method, params));
        let method = method.to_owned();
        let uri = params.get("uri").cloned();
        let permits = self.file_workers.clone();
        Some(Box::pin(async move {
            let answer = match job {
                Err(e) => Err(e),
                Ok(None) => Ok(json!({"items": []})),
                Ok(Some(job)) => run(permits, job).await,
            };
            debug!(method, uri = ?uri, ok = answer.is_ok(), error = ?answer.as_ref().err().map(|e| e.code), "file request");
            answer
        }))
    }

    /// The checked request; `None` when there is nothing to look up
    /// (a completion for a word that is no path).
    fn file_job(
        &self,
        principal: &Principal,
        method: &str,
        params: &Value,
    ) -> Result<Option<FileJob>, RpcError> {
        let op = match method {
            "resourceRead" => FileOp::Read {
                path: uri_path(params)?,
                base64: params.get("encoding").and_then(Value::as_str) == Some("base64"),
            },
            "resourceList" => FileOp::List {
                path: uri_path(params)?,
            },
            "resourceResolve" => FileOp::Resolve {
                path: uri_path(params)?,
                follow: flag(params, "followSymlinks", true)?,
            },
            "resourceRequest" => {
                if flag(params, "write", false)? {
                    return Err(RpcError::new(
                        AhpError::PermissionDenied,
                        "write access is refused: files are read-only on this host",
                    ));
                }
                FileOp::Request {
                    path: uri_path(params)?,
                }
            }
            "completions" => {
                let kind = params.get("kind").and_then(Value::as_str);
                let text = params
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| invalid("field `text` must be a string"))?;
                let offset = params
                    .get("offset")
                    .and_then(Value::as_i64)
                    .ok_or_else(|| invalid("field `offset` must be an integer"))?;
                let word = path_word(text, offset).map_err(invalid)?;
                match (kind, word) {
                    (Some("userMessage"), Some(word)) => FileOp::Complete { word },
                    _ => return Ok(None),
                }
            }
            _ => return Err(RpcError::method_not_found(method)),
        };
        let channel = params
            .get("channel")
            .and_then(Value::as_str)
            .unwrap_or(ROOT_URI);
        Ok(Some(FileJob {
            op,
            dirs: self.readable_dirs(principal, channel)?,
            limit: self.cfg.server.max_resource_bytes as u64,
        }))
    }

    /// The directories `principal` may read through `channel` (see the module doc).
    fn readable_dirs(
        &self,
        principal: &Principal,
        channel: &str,
    ) -> Result<Vec<PathBuf>, RpcError> {
        let default = self.cfg.runtime.working_directory.clone();
        let kind = channel_kind(channel);
        let st = self.lock();
        let sessions: Vec<_> = match kind {
            ChannelKind::Root => st
                .sessions
                .values()
                .filter(|e| principal.sees(&e.owner))
                .collect(),
            ChannelKind::Session | ChannelKind::Chat => {
                let entry = st
                    .session_of(channel)
                    .filter(|_| st.visible(principal, channel))
                    .and_then(|s| st.sessions.get(s))
                    .ok_or_else(|| {
                        RpcError::new(
                            AhpError::SessionNotFound,
                            format!("no such channel: {channel:?}"),
                        )
                    })?;
                vec![entry]
            }
            ChannelKind::Other => {
                return Err(invalid(
                    "field `channel` must be ahp-root://, a session or a chat",
                ))
            }
        };
        let mut dirs = Vec::new();
        for e in sessions {
            match e.state.working_directories.as_deref() {
                Some(w) if !w.is_empty() => dirs.extend(w.iter().filter_map(|u| path_of_dir(u))),
                _ => dirs.extend(default.clone()),
            }
        }
        if kind == ChannelKind::Root && principal.has(Role::Participate) {
            dirs.extend(default);
        }
        Ok(dirs)
    }
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
        Ok(Ok(answer)) => answer.map_err(rpc_error),
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

impl FileJob {
    fn run(self) -> Result<Value, FileError> {
        let roots = Roots::new(self.dirs);
        match self.op {
            FileOp::Read { path, base64 } => {
                let bytes = roots.read(&path, self.limit)?;
                let mut answer = match String::from_utf8(bytes) {
                    Ok(text) if !base64 => json!({"data": text, "encoding": "utf-8"}),
                    Ok(text) => {
                        json!({"data": data_encoding::BASE64.encode(text.as_bytes()), "encoding": "base64"})
                    }
                    Err(e) => {
                        json!({"data": data_encoding::BASE64.encode(e.as_bytes()), "encoding": "base64"})
                    }
                };
                if let Some(t) = content_type(&path) {
                    answer["contentType"] = json!(t);
                }
                Ok(answer)
            }
            FileOp::List { path } => {
                let entries: Vec<Value> = roots
                    .list(&path)?
                    .into_iter()
                    .map(|e| json!({"name": e.name, "type": e.kind.as_str()}))
                    .collect();
                Ok(json!({ "entries": entries }))
            }
            FileOp::Resolve { path, follow } => {
                let s = roots.resolve(&path, follow)?;
                let mut answer = json!({"uri": file_uri_of(&s.path), "type": s.kind.as_str()});
                if s.kind != super::files::Kind::Directory {
                    answer["size"] = json!(s.size);
                }
                if let Some(t) = s.modified.and_then(|m| jiff::Timestamp::try_from(m).ok()) {
                    answer["mtime"] = json!(t.to_string());
                }
                if let Some(t) = content_type(&s.path) {
                    answer["contentType"] = json!(t);
                }
                Ok(answer)
            }
            // Read access is granted wherever a read would be allowed.
            FileOp::Request { path } => match roots.confine(&path) {
                Ok(_) | Err(FileError::NotFound(_)) => Ok(json!({})),
                Err(e) => Err(e),
            },
            FileOp::Complete { word } => Ok(json!({"items": complete(&roots, &word)})),
        }
    }
}
