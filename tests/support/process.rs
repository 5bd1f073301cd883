//! The bridge as an operator runs it: the real binary (`serve --config`),
//! the real Copilot CLI behind it pointed at the scripted model, its log
//! lines kept, stopped by signal as systemd would.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ahp::{Client, ClientConfig};
use ahp_bridge_join::audit::sha256_hex;
use ahp_bridge_join::config::Config;
use ahp_bridge_join::offline_runtime;
use ahp_bridge_join::ScriptedModel;

use super::DEADLINE;

/// The one principal's token (roles `observe`, `participate` and `transform`).
pub(crate) const TOKEN: &str = "exposure-token-0123456789";

/// `[server]` keys for a load test: rate limits no benchmark reaches.
pub(crate) const LOAD_LIMITS: &str = "max_sessions = 1000000\nturns_per_minute = 1000000\n\
     actions_per_second = 1000000\nactions_burst = 1000000";

/// The address in `line` after `what` and a `ws://`, `wss://`, `http://` or
/// `https://` scheme.
fn address_after(line: &str, what: &str) -> Option<String> {
    let rest = &line[line.find(what)? + what.len()..];
    let rest = rest.split_once("://")?.1;
    let end = rest
        .find(|c: char| c.is_whitespace() || c == '"' || c == '/')
        .unwrap_or(rest.len());
    Some(rest[..end].to_owned())
}

/// One `[[principals]]` entry: `name`, the SHA-256 of `token`, `roles`, and
/// `extra` keys (e.g. `turns_per_minute = 1`).
pub(crate) fn principal_toml(name: &str, token: &str, roles: &[&str], extra: &str) -> String {
    format!(
        "[[principals]]\nname = {name:?}\ntoken_sha256 = \"{}\"\nroles = {roles:?}\n{extra}\n",
        sha256_hex(token.as_bytes())
    )
}

/// The principal every process has unless told otherwise: "ide", [`TOKEN`].
pub(crate) fn ide_principal() -> String {
    principal_toml("ide", TOKEN, &["observe", "participate", "transform"], "")
}

/// The bridge binary, serving until dropped (killed) or [`Self::terminate`]d.
pub(crate) struct BridgeProcess {
    pub child: Child,
    pub addr: SocketAddr,
    /// The admin listener (`/healthz`, `/readyz`, `/metrics`).
    pub admin: SocketAddr,
    /// Where SDK apps connect, with `[sdk]`.
    pub sdk: Option<SocketAddr>,
    log: Arc<Mutex<Vec<String>>>,
    /// Its config file, and what follows `[server]` and the principals in it.
    config: PathBuf,
    tail: String,
    /// Owned when the caller gave no directory.
    _dir: Option<tempfile::TempDir>,
}

impl Drop for BridgeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl BridgeProcess {
    /// Starts `serve` in a directory of its own; see [`Self::start_in`].
    pub(crate) fn start(model: &ScriptedModel, server_toml: &str, nofile: Option<u32>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Self::start_in(model, dir.path(), server_toml, nofile);
        b._dir = Some(dir);
        b
    }

    /// Starts `serve` with everything under `dir` (config, audit log, state
    /// store, the runtime's home): a second start on the same `dir` is a
    /// restart. `server_toml` goes under `[server]`; under `prlimit
    /// --nofile` when `nofile` is given.
    pub(crate) fn start_in(
        model: &ScriptedModel,
        dir: &Path,
        server_toml: &str,
        nofile: Option<u32>,
    ) -> Self {
        Self::start_with_runtime(model, dir, server_toml, "", nofile)
    }

    /// As [`Self::start_in`], with `runtime_toml` under `[runtime]` (e.g.
    /// `processes = 2`, or `connect = "127.0.0.1:PORT"`).
    pub(crate) fn start_with_runtime(
        model: &ScriptedModel,
        dir: &Path,
        server_toml: &str,
        runtime_toml: &str,
        nofile: Option<u32>,
    ) -> Self {
        let tail = Self::tail(model, dir, runtime_toml);
        Self::spawn(dir, server_toml, &ide_principal(), tail, nofile)
    }

