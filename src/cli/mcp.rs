//! `vibedesk mcp`: the clap commands and their dispatch only; the work is
//! in the `mcp` room (docs §13).

use super::{exit, init_logging, load_config};
use crate::config::Overrides;
use crate::mcp::ServerState;
use crate::mcp::client_cli::{probe, render_list, render_tools};

#[derive(clap::Subcommand, Debug)]
pub enum McpCommand {
    /// The MCP servers of config.toml: each started, with its state and tool count.
    List,
    /// The tools of the configured MCP servers (or of SERVER), as the agent sees them.
    Tools {
        /// Only this server's tools.
        server: Option<String>,
    },
}

pub async fn mcp(command: McpCommand) -> u8 {
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
