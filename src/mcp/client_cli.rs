//! What `vibedesk mcp list`, `vibedesk mcp tools [SERVER]` and `vibedesk
//! doctor` say about the configured servers (docs §13.2): each is started
//! as a session would start it, reported, and stopped.

use std::fmt::Write as _;
use std::sync::Arc;

use super::client::{McpClients, ServerState, ServerStatus, StartOptions, StatusSink};
use super::client_link::ToolSummary;
use super::config::McpServerConfig;

#[derive(Debug, thiserror::Error)]
pub enum McpCliError {
    #[error("no MCP server named '{name}' is configured (configured: {known})")]
    UnknownServer { name: String, known: String },
}

/// Starts every configured server (in parallel, each within its start-up
/// timeout), takes their states and stops them again.
pub async fn probe(servers: &[McpServerConfig], options: &StartOptions) -> Vec<ServerStatus> {
    if servers.is_empty() {
        return Vec::new();
    }
    let quiet: StatusSink = Arc::new(|_| {});
    let clients = McpClients::start(servers, options, &quiet).await;
    let statuses = clients.statuses();
    clients.shutdown().await;
    statuses
}

fn state_name(state: ServerState) -> &'static str {
    match state {
        ServerState::Starting => "starting",
        ServerState::Ready => "ready",
        ServerState::Failed => "failed",
        ServerState::Exited => "exited",
    }
}

/// One line per server: name, state, tool count, target, and the reason of
/// a failure. `indent` prefixes every line.
pub fn render_list(statuses: &[ServerStatus], indent: &str) -> String {
    let width = statuses.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for s in statuses {
        let _ = write!(
            out,
            "{indent}{:width$}  {:7} {:>3} tool(s)  {}",
            s.name,
            state_name(s.state),
            s.tools.len(),
            s.target
        );
        if let Some(reason) = &s.reason {
            let _ = write!(out, "\n{indent}{:width$}  {reason}", "");
        }
        for note in &s.notes {
            let _ = write!(out, "\n{indent}{:width$}  note: {note}", "");
        }
        out.push('\n');
    }
    out
}

/// The tools of every server, or of `server` only, as the agent sees them.
pub fn render_tools(
    statuses: &[ServerStatus],
    server: Option<&str>,
) -> Result<String, McpCliError> {
    if let Some(name) = server
        && !statuses.iter().any(|s| s.name == name)
    {
        return Err(McpCliError::UnknownServer {
            name: name.to_string(),
            known: statuses
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let mut out = String::new();
    for s in statuses
        .iter()
        .filter(|s| server.is_none_or(|n| n == s.name))
    {
        let _ = writeln!(out, "{} ({})", s.name, state_name(s.state));
        if let Some(reason) = &s.reason {
            let _ = writeln!(out, "  {reason}");
        }
        for t in &s.tools {
            let _ = writeln!(out, "{}", tool_line(t));
        }
        if !s.left_out.is_empty() {
            let _ = writeln!(
                out,
                "  left out by the cap on MCP tools per request ({}):",
                s.left_out.len()
            );
            for t in &s.left_out {
                let _ = writeln!(out, "{}", tool_line(t));
            }
        }
        for note in &s.notes {
            let _ = writeln!(out, "  note: {note}");
        }
    }
    Ok(out)
}

/// `  name  [read-only]  description`.
fn tool_line(t: &ToolSummary) -> String {
    let desc = crate::tools::finalize::preview(&t.description.replace('\n', " "), 100);
    let mode = if t.readonly {
        "read-only"
    } else {
        "runs alone"
    };
    format!("  {}  [{mode}]  {desc}", t.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(name: &str, state: ServerState, reason: Option<&str>) -> ServerStatus {
        ServerStatus {
            name: name.into(),
            target: format!("{name}-server"),
            state,
            reason: reason.map(String::from),
            tools: if state == ServerState::Ready {
                vec![ToolSummary {
                    name: format!("mcp__{name}__now"),
                    remote_name: "now".into(),
                    description: "The time.\nIn a zone.".into(),
                    readonly: true,
                }]
            } else {
                Vec::new()
            },
            left_out: Vec::new(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn listings_name_state_tools_and_reasons() {
        let all = [
            status("time", ServerState::Ready, None),
            status(
                "remote",
                ServerState::Failed,
                Some("did not start within 10.0s"),
            ),
        ];
        let list = render_list(&all, "  ");
        assert!(
            list.contains("  time    ready     1 tool(s)  time-server"),
            "{list}"
        );
        assert!(list.contains("remote  failed    0 tool(s)"), "{list}");
        assert!(list.contains("did not start within 10.0s"), "{list}");
        let tools = render_tools(&all, Some("time")).unwrap();
        assert!(
            tools.contains("mcp__time__now  [read-only]  The time. In a zone."),
            "{tools}"
        );
        assert!(!tools.contains("remote"), "{tools}");
        let e = render_tools(&all, Some("nope")).unwrap_err().to_string();
        assert!(e.contains("'nope'") && e.contains("time, remote"), "{e}");
    }
}