    /// As [`Self::start_in`], with `principals_toml` (see
    /// [`principal_toml`]) instead of the one "ide" principal.
    pub(crate) fn start_with_principals(
        model: &ScriptedModel,
        dir: &Path,
        server_toml: &str,
        principals_toml: &str,
    ) -> Self {
        let tail = Self::tail(model, dir, "");
        Self::spawn(dir, server_toml, principals_toml, tail, None)
    }

    /// As [`Self::start_in`], with `tables` (whole TOML tables, e.g.
    /// `[log]\nformat = "json"`) added to the config.
    pub(crate) fn start_with_tables(model: &ScriptedModel, dir: &Path, tables: &str) -> Self {
        let tail = Self::tail(model, dir, "") + "\n" + tables;
        Self::spawn(dir, "", &ide_principal(), tail, None)
    }

    /// The config after `[server]` and the principals: the audit log, the runtime.
    fn tail(model: &ScriptedModel, dir: &Path, runtime_toml: &str) -> String {
        format!(
            "[audit]\npath = {:?}\n{}",
            dir.join("audit.jsonl").display().to_string(),
            offline_runtime_toml_with(model, dir, runtime_toml),
        )
    }

    fn config_text(server_toml: &str, principals_toml: &str, tail: &str) -> String {
        // SIGTERM stops at once unless a test asks for a drain; a file
        // change is read at SIGHUP only, unless a test asks otherwise.
        let mut drain = String::new();
        if !server_toml.contains("drain") {
            drain.push_str("drain = \"0s\"\n");
        }
        if !server_toml.contains("reload_on_change") {
            drain.push_str("reload_on_change = false\n");
        }
        format!(
            "[admin]\nlisten = \"127.0.0.1:0\"\n[server]\nlisten = \"127.0.0.1:0\"\n{drain}{server_toml}\n{principals_toml}\n{tail}"
        )
    }

    fn spawn(
        dir: &Path,
        server_toml: &str,
        principals_toml: &str,
        tail: String,
        nofile: Option<u32>,
    ) -> Self {
        let text = Self::config_text(server_toml, principals_toml, &tail);
        Self::spawn_text(dir, &text, tail, nofile)
    }

    /// Starts `serve` on `dir/bridge.toml` holding `config`, the whole file
    /// (its `[admin]` and `[server]` listeners included): a bridge of a fleet.
    pub(crate) fn start_config(dir: &Path, config: &str) -> Self {
        Self::spawn_text(dir, config, String::new(), None)
    }

    /// As [`Self::start_config`], with `env` set for the bridge (e.g. the
    /// variable `[sdk] token_env` names).
    pub(crate) fn start_config_env(dir: &Path, config: &str, env: &[(&str, &str)]) -> Self {
        Self::spawn_env(dir, config, String::new(), None, env)
    }

    fn spawn_text(dir: &Path, config: &str, tail: String, nofile: Option<u32>) -> Self {
        Self::spawn_env(dir, config, tail, nofile, &[])
    }

