//! Starting the runtime: spawn the CLI with its own environment, or connect
//! to a running one over TCP with a connection token.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, OnceLock};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tracing::{debug, info, warn};

use super::runtime_conn::{RuntimeConn, RuntimeHandler};
use super::session_config::Secret;
use crate::runtime_error::RuntimeError;
use crate::stderr_tail::{last_words, secrets, StderrWatch};
use ahp_bridge_base::config::RuntimeConfig;

/// A live runtime: the connection and, when we spawned it, the child process.
pub struct Runtime {
    pub conn: Arc<RuntimeConn>,
    pub child: Option<Child>,
    /// Where another connection reaches it (SDK apps'), when it listens.
    pub reach: Option<Reach>,
}

/// Where a connection other than the bridge's own reaches a runtime: its
/// address and the connection token its `connect` must give.
#[derive(Debug, Clone)]
pub struct Reach {
    /// `HOST:PORT`.
    pub addr: String,
    pub token: Option<Secret>,
}

/// What a runtime started with `--port 0` prints once it listens.
const LISTEN_LINE: &str = "listening on port ";

/// argv[0] is looked up in the project-local install first (the native binary
/// of `@github/copilot`, then its loader), then on PATH.
pub(crate) fn resolve_program(argv0: &str) -> PathBuf {
    if argv0.contains('/') {
        return PathBuf::from(argv0);
    }
    let roots = [
        std::env::var_os("AHP_BRIDGE_RUNTIME_DIR").map(PathBuf::from),
        Some(PathBuf::from(".runtime")),
        // The workspace's root, where scripts/install-runtime.sh puts it.
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.runtime")),
    ];
    let native = format!("{argv0}-{}-{}", std::env::consts::OS, arch());
    for root in roots.into_iter().flatten() {
        for name in [native.as_str(), argv0] {
            let p = root.join("node_modules/.bin").join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    PathBuf::from(argv0)
}

fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        a => a,
    }
}

/// Starts (or connects to) runtime `slot` of the pool. `listen`: a spawned
/// runtime listens on a loopback port (the CLI's `--port 0`, its own random
/// connection token) instead of speaking over stdio, so that SDK apps'
/// connections can reach it too.
pub async fn start_runtime(
    cfg: &RuntimeConfig,
    slot: usize,
    handler: Arc<dyn RuntimeHandler>,
    listen: bool,
) -> Result<Runtime, RuntimeError> {
    let token = std::env::var("COPILOT_CONNECTION_TOKEN").ok();
    if let Some(addr) = cfg.address_of(slot) {
        let (conn, version) = connect_tcp(cfg, addr, handler, token.as_deref()).await?;
        info!(%addr, slot, %version, "connected to the runtime over TCP");
        let reach = Reach {
            addr: addr.to_owned(),
            token: token.map(Secret),
        };
        return Ok(Runtime {
            conn,
            child: None,
            reach: Some(reach),
        });
    }
    if listen {
        return spawn_listening(cfg, slot, handler).await;
    }
    let program = resolve_program(&cfg.command[0]);
    let (mut child, stderr) = spawn_piped(&program, &cfg.command[1..], &cfg.env, None).await?;
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let conn = RuntimeConn::start(
        stdout,
        stdin,
        handler,
        cfg.call_timeout,
        cfg.max_frame_bytes,
    );
    let greeted = match tokio::time::timeout(cfg.call_timeout, conn.handshake(None)).await {
        Ok(v) => v,
        Err(_) => Err(RuntimeError::HandshakeTimeout {
            program: program.clone(),
            after: cfg.call_timeout,
        }),
    };
    let version = match greeted {
        Ok(v) => v,
        Err(e) => return Err(ended(e, &mut child, stderr.as_ref()).await),
    };
    info!(program = %program.display(), slot, pid = child.id(), %version, "runtime started");
    Ok(Runtime {
        conn,
        child: Some(child),
        reach: None,
    })
}

/// Spawns the CLI listening on a loopback port with a token of its own,
/// and connects to it: the bridge's connection, and the way for others.
async fn spawn_listening(
    cfg: &RuntimeConfig,
    slot: usize,
    handler: Arc<dyn RuntimeHandler>,
) -> Result<Runtime, RuntimeError> {
    let program = resolve_program(&cfg.command[0]);
    let mut args: Vec<String> = cfg.command[1..]
        .iter()
        .filter(|a| a.as_str() != "--stdio")
        .cloned()
        .collect();
    args.extend(["--port".to_owned(), "0".to_owned()]);
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).map_err(|e| RuntimeError::NoRandomness(e.to_string()))?;
    let token = hex::encode(bytes);
    let mut env = cfg.env.clone();
    env.insert("COPILOT_CONNECTION_TOKEN".into(), token.clone());
    let (mut child, stderr) = spawn_piped(&program, &args, &env, Some(&token)).await?;
    match listen_and_connect(cfg, &program, &mut child, handler, &token).await {
        Ok((conn, addr, version)) => {
            info!(program = %program.display(), slot, pid = child.id(), %addr, %version, "runtime started, listening for SDK apps");
            Ok(Runtime {
                conn,
                child: Some(child),
                reach: Some(Reach {
                    addr,
                    token: Some(Secret(token)),
                }),
            })
        }
        Err(e) => Err(ended(e, &mut child, stderr.as_ref()).await),
    }
}

/// A spawned runtime's failure to start, with how it ended and its last
/// words on stderr.
pub(crate) async fn ended(
    cause: RuntimeError,
    child: &mut Child,
    stderr: Option<&StderrWatch>,
) -> RuntimeError {
    let (status, stderr) = last_words(child, stderr).await;
    RuntimeError::Ended {
        cause: Box::new(cause),
        status,
        stderr,
    }
}

