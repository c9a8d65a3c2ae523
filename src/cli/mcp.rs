//! `vibedesk mcp …` (docs §13): the clap commands and their dispatch only;
//! the work is in the `mcp` room.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::Subcommand;

use super::{CliError, exit, init_logging, load_config};
use crate::config::Overrides;
use crate::mcp::ServerState;
use crate::mcp::{
    Auth, ConnectionLimits, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CLIENT_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE, HttpOptions, Listen,
    SessionLimits, TOKEN_FILE, serve_http, stored_token,
};
use crate::mcp::{ServeOptions, ServePolicy, VibedeskServer};
use crate::mcp::{probe, render_list, render_tools};

#[derive(Subcommand, Debug)]
pub enum McpCommand {
    /// The MCP servers of config.toml: each started, with its state and tool count.
    List,
    /// The tools of the configured MCP servers (or of SERVER), as the agent sees them.
    Tools {
        /// Only this server's tools.
        server: Option<String>,
    },
    /// Serve vibedesk's research tools (backtest, market data, indicators, options, portfolios, risk, memory, skills) to another agent over MCP: stdio, or --http.
    Serve(ServeArgs),
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Streamable HTTP on this address (e.g. 127.0.0.1:8808, endpoint /mcp) instead of stdio. Loopback only unless --allow-remote. Every request must carry the bearer token kept in <config>/mcp-serve.token (made and shown once on first use).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Allow a non-loopback --http address; needs --bearer-token-env.
    #[arg(long, requires = "http")]
    pub allow_remote: bool,
    /// The environment variable holding the bearer token every HTTP request must carry (instead of the stored token).
    #[arg(
        long,
        value_name = "VAR",
        requires = "http",
        conflicts_with = "no_token"
    )]
    pub bearer_token_env: Option<String>,
    /// Serve loopback HTTP without a token: any local process (not a browser page) may then use the tools.
    #[arg(long, requires = "http")]
    pub no_token: bool,
    /// Most HTTP sessions open at once; past it new clients get 503.
    #[arg(long, value_name = "N", requires = "http", default_value_t = DEFAULT_MAX_SESSIONS, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_sessions: u32,
    /// Seconds without a message after which an HTTP session is closed.
    #[arg(long, value_name = "SECONDS", requires = "http", default_value_t = DEFAULT_SESSION_IDLE.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub session_idle: u64,
    /// Seconds a connection has to send a request's headers before it is closed.
    #[arg(long, value_name = "SECONDS", requires = "http", default_value_t = DEFAULT_HEADER_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=600))]
    pub header_timeout: u64,
    /// Most HTTP connections open at once from one client address; past it a new one gets 503.
    #[arg(long, value_name = "N", requires = "http", default_value_t = DEFAULT_MAX_CLIENT_CONNECTIONS, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_client_connections: u32,
    /// Most HTTP connections open at once from everyone; past it a new one gets 503.
    #[arg(long, value_name = "N", requires = "http", default_value_t = DEFAULT_MAX_CONNECTIONS, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_connections: u32,
    /// Offer `remember`: clients may save memories (marked with their source) and forget or reinforce those MCP clients wrote; never the user's own.
    #[arg(long)]
    pub allow_memory_write: bool,
    /// Offer `session_search`: clients may search past session transcripts (redacted).
    #[arg(long)]
    pub allow_sessions: bool,
    /// Most heavy calls (sweep, backtest, the statistics and pricers) run at once; the others wait for a place (default: one per core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_heavy_calls: Option<u32>,
    /// The workspace the tools resolve local files in (default: the current directory).
    #[arg(short = 'C', long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

pub async fn mcp(command: McpCommand) -> Result<(), CliError> {
    match command {
        McpCommand::Serve(args) => serve(args).await,
        McpCommand::List => servers(None, false).await,
        McpCommand::Tools { server } => servers(server, true).await,
    }
}