    fn spawn_env(
        dir: &Path,
        config: &str,
        tail: String,
        nofile: Option<u32>,
        env: &[(&str, &str)],
    ) -> Self {
        let path = dir.join("bridge.toml");
        std::fs::write(&path, config).unwrap();
        let bin = env!("CARGO_BIN_EXE_ahp-copilot-bridge");
        // A profiler around the bridge, for the memory benches:
        // AHP_BENCH_WRAP="heaptrack -o /tmp/bridge" (words split on spaces).
        let wrap = std::env::var("AHP_BENCH_WRAP").unwrap_or_default();
        let mut words: Vec<String> = wrap.split_whitespace().map(String::from).collect();
        if let Some(n) = nofile {
            words.splice(0..0, ["prlimit".to_owned(), format!("--nofile={n}:{n}")]);
        }
        let mut cmd = match words.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let mut child = cmd
            .args(["serve", "--config"])
            .arg(&path)
            .env("AHP_BRIDGE_LOG", "info")
            .envs(env.iter().copied())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the bridge starts");
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let l = log.clone();
        let admin: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
        let a = admin.clone();
        let sdk: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
        let sd = sdk.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                // As printed in text, or inside a JSON line's message.
                if let Some(at) = address_after(&line, "admin on ") {
                    *a.lock().unwrap() = at.parse().ok();
                }
                if let Some(at) = address_after(&line, "SDK apps on ") {
                    *sd.lock().unwrap() = at.parse().ok();
                }
                if let Some(at) = address_after(&line, "listening on ") {
                    let _ = tx.send(at);
                }
                l.lock().unwrap().push(line);
            }
        });
        let addr = rx
            .recv_timeout(DEADLINE)
            .expect("the bridge says where it listens")
            .parse()
            .unwrap();
        let admin = admin
            .lock()
            .unwrap()
            .expect("the bridge says where its admin listener is");
        let sdk = *sdk.lock().unwrap();
        Self {
            child,
            addr,
            admin,
            sdk,
            log,
            config: path,
            tail,
            _dir: None,
        }
    }

    /// Writes its config file anew with `server_toml` and `principals_toml`
    /// (the audit log and the runtime as they were); nothing reads it until
    /// [`Self::hangup`].
    pub(crate) fn rewrite_config(&self, server_toml: &str, principals_toml: &str) {
        let text = Self::config_text(server_toml, principals_toml, &self.tail);
        std::fs::write(&self.config, text).unwrap();
    }

    /// Adds `toml` to the end of its config file; nothing reads it until
    /// [`Self::hangup`].
    pub(crate) fn append_config(&self, toml: &str) {
        let mut text = std::fs::read_to_string(&self.config).unwrap();
        text.push_str(toml);
        std::fs::write(&self.config, text).unwrap();
    }

    /// Sends SIGHUP (without waiting for anything) and waits, up to the
    /// deadline, for the first log line after it that contains `needle`.
    pub(crate) async fn hangup(&self, needle: &str) -> String {
        let mark = self.log.lock().unwrap().len();
        let ok = Command::new("kill")
            .arg("-HUP")
            .arg(self.child.id().to_string())
            .status()
            .expect("kill runs")
            .success();
        assert!(ok, "kill -HUP {}", self.child.id());
        self.wait_log(mark, needle).await
    }

    /// How many log lines there are so far: a mark for [`Self::wait_log`].
    pub(crate) fn log_mark(&self) -> usize {
        self.log.lock().unwrap().len()
    }

    /// Waits, up to the deadline, for a log line after `mark` that contains `needle`.
    pub(crate) async fn wait_log(&self, mark: usize, needle: &str) -> String {
        let started = Instant::now();
        loop {
            let found = self.log.lock().unwrap()[mark..]
                .iter()
                .find(|l| l.contains(needle))
                .cloned();
            if let Some(line) = found {
                return line;
            }
            assert!(
                started.elapsed() < DEADLINE,
                "no log line with {needle:?} within {DEADLINE:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Every log line so far.
    pub(crate) fn all_log_lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub(crate) fn log_lines(&self, needle: &str) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .cloned()
            .collect()
    }

    /// The bridge's pid (a profiler's, when one wraps it).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The CPU time the bridge process has used so far, user and system
    /// (`/proc/PID/stat`, in clock ticks of 10 ms).
    pub(crate) fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        // The fields after the command's name, which may hold spaces.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = rest.split(' ').collect();
        let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        Duration::from_millis(ticks * 10)
    }

    /// Resident memory of the bridge process (not the runtime it spawned).
    pub(crate) fn rss_bytes(&self) -> u64 {
        let kib = status_kib(self.child.id(), "VmRSS");
        assert!(kib > 0, "VmRSS of the bridge");
        kib * 1024
    }

    /// Sends `signal` (e.g. "TERM", "KILL") and waits for the exit, at most
    /// `limit` (a hang guard: the exit status is what the caller checks).
    pub(crate) fn signal_and_wait(&mut self, signal: &str, limit: Duration) -> ExitStatus {
        self.signal(signal);
        self.wait_exit(signal, limit)
    }

    /// Sends `signal` (e.g. "TERM") without waiting.
    pub(crate) fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill runs")
            .success();
        assert!(ok, "kill -{signal} {}", self.child.id());
    }

    /// Waits for the exit that `signal` asked for, at most `limit`.
    pub(crate) fn wait_exit(&mut self, signal: &str, limit: Duration) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                started.elapsed() < limit,
                "the bridge did not exit within {limit:?} of SIG{signal}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `[runtime]` for the real CLI, offline, on `model`: its home and the