/// Waits for `child`'s line saying its port, and connects there with
/// `token`: the connection, its address and the runtime's version.
async fn listen_and_connect(
    cfg: &RuntimeConfig,
    program: &Path,
    child: &mut Child,
    handler: Arc<dyn RuntimeHandler>,
    token: &str,
) -> Result<(Arc<RuntimeConn>, String, String), RuntimeError> {
    let port = port_line(
        cfg,
        program,
        child,
        LISTEN_LINE,
        |p| p.trim().parse().ok(),
        |l| l.to_owned(),
    )
    .await?;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port)).to_string();
    let (conn, version) = connect_tcp(cfg, &addr, handler, Some(token)).await?;
    Ok((conn, addr, version))
}

/// Variables a spawned runtime is given, beside this process's own.
pub(crate) type Env = std::collections::BTreeMap<String, String>;

/// The port on the first line of `child`'s stdout holding `marker`, read
/// off what follows it by `port_of`, within `call_timeout`. Every other
/// line, before and after, is logged as `shown` renders it (a secret taken
/// out), so the pipe never fills.
pub(crate) async fn port_line(
    cfg: &RuntimeConfig,
    program: &Path,
    child: &mut Child,
    marker: &'static str,
    port_of: impl Fn(&str) -> Option<u16>,
    shown: impl Fn(&str) -> String + Send + 'static,
) -> Result<u16, RuntimeError> {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let port = tokio::time::timeout(cfg.call_timeout, async {
        while let Some(line) = lines.next_line().await? {
            if let Some(rest) = line.split(marker).nth(1) {
                return port_of(rest).ok_or_else(|| RuntimeError::UnexpectedLine(shown(&line)));
            }
            debug!(target: "runtime", "{}", shown(&line));
        }
        Err(RuntimeError::ExitedBeforeListening)
    })
    .await
    .map_err(|_| RuntimeError::ListenTimeout {
        program: program.to_owned(),
        after: cfg.call_timeout,
    })??;
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            debug!(target: "runtime", "{}", shown(&line));
        }
    });
    Ok(port)
}

/// A job for the spawner thread.
type Spawn = Box<dyn FnOnce() + Send>;

/// Spawns `cmd` so that the runtime dies with the bridge, however the
/// bridge ends (`kill_on_drop` runs only on a drop: a SIGKILL, a panic that
/// aborts, the OOM killer leave the runtime running, holding its port and
/// its sessions). On Linux the child asks for SIGKILL when its parent
/// dies (PR_SET_PDEATHSIG). The kernel's "parent" there is the thread that
/// forked, not the process (prctl(2)), and a tokio worker thread may end
/// while the bridge runs on, so every runtime is forked by one thread that
/// lives as long as the process.
async fn spawn_tied(mut cmd: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<std::sync::mpsc::Sender<Spawn>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Spawn>();
        // The sender is in a static, never dropped: the loop never ends,
        // and neither does the thread.
        let started = std::thread::Builder::new()
            .name("runtime-spawner".into())
            .spawn(move || rx.iter().for_each(|job| job()));
        if let Err(e) = started {
            // Each start then fails naming the thread (its `send` fails).
            warn!("the runtime spawner thread did not start: {e}");
        }
        tx
    });
    die_with_parent(&mut cmd);
    let handle = tokio::runtime::Handle::current();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Spawn = Box::new(move || {
        // The child is registered with the runtime's reaper, as if spawned
        // on one of its threads.
        let _in_runtime = handle.enter();
        let _ = tx.send(cmd.spawn());
    });
    let gone = || std::io::Error::other("the runtime spawner thread is gone");
    spawner.send(job).map_err(|_| gone())?;
    rx.await.map_err(|_| gone())?
}

/// Asks, in the child before it execs, for SIGKILL when the thread that
/// forked it ends (see [`spawn_tied`]).
#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe calls are allowed: prctl and getppid are system
    // calls, and an io::Error from an errno allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            let sig = libc::SIGKILL as libc::c_ulong;
            if libc::prctl(libc::PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The bridge died between the fork and the prctl: no signal
            // will come, so the runtime must not start at all.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

/// Spawns the runtime with its stdio piped and `env` added to this
/// process's, dying with this process, its stderr read into the log and its
/// last lines kept without `secret` (the connection token it was given).
pub(crate) async fn spawn_piped(
    program: &Path,
    args: &[String],
    env: &Env,
    secret: Option<&str>,
) -> Result<(Child, Option<StderrWatch>), RuntimeError> {
    let mut cmd = Command::new(program);
    cmd.args(args).envs(env);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = spawn_tied(cmd).await.map_err(|e| RuntimeError::Spawn {
        program: program.to_owned(),
        reason: e.to_string(),
    })?;
    let stderr = StderrWatch::start(&mut child, secrets(env, secret));
    Ok((child, stderr))
}

/// Connects to a runtime at `addr` (`HOST:PORT`) and does its handshake with
/// `token`: the connection and the runtime's version.
async fn connect_tcp(
    cfg: &RuntimeConfig,
    addr: &str,
    handler: Arc<dyn RuntimeHandler>,
    token: Option<&str>,
) -> Result<(Arc<RuntimeConn>, String), RuntimeError> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| RuntimeError::Connect {
            addr: addr.to_owned(),
            reason: e.to_string(),
        })?;
    // A transform answer is one small frame: it must leave at once, not
    // wait for Nagle and the runtime's delayed ACK.
    stream.set_nodelay(true)?;
    let (r, w) = stream.into_split();
    let conn = RuntimeConn::start(r, w, handler, cfg.call_timeout, cfg.max_frame_bytes);
    let version = conn.handshake(token).await?;
    Ok((conn, version))
}
