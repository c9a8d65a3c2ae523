//! `vibedesk mcp …` (docs §13): the clap commands and their dispatch only;
//! the work is in the `mcp` room.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Subcommand;

use super::{exit, init_logging, load_config};
use crate::config::Overrides;
use crate::mcp::ServerState;
use crate::mcp::client_cli::{probe, render_list, render_tools};
use crate::mcp::server::{ServeOptions, VibedeskServer};
use crate::mcp::server_http::{Listen, serve_http};

#[derive(Subcommand, Debug)]
pub enum McpCommand {
    /// The MCP servers of config.toml: each started, with its state and tool count.
    List,
    /// The tools of the configured MCP servers (or of SERVER), as the agent sees them.
    Tools {
        /// Only this server's tools.
        server: Option<String>,
    },
    /// Serve vibedesk's research tools (backtest, market data, indicators, memory, skills) to another agent over MCP: stdio, or --http.
    Serve(ServeArgs),
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Streamable HTTP on this address (e.g. 127.0.0.1:8808, endpoint /mcp) instead of stdio. Loopback only unless --allow-remote.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Allow a non-loopback --http address; needs --bearer-token-env.
    #[arg(long, requires = "http")]
    pub allow_remote: bool,
    /// The environment variable holding the bearer token every HTTP request must carry.
    #[arg(long, value_name = "VAR", requires = "http")]
    pub bearer_token_env: Option<String>,
    /// The workspace the tools resolve local files in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

pub async fn mcp(command: McpCommand) -> u8 {
    match command {
        McpCommand::Serve(args) => serve(args).await,
        other => servers(other).await,
    }
}

/// `list` and `tools`: start each configured server once and report.
async fn servers(command: McpCommand) -> u8 {
    let config = match load_config(&Overrides::default()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // Servers' stderr goes to the log, never the terminal.
    let _log_guard = init_logging(&config);
    let statuses = match probe(&config.config_file).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vibedesk: {e}");
            return exit::USAGE;
        }
    };
    if statuses.is_empty() {
        println!(
            "no MCP servers are configured; add [mcp_servers.NAME] to {} (docs §13.1)",
            config.config_file.display()
        );
        return exit::OK;
    }
    let (text, only) = match command {
        McpCommand::List => (render_list(&statuses, ""), None),
        McpCommand::Tools { server } => match render_tools(&statuses, server.as_deref()) {
            Ok(t) => (t, server),
            Err(e) => {
                eprintln!("vibedesk: {e}");
                return exit::USAGE;
            }
        },
        McpCommand::Serve(_) => return exit::USAGE,
    };
    print!("{text}");
    // Success when every server shown is ready.
    if statuses
        .iter()
        .filter(|s| only.as_ref().is_none_or(|n| *n == s.name))
        .all(|s| s.state == ServerState::Ready)
    {
        exit::OK
    } else {
        exit::FAILED
    }
}

/// Stdout carries only protocol: every message here goes to stderr or the log.
async fn serve(args: ServeArgs) -> u8 {
    // The address is checked before anything loads, so a refusal costs nothing.
    let listen = match args.http {
        None => None,
        Some(addr) => {
            let env = |var: &str| std::env::var(var).ok();
            match Listen::check(
                addr,
                args.allow_remote,
                args.bearer_token_env.as_deref(),
                env,
            ) {
                Ok(listen) => Some(listen),
                Err(e) => {
                    eprintln!("vibedesk: {e}");
                    return if e.is_usage() {
                        exit::USAGE
                    } else {
                        exit::FAILED
                    };
                }
            }
        }
    };
    let config = match super::load_config(&Overrides::default()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let _log = super::init_logging(&config);
    let workspace = match args.workspace.map_or_else(std::env::current_dir, Ok) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("vibedesk: cannot read the current directory: {e}");
            return exit::FAILED;
        }
    };
    let setup = super::AgentSetup::new(&config);
    for note in &setup.notes {
        tracing::warn!("mcp serve: {note}");
    }
    let options = ServeOptions {
        registry: setup.registry.clone(),
        runs_root: config.paths.data_dir.join("mcp"),
        workspace,
        result_limit: config.agent.scheduler.result_limit,
    };
    run_server(options, listen).await
}

async fn run_server(options: ServeOptions, listen: Option<Listen>) -> u8 {
    let server = match VibedeskServer::new(options) {
        Ok(server) => server,
        Err(e) => return failed(e),
    };
    tracing::info!("mcp serve: run dir {}", server.run_dir().display());
    let Some(listen) = listen else {
        return server
            .serve_stdio()
            .await
            .map_or_else(failed, |()| exit::OK);
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        on_signal.cancel();
    });
    serve_http(server, listen, cancel, |addr| {
        eprintln!("vibedesk: serving MCP on http://{addr}/mcp");
    })
    .await
    .map_or_else(failed, |()| exit::OK)
}

fn failed(e: impl std::fmt::Display) -> u8 {
    eprintln!("vibedesk: {e}");
    exit::FAILED
}