/// sessions' working directory under `dir`.
pub(crate) fn offline_runtime_toml(model: &ScriptedModel, dir: &Path) -> String {
    offline_runtime_toml_with(model, dir, "")
}

/// As [`offline_runtime_toml`], with `extra` keys under `[runtime]`.
pub(crate) fn offline_runtime_toml_with(model: &ScriptedModel, dir: &Path, extra: &str) -> String {
    let mut cfg = Config::default();
    offline_runtime(&mut cfg, &model.base_url(), dir);
    let env: String = cfg
        .runtime
        .env
        .iter()
        .map(|(k, v)| format!("{k} = {v:?}\n"))
        .collect();
    format!(
        "[runtime]\n{extra}\nworking_directory = {:?}\n[runtime.env]\n{env}\
         [runtime.provider]\ntype = \"openai\"\nbase_url = {:?}\napi_key = \"sk-offline\"\n",
        dir.display().to_string(),
        model.base_url(),
    )
}

/// Runs the bridge binary with `args` to its end; (success, stdout + stderr).
pub(crate) fn run_bin<S: AsRef<std::ffi::OsStr>>(
    args: impl IntoIterator<Item = S>,
) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ahp-copilot-bridge"))
        .args(args)
        .output()
        .expect("the bridge binary runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The direct children of `pid`, from `/proc` (each thread lists the
/// children it spawned, so every thread is read).
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    tasks
        .flatten()
        .flat_map(|t| {
            std::fs::read_to_string(t.path().join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Every descendant of `pid` (children, their children, ...).
pub(crate) fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for c in children_of(p) {
            out.push(c);
            todo.push(c);
        }
    }
    out
}

/// A field of `/proc/PID/status` in KiB (e.g. "VmRSS", "VmHWM"); 0 when
/// the process or the field is gone.
pub(crate) fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Whether a process is still alive (a zombie counts as gone).
pub(crate) fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.split_whitespace().nth(2).is_none_or(|st| st != "Z"))
        .unwrap_or(false)
}

/// A client of the process's principal, initialized as `client_id`.
pub(crate) async fn connect(addr: SocketAddr, client_id: &str) -> Client {
    connect_as(addr, TOKEN, client_id).await
}

/// As [`connect_as`], `None` when the upgrade is refused (a 503 from a
/// draining bridge, say).
pub(crate) async fn try_connect_as(
    addr: SocketAddr,
    token: &str,
    client_id: &str,
) -> Option<Client> {
    let t = ahp_ws::WebSocketTransport::connect(&format!("ws://{addr}/?tkn={token}"))
        .await
        .ok()?;
    let c = Client::connect(t, ClientConfig::default()).await.ok()?;
    c.initialize(client_id.into(), vec!["1.0.0".into()], vec![])
        .await
        .ok()?;
    Some(c)
}

/// A client with `token`, initialized as `client_id`.
pub(crate) async fn connect_as(addr: SocketAddr, token: &str, client_id: &str) -> Client {
    let t = ahp_ws::WebSocketTransport::connect(&format!("ws://{addr}/?tkn={token}"))
        .await
        .expect("ws connect");
    let c = Client::connect(t, ClientConfig::default()).await.unwrap();
    c.initialize(client_id.into(), vec!["1.0.0".into()], vec![])
        .await
        .expect("initialize");
    c
}
