//! The command line: parse, load config, hand over.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use ahp_bridge_join::config::{Config, LogConfig, LogFormat};
use ahp_bridge_join::policy::Policy;
use ahp_bridge_join::telemetry::Traces;
use ahp_bridge_join::TryPolicy;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ahp-copilot-bridge",
    version,
    about = "An AHP host for the GitHub Copilot agent runtime, with audited system-prompt transforms"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the AHP host in front of the Copilot runtime; http://LISTEN/ serves its web console.
    Serve {
        /// TOML config file (see config/bridge.toml); defaults apply without one.
        /// SIGHUP re-reads its [policy], [[principals]], [server] token and
        /// session_visibility, [[jwt]], rate limits and [customizations].
        #[arg(long)]
        config: Option<PathBuf>,
        /// Address to listen on; overrides [server] listen.
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
    },
    /// Everything offline: a scripted model, the real runtime, the AHP host and its web console.
    Demo {
        #[arg(long, default_value = "127.0.0.1:8421")]
        listen: std::net::SocketAddr,
        /// A browser origin that may connect besides loopback on any port,
        /// e.g. https://ui.example or http://192.168.1.5:* (repeatable).
        #[arg(long = "allow-origin", value_name = "ORIGIN")]
        allow_origin: Vec<String>,
        /// Run the Rego modules in DIR as the demo's [policy.rego], enforced:
        /// every *.rego but *_test.rego, every *.json but input.json as data
        /// (as examples/policy/ lays a policy out).
        #[arg(long, value_name = "DIR")]
        policy: Option<PathBuf>,
        /// With --policy: report mode; a deny is recorded as would_deny in the
        /// audit log and nothing is refused.
        #[arg(long, requires = "policy")]
        report: bool,
    },
    /// Audit log tools.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Ask a running bridge whether it is ready (its /readyz): exit 0 when
    /// it is, 1 naming each failing check (or why it could not be asked).
    Health {
        /// The admin listener's address; default: [admin] listen of --config, or 127.0.0.1:8422.
        #[arg(long)]
        admin: Option<std::net::SocketAddr>,
        /// The config file the bridge runs with: its [admin] listen, and with
        /// [admin.tls] the probe asks over https trusting that certificate only.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Config tools.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// The operator's Rego policy ([policy.rego]) from the command line.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Run the modules' tests as `opa test` does: every rule named test_*
    /// (todo_test_* rules are SKIPPED), in any package. Prints the failures
    /// and errors (every test with --verbose) and "policy test: N passed, N
    /// failed, N skipped, N errors". Exit 0 when all pass; 2 when a test
    /// failed, erred or was skipped (unless -z); 1 when the modules do not
    /// load or compile, --run is not a regular expression, no test ran or
    /// the command line is wrong.
    Test(ahp_bridge_join::TestArgs),
    /// Decide one input document at one point with the [policy.rego] of a
    /// config; prints {"deny": [...], "warn": [...]}. An input whose own
    /// "point" field names another point is decided at --point, with a
    /// warning on stderr.
    Eval {
        #[arg(long)]
        config: PathBuf,
        /// opt_in, session, transform, permission or customization.
        #[arg(long)]
        point: String,
        /// The input document (JSON), as docs/policy.md shows each point's.
        #[arg(long)]
        input: PathBuf,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Check an audit log (a file, a rotated series' directory, or its files):
    /// exit 0 when it holds, 1 naming the first bad record.
    Verify {
        /// Log files of one series, or the directory that holds it.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// The operator's public key (`audit keygen`): check every checkpoint's signature.
        #[arg(long)]
        pubkey: Option<PathBuf>,
        /// SEQ:HASH the log must reach unchanged (as a previous verify printed it).
        #[arg(long, value_parser = ahp_bridge_join::audit::parse_head)]
        expect_head: Option<(u64, String)>,
        /// A shipped copy (JSON Lines, e.g. what rsyslog wrote): every record in
        /// it must be in the log, unchanged.
        #[arg(long)]
        against: Option<PathBuf>,
        /// With --against: only the records of this bridge (`[server]
        /// instance`) in it, for a collector's file that holds a fleet's.
        #[arg(long, requires = "against")]
        instance: Option<String>,
    },
    /// Write an Ed25519 key pair for signed checkpoints: PREFIX.key (0600), PREFIX.pub.
    Keygen {
        #[arg(long)]
        out: PathBuf,
    },
    /// The log as a table; with `include_content`, a diff per rewritten section.
    Show {
        /// Log files of one series, or the directory that holds it.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// A session URI or id.
        #[arg(long)]
        session: Option<String>,
        /// A client id.
        #[arg(long)]
        client: Option<String>,
        /// An RFC 3339 time, or a duration ago ("2h").
        #[arg(long, value_parser = ahp_bridge_join::audit::parse_since)]
        since: Option<jiff::Timestamp>,
        /// Only the records of this bridge of a fleet (`[server] instance`).
        #[arg(long)]
        instance: Option<String>,
        /// Only Rego decisions with this outcome: denied, would_deny, warned or error.
        #[arg(long, value_parser = ["denied", "would_deny", "warned", "error"])]
        outcome: Option<String>,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate a config file (and compile its [policy.rego] modules) and
    /// print its effective policy, one row per section.
    Check { file: PathBuf },
}

fn load(path: Option<&PathBuf>) -> anyhow::Result<Config> {
    match path {
        Some(p) => Ok(Config::load(p)?),
        None => {
            let mut c = Config::default();
            c.apply_env();
            c.validate()?;
            Ok(c)
        }
    }
}

/// `config check` and `audit` only print what they read from files: piped
/// into `head`, they end quietly when the reader goes, as Unix tools do,
/// where Rust's print would panic on the closed pipe. Commands with sockets
/// keep Rust's default (a peer gone is an error they handle).
fn quiet_on_closed_pipe() {
    // SAFETY: called first thing in main, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn init_logs(cfg: &LogConfig) {
    ahp_bridge_join::telemetry::init_logs(cfg, None);
}

/// The log, with the trace exporter beside it when `[telemetry]
/// otlp_endpoint` is set; shut it down once the async runtime is gone.
fn init_telemetry(cfg: &Config) -> anyhow::Result<Option<Traces>> {
    let Some((layer, traces)) = ahp_bridge_join::telemetry::build_traces(&cfg.telemetry)? else {
        init_logs(&cfg.log);
        return Ok(None);
    };
    ahp_bridge_join::telemetry::init_logs(&cfg.log, Some(layer));
    Ok(Some(traces))
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // `policy test`'s 2 means a test did not pass (as `opa test`'s):
            // a usage error there is 1, as OPA's, so CI can tell them apart.
            let policy_test = std::env::args().skip(1).take(2).eq(["policy", "test"]);
            let code = if policy_test && e.use_stderr() {
                1
            } else {
                e.exit_code()
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    if matches!(
        cli.command,
        Command::Config { .. } | Command::Audit { .. } | Command::Policy { .. }
    ) {
        quiet_on_closed_pipe();
    }
    let result = match cli.command {
        Command::Config {
            command: ConfigCommand::Check { file },
        } => check_config(&file),
        Command::Policy { command } => {
            let out = &mut std::io::stdout().lock();
            let ran = match command {
                // `opa test`'s statuses: 1 when nothing could be run.
                PolicyCommand::Test(args) => {
                    return match ahp_bridge_join::test_policies(&args, out) {
                        Ok(code) => ExitCode::from(code),
                        Err(e) => {
                            eprintln!("error: {:#}", anyhow::Error::from(e));
                            ExitCode::from(1)
                        }
                    };
                }
                PolicyCommand::Eval {
                    config,
                    point,
                    input,
                } => ahp_bridge_join::eval_policy(
                    &config,
                    &point,
                    &input,
                    out,
                    &mut std::io::stderr(),
                ),
            };
            match ran {
                Ok(true) => return ExitCode::SUCCESS,
                Ok(false) => return ExitCode::from(1),
                Err(e) => Err(e.into()),
            }
        }
        Command::Health { admin, config } => return health(admin, config.as_ref()),
        Command::Audit { command } => match audit(command) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
        Command::Serve { config, listen } => {
            ignore_sigxfsz();
            load(config.as_ref()).and_then(|mut cfg| {
                let traces = init_telemetry(&cfg)?;
                if let Some(l) = listen {
                    cfg.server.listen = l;
                    cfg.validate()?;
                }
                let format = cfg.log.format;
                let served = runtime().and_then(|rt| {
                    rt.block_on(ahp_bridge_join::serve(Arc::new(cfg), config, |line| {
                        say(format, line)
                    }))
                    .map_err(anyhow::Error::from)
                });
                // The async workers are gone: the last spans are sent from here.
                if let Some(t) = traces {
                    t.shutdown();
                }
                served
            })
        }
        Command::Demo {
            listen,
            allow_origin,
            policy,
            report,
        } => {
            init_logs(&LogConfig::default());
            let policy = policy.map(|dir| TryPolicy { dir, report });
            runtime().and_then(|rt| {
                rt.block_on(ahp_bridge_join::serve_demo(
                    listen,
                    &allow_origin,
                    policy.as_ref(),
                    |line| eprintln!("{line}"),
                ))
                .map_err(anyhow::Error::from)
            })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn health(admin: Option<std::net::SocketAddr>, config: Option<&PathBuf>) -> ExitCode {
    let cfg = match config.map(|path| Config::load(path)).transpose() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let addr = match (admin, &cfg) {
        (Some(a), _) => Some(a),
        (None, Some(cfg)) => cfg.admin.listen,
        (None, None) => ahp_bridge_join::config::DEFAULT_ADMIN_LISTEN.parse().ok(),
    };
    let Some(addr) = addr else {
        eprintln!("not ready: [admin] listen is off in that config; there is nothing to ask");
        return ExitCode::from(1);
    };
    let tls_cert = cfg
        .as_ref()
        .and_then(|c| c.admin.tls.as_ref())
        .map(|t| t.cert.as_path());
    match ahp_bridge_join::readyz(addr, tls_cert) {
        Ok((true, body)) => {
            println!("ready: {body}");
            ExitCode::SUCCESS
        }
        Ok((false, body)) => {
            println!("not ready: {body}");
            ExitCode::from(1)
        }
        Err(why) => {
            println!("not ready: {why}");
            ExitCode::from(1)
        }
    }
}

/// A file-size limit (RLIMIT_FSIZE) must fail the audit write with EFBIG,
/// which the log handles, instead of killing the process with SIGXFSZ.
fn ignore_sigxfsz() {
    // SAFETY: setting a signal to SIG_IGN installs no handler code; it runs
    // before any thread is started.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

fn audit(command: AuditCommand) -> anyhow::Result<ExitCode> {
    use ahp_bridge_join::audit::{self, keygen, load_public_key, series, verify_files, Filter};
    match command {
        AuditCommand::Verify {
            paths,
            pubkey,
            expect_head,
            against,
            instance,
        } => {
            let check = audit::Check {
                key: pubkey.as_deref().map(load_public_key).transpose()?,
                expect_head,
                against,
                instance,
            };
            let series = series(&paths)?;
            let files = series.files;
            if !series.skipped.is_empty() {
                println!(
                    "skipped (not of the log's series): {}",
                    series.skipped.join(", ")
                );
            }
            match verify_files(&files, &check)? {
                Ok(v) => {
                    print_verified(&v, &check, files.len());
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("audit verify: {e}");
                    Ok(ExitCode::from(1))
                }
            }
        }
        AuditCommand::Keygen { out } => {
            let kp = keygen(&out)?;
            println!(
                "private key: {} (mode 0600; set [audit] signing_key to it)",
                kp.private.display()
            );
            println!(
                "public key:  {} (for audit verify --pubkey)",
                kp.public.display()
            );
            println!("key id:      {}", kp.key_id);
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Show {
            paths,
            session,
            client,
            since,
            instance,
            outcome,
        } => {
            let files = series(&paths)?.files;
            let filter = Filter {
                session,
                client,
                since,
                instance,
                outcome,
            };
            audit::show(&files, &filter, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print_verified(
    v: &ahp_bridge_join::audit::Verified,
    check: &ahp_bridge_join::audit::Check,
    files: usize,
) {
    let in_files = if files > 1 {
        format!(" in {files} files")
    } else {
        String::new()
    };
    println!("ok: {} records{in_files}, chain intact", v.records);
    if v.records > 0 {
        println!("head: {}:{}", v.last_seq, v.head);
    }
    if check.key.is_some() {
        println!("signed: {} checkpoints verified", v.checkpoints);
        if v.unsigned_tail > 0 {
            println!(
                "unsigned tail: records {} to {} follow the last checkpoint; only --expect-head or --against vouch for them",
                v.last_seq - v.unsigned_tail + 1,
                v.last_seq
            );
        }
    } else {
        println!(
            "unsigned: no --pubkey, so {} checkpoints were not checked; a chain recomputed by someone who can write the file would pass",
            v.unchecked_checkpoints
        );
    }
    if check.expect_head.is_none() && check.against.is_none() {
        println!("tail: not checked (no --expect-head or --against); a cut tail or an emptied file would pass");
    }
    for n in &v.notes {
        println!("note: {n}");
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// A line for the person starting the bridge (where it listens), whatever
/// the log's filter: as it is in text, and in JSON one object with the keys
/// of every other log line, so a shipper reading `[log] format = "json"`
/// takes it like the rest.
fn say(format: LogFormat, line: String) {
    let shown = match format {
        LogFormat::Text => line,
        LogFormat::Json => serde_json::json!({
            "timestamp": jiff::Timestamp::now().to_string(),
            "level": "INFO",
            "message": line,
            "target": "ahp_bridge_join::run",
        })
        .to_string(),
    };
    eprintln!("{shown}");
}

/// `config check FILE`: the file loaded and validated, its policy summed up.
fn check_config(file: &Path) -> anyhow::Result<()> {
    let cfg = Config::load(file)?;
    let policy = Policy::from_config(&cfg)?;
    println!("{}: ok", file.display());
    println!("policy sha256 {}", policy.policy_sha256());
    if let Some(r) = policy.rego() {
        let points: Vec<&str> = r.points().map(|p| p.as_str()).collect();
        println!(
            "rego revision {} ({}; {} modules; points: {})",
            r.revision(),
            r.enforcement().as_str(),
            r.modules().len(),
            points.join(", ")
        );
        for w in r.warnings() {
            println!("warning: {w}");
        }
    }
    print!("{}", cfg.policy_table());
    Ok(())
}