/// `list` (or `tools`, with `show_tools`): start each configured server once
/// and report; success when every server shown is ready.
async fn servers(only: Option<String>, show_tools: bool) -> Result<(), CliError> {
    let config = load_config(&Overrides::default())?;
    // Servers' stderr goes to the log, never the terminal.
    let _log_guard = init_logging(&config);
    let settings = config.mcp.as_ref().map_err(CliError::usage)?;
    let statuses = probe(&settings.servers, &super::mcp_start_options(&config)).await;
    if statuses.is_empty() {
        println!(
            "no MCP servers are configured; add [mcp_servers.NAME] to {} (docs §13.1)",
            config.config_file.display()
        );
        return Ok(());
    }
    let text = if show_tools {
        render_tools(&statuses, only.as_deref()).map_err(CliError::usage)?
    } else {
        render_list(&statuses, "")
    };
    print!("{text}");
    // The states are on stdout already.
    if statuses
        .iter()
        .filter(|s| only.as_ref().is_none_or(|n| *n == s.name))
        .all(|s| s.state == ServerState::Ready)
    {
        Ok(())
    } else {
        Err(CliError::quiet(exit::FAILED))
    }
}

/// Stdout carries only protocol: every message here goes to stderr or the log.
async fn serve(args: ServeArgs) -> Result<(), CliError> {
    // The address is checked before anything loads, so a refusal costs nothing.
    let listen = match args.http {
        None => None,
        Some(addr) => {
            // The token variable may have left the environment at start.
            let checked = Listen::check(
                addr,
                args.allow_remote,
                args.bearer_token_env.as_deref(),
                args.no_token,
                crate::secrets::var,
            );
            Some(checked.map_err(|e| {
                let code = if e.is_usage() {
                    exit::USAGE
                } else {
                    exit::FAILED
                };
                CliError::new(code, e)
            })?)
        }
    };
    let config = load_config(&Overrides::default())?;
    let _log = init_logging(&config);
    let workspace = super::workspace::serve_workspace(args.workspace.as_deref())?;
    let setup = super::AgentSetup::new(&config)?;
    for note in &setup.notes {
        tracing::warn!("mcp serve: {note}");
    }
    let options = ServeOptions {
        registry: setup.registry.clone(),
        runs_root: config.paths.data_dir.join("mcp"),
        workspace,
        scheduler: config.agent.scheduler.clone(),
        policy: ServePolicy {
            memory_write: args.allow_memory_write,
            sessions: args.allow_sessions,
        },
        heavy_calls: args
            .max_heavy_calls
            .map_or_else(crate::mcp::default_heavy_calls, |n| n as usize),
    };
    let http = match listen {
        None => None,
        Some(listen) => Some(HttpOptions {
            addr: listen.addr,
            bearer_token: bearer_token(listen.auth, &config.paths.config_dir)?,
            limits: SessionLimits {
                max_sessions: args.max_sessions as usize,
                idle: std::time::Duration::from_secs(args.session_idle),
            },
            connections: ConnectionLimits {
                header_timeout: std::time::Duration::from_secs(args.header_timeout),
                per_client: args.max_client_connections as usize,
                total: args.max_connections as usize,
            },
        }),
    };
    run_server(options, http).await
}

/// The token HTTP clients must send; a stored one made now is shown on
/// stderr, this once (docs §13.4.2).
fn bearer_token(auth: Auth, config_dir: &Path) -> Result<Option<String>, CliError> {
    let path = config_dir.join(TOKEN_FILE);
    match auth {
        Auth::Token(token) => Ok(Some(token)),
        Auth::Off => Ok(None),
        Auth::Stored => {
            let stored = stored_token(&path).map_err(CliError::failed)?;
            if stored.created {
                eprintln!(
                    "vibedesk: made a bearer token for `mcp serve` and saved it to {} (mode 0600). It is shown this once:\n  {}\nvibedesk: clients send `Authorization: Bearer <token>`; later starts read the file",
                    path.display(),
                    stored.token
                );
            } else {
                eprintln!(
                    "vibedesk: clients must send the bearer token kept in {}",
                    path.display()
                );
            }
            Ok(Some(stored.token))
        }
    }
}

async fn run_server(options: ServeOptions, http: Option<HttpOptions>) -> Result<(), CliError> {
    let server = VibedeskServer::new(options).map_err(CliError::failed)?;
    tracing::info!("mcp serve: run dir {}", server.run_dir().display());
    let Some(http) = http else {
        return server.serve_stdio().await.map_err(CliError::failed);
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        on_signal.cancel();
    });
    serve_http(server, http, cancel, |addr| {
        eprintln!("vibedesk: serving MCP on http://{addr}/mcp");
    })
    .await
    .map_err(CliError::failed)
}
