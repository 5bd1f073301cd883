//! The command line: parse, load config, hand over.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use ahp_copilot_bridge::config::Config;
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
    /// Run the AHP host in front of the Copilot runtime.
    Serve {
        /// TOML config file (see config/bridge.toml); defaults apply without one.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Address to listen on; overrides [server] listen.
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
    },
    /// Everything offline: a scripted model, the real runtime, the AHP host.
    Demo {
        #[arg(long, default_value = "127.0.0.1:8421")]
        listen: std::net::SocketAddr,
        /// A browser origin that may connect besides loopback on any port,
        /// e.g. https://ui.example or http://192.168.1.5:* (repeatable).
        #[arg(long = "allow-origin", value_name = "ORIGIN")]
        allow_origin: Vec<String>,
    },
    /// Audit log tools.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Config tools.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Check the hash chain of an audit log; exit 0 when it holds.
    Verify { file: PathBuf },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate a config file and exit.
    Check { file: PathBuf },
}

fn load(path: Option<&PathBuf>) -> anyhow::Result<Config> {
    match path {
        Some(p) => Config::load(p),
        None => {
            let mut c = Config::default();
            c.apply_env();
            c.validate()?;
            Ok(c)
        }
    }
}

fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AHP_BRIDGE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal, never into journald or a file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Config {
            command: ConfigCommand::Check { file },
        } => Config::load(&file).map(|_| {
            println!("{}: ok", file.display());
        }),
        Command::Audit {
            command: AuditCommand::Verify { file },
        } => match ahp_copilot_bridge::audit::verify::verify_file(&file) {
            Ok(v) => {
                println!("ok: {} records, chain intact", v.records);
                for line in v.torn_lines {
                    println!("note: line {line} is a record torn by a crash mid-write; the chain skips it");
                }
                Ok(())
            }
            Err(e) => {
                eprintln!("audit verify: {e}");
                return ExitCode::from(1);
            }
        },
        Command::Serve { config, listen } => {
            init_logs();
            load(config.as_ref()).and_then(|mut cfg| {
                if let Some(l) = listen {
                    cfg.server.listen = l;
                    cfg.validate()?;
                }
                runtime()?.block_on(ahp_copilot_bridge::cli::serve(Arc::new(cfg)))
            })
        }
        Command::Demo {
            listen,
            allow_origin,
        } => {
            init_logs();
            runtime()
                .and_then(|rt| rt.block_on(ahp_copilot_bridge::cli::demo(listen, &allow_origin)))
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

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}
