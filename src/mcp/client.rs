//! The MCP client (docs §13.2): starts the configured servers with the
//! session, in parallel, each bounded by its start-up timeout, and turns
//! their tools into registry tools ([`super::tool::McpTool`]).
//!
//! A server that fails to start or dies later is reported with
//! `mcp_server_status` and never blocks the others or the run. A stdio
//! server is a child in its own process group, with only its configured
//! `env` plus the sandbox allow-list (docs §6.1), its stderr in the log; the
//! whole group is killed when the session ends, on drop as well.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::{
    NotificationContext, QuitReason, RunningService, RunningServiceCancellationToken,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::client_link::{ServerLink, ToolSummary};
use super::config::{McpServerConfig, McpTransport};
use super::tool::McpTool;
use crate::tools::{Registry, Tool};

/// Why a server did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the bearer token variable {0} is not set")]
    MissingToken(String),
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    #[error("listing its tools failed: {0}")]
    ListTools(String),
    #[error("did not start within {0:.1}s (startup_timeout_s)")]
    Timeout(f64),
}

/// Receives what the server sends unasked: progress notifications, routed
/// to the call that owns the progress token.
#[derive(Clone, Default)]
pub(crate) struct Handler {
    pub(crate) progress: ProgressDispatcher,
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.handle_notification(params).await;
    }

    /// Servers see vibedesk, not the SDK, as their client.
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::default(),
            rmcp::model::Implementation::new("vibedesk", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A server's lifecycle state; the `mcp_server_status` event carries it
/// (docs §13.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    Starting,
    Ready,
    Failed,
    Exited,
}

/// Where state changes go: the caller turns them into `mcp_server_status`
/// events, so this room needs nothing of the agent's.
pub type StatusSink = Arc<dyn Fn(&ServerStatus) + Send + Sync>;

/// A server's state as the session sees it.
#[derive(Clone, Debug, Serialize)]
pub struct ServerStatus {
    pub name: String,
    /// `command args…` or the URL.
    pub target: String,
    pub state: ServerState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub tools: Vec<ToolSummary>,
}

/// A server that answered: its connection and what ends it.
struct Live {
    tools: Vec<Arc<McpTool>>,
    cancel: RunningServiceCancellationToken,
    monitor: tokio::task::JoinHandle<()>,
}

struct Server {
    status: Arc<Mutex<ServerStatus>>,
    live: Option<Live>,
    /// The stdio child's process group (its pid: it leads its own group).
    pgid: Arc<Mutex<Option<i32>>>,
    /// Set before an intended stop, so the monitor does not report `exited`.
    stopping: Arc<AtomicBool>,
}

/// The session's MCP servers. Dropping it kills the stdio children's
/// process groups; [`McpClients::shutdown`] also closes the connections.
#[derive(Default)]
pub struct McpClients {
    servers: Vec<Server>,
}

impl std::fmt::Debug for McpClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.statuses()).finish()
    }
}

impl McpClients {
    /// Starts every configured server at once and waits until each is
    /// ready or has failed (at most the slowest start-up timeout). Each
    /// outcome goes to `sink`, as does a later exit of a server that was
    /// ready.
    pub async fn start(configs: &[McpServerConfig], sink: &StatusSink) -> Self {
        let servers = join_all(configs.iter().map(|c| start_server(c, sink))).await;
        McpClients { servers }
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Every server's current state, in configuration order.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.servers
            .iter()
            .filter_map(|s| s.status.lock().ok().map(|g| g.clone()))
            .collect()
    }

    /// The tools of the servers that started, as registry tools.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.servers
            .iter()
            .filter_map(|s| s.live.as_ref())
            .flat_map(|l| l.tools.iter().map(|t| t.clone() as Arc<dyn Tool>))
            .collect()
    }

    /// Adds the tools to `registry`. A name that is taken (two servers
    /// mapping to the same sanitised name) keeps the first and is logged.
    pub fn register(&self, registry: &mut Registry) {
        for tool in self.tools() {
            if let Err(e) = registry.register(tool) {
                tracing::warn!("MCP tool not registered: {e}");
            }
        }
    }

    /// Ends every server: closes the connections and kills the stdio
    /// children's process groups.
    pub async fn shutdown(mut self) {
        let servers = std::mem::take(&mut self.servers);
        let mut monitors = Vec::new();
        for mut server in servers {
            server.stopping.store(true, Ordering::SeqCst);
            kill_group(&server.pgid);
            if let Some(live) = server.live.take() {
                live.cancel.cancel();
                monitors.push(live.monitor);
            }
        }
        // The monitors own the connections; closing them is quick once the
        // children are gone, and never worth holding up the exit for long.
        let _ = tokio::time::timeout(Duration::from_secs(2), join_all(monitors)).await;
    }
}

impl Drop for McpClients {
    fn drop(&mut self) {
        for server in &mut self.servers {
            server.stopping.store(true, Ordering::SeqCst);
            kill_group(&server.pgid);
            if let Some(live) = server.live.take() {
                live.cancel.cancel();
                live.monitor.abort();
            }
        }
    }
}

/// SIGKILL to the child's process group. The group is the child's own
/// (`process_group(0)`), so nothing else of the user's is in it.
fn kill_group(pgid: &Mutex<Option<i32>>) {
    let Some(pgid) = pgid.lock().ok().and_then(|mut g| g.take()) else {
        return;
    };
    use nix::sys::signal::{Signal, killpg};
    if let Err(e) = killpg(nix::unistd::Pid::from_raw(pgid), Signal::SIGKILL)
        && e != nix::errno::Errno::ESRCH
    {
        tracing::warn!(pgid, "cannot kill an MCP server's process group: {e}");
    }
}

async fn start_server(config: &McpServerConfig, sink: &StatusSink) -> Server {
    let mut server = Server {
        status: Arc::new(Mutex::new(ServerStatus {
            name: config.name.clone(),
            target: config.target(),
            state: ServerState::Starting,
            reason: None,
            tools: Vec::new(),
        })),
        live: None,
        pgid: Arc::new(Mutex::new(None)),
        stopping: Arc::new(AtomicBool::new(false)),
    };
    let started = tokio::time::timeout(config.startup_timeout, connect(config, &server.pgid))
        .await
        .unwrap_or_else(|_| Err(StartError::Timeout(config.startup_timeout.as_secs_f64())));
    let (service, remote_tools) = match started {
        Ok(ok) => ok,
        Err(e) => {
            tracing::warn!(server = %config.name, "MCP server failed to start: {e}");
            // What a timed-out start left running goes with its group.
            kill_group(&server.pgid);
            if let Ok(mut s) = server.status.lock() {
                s.state = ServerState::Failed;
                s.reason = Some(e.to_string());
                sink(&s);
            }
            return server;
        }
    };
    let link = Arc::new(ServerLink::new(
        &config.name,
        service.peer().clone(),
        service.service().progress.clone(),
    ));
    let tools: Vec<Arc<McpTool>> = remote_tools
        .iter()
        .filter(|t| config.offers(&t.name))
        .map(|t| Arc::new(McpTool::new(link.clone(), t, config.tool_timeout)))
        .collect();
    if let Ok(mut s) = server.status.lock() {
        s.state = ServerState::Ready;
        s.tools = tools.iter().map(|t| t.summary()).collect();
        sink(&s);
    }
    tracing::info!(server = %config.name, tools = tools.len(), "MCP server ready");
    let cancel = service.cancellation_token();
    let monitor = tokio::spawn(watch_exit(
        service,
        link,
        Watched {
            status: server.status.clone(),
            stopping: server.stopping.clone(),
            pgid: server.pgid.clone(),
        },
        sink.clone(),
    ));
    server.live = Some(Live {
        tools,
        cancel,
        monitor,
    });
    server
}

/// What the exit monitor updates.
struct Watched {
    status: Arc<Mutex<ServerStatus>>,
    stopping: Arc<AtomicBool>,
    pgid: Arc<Mutex<Option<i32>>>,
}

/// Waits for the connection to end; an end nobody asked for is `exited`.
async fn watch_exit(
    service: RunningService<RoleClient, Handler>,
    link: Arc<ServerLink>,
    watched: Watched,
    sink: StatusSink,
) {
    let Watched {
        status,
        stopping,
        pgid,
    } = watched;
    let lost = link.lost_token();
    let quit = tokio::select! {
        quit = service.waiting() => Some(quit),
        // Dropping the service (with the future) closes the connection.
        _ = lost.cancelled() => None,
    };
    if stopping.load(Ordering::SeqCst) {
        return;
    }
    let reason = match quit {
        None => link
            .exit_reason()
            .unwrap_or_else(|| "the connection was lost".into()),
        Some(Ok(QuitReason::Closed)) => {
            "the server closed the connection (it exited or crashed)".into()
        }
        Some(Ok(QuitReason::Cancelled)) => "the connection was cancelled".into(),
        Some(Ok(QuitReason::JoinError(e)) | Err(e)) => format!("the connection task failed: {e}"),
        Some(Ok(other)) => format!("the connection ended: {other:?}"),
    };
    tracing::warn!(server = %link.name, "MCP server gone: {reason}");
    // What the server left in its group goes now, while the group id is
    // still its own, rather than at the session's end.
    kill_group(&pgid);
    link.mark_exited(&reason);
    if let Ok(mut s) = status.lock() {
        s.state = ServerState::Exited;
        s.reason = Some(reason);
        sink(&s);
    }
}

type Connected = (RunningService<RoleClient, Handler>, Vec<rmcp::model::Tool>);

/// Spawns or connects, shakes hands and lists the tools.
async fn connect(
    config: &McpServerConfig,
    pgid: &Mutex<Option<i32>>,
) -> Result<Connected, StartError> {
    let handler = Handler::default();
    let service = match &config.transport {
        McpTransport::Stdio { command, args, env } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args)
                .env_clear()
                .envs(child_env(&crate::sandbox::env::parent_env(), env))
                // Its own group, so the whole tree can be killed at the end
                // and a Ctrl-C at the terminal reaches only vibedesk.
                .process_group(0)
                .kill_on_drop(true);
            let (child, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|source| StartError::Spawn {
                    command: command.clone(),
                    source,
                })?;
            if let (Some(pid), Ok(mut slot)) = (child.id(), pgid.lock()) {
                *slot = i32::try_from(pid).ok();
            }
            if let Some(stderr) = stderr {
                tokio::spawn(log_stderr(config.name.clone(), stderr));
            }
            handler
                .serve(child)
                .await
                .map_err(|e| StartError::Handshake(e.to_string()))?
        }
        McpTransport::Http {
            url,
            bearer_token_env,
        } => {
            let mut http = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            if let Some(var) = bearer_token_env {
                let token = std::env::var(var)
                    .ok()
                    .filter(|t| !t.trim().is_empty())
                    .ok_or_else(|| StartError::MissingToken(var.clone()))?;
                http = http.auth_header(token);
            }
            handler
                .serve(StreamableHttpClientTransport::from_config(http))
                .await
                .map_err(|e| StartError::Handshake(e.to_string()))?
        }
    };
    let tools = service
        .peer()
        .list_all_tools()
        .await
        .map_err(|e| StartError::ListTools(e.to_string()))?;
    Ok((service, tools))
}

/// The stdio child's environment: the sandbox allow-list of the parent's
/// (docs §6.1; secrets never pass) and then the entry's own `env`, which the
/// user wrote for this server and so passes as given.
pub fn child_env(
    parent: &BTreeMap<String, String>,
    configured: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    use crate::sandbox::env::{is_allowed, is_forbidden};
    let mut env: BTreeMap<String, String> = parent
        .iter()
        .filter(|(k, _)| is_allowed(k) && !is_forbidden(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    env.extend(configured.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// A server's stderr goes to the log, a line at a time, never the screen.
async fn log_stderr(server: String, stderr: tokio::process::ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(target: "vibedesk::mcp::stderr", server = %server, "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_gets_the_allow_list_and_its_own_env_only() {
        let parent: BTreeMap<String, String> = [
            ("PATH", "/usr/bin"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("HOME", "/root"),
            ("LC_ALL", "C.UTF-8"),
            ("SOME_TOKEN", "t"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let own: BTreeMap<String, String> = [("TZ".to_string(), "UTC".to_string())].into();
        let env = child_env(&parent, &own);
        assert_eq!(env.get("PATH").map(String::as_str), Some("/usr/bin"));
        assert_eq!(env.get("LC_ALL").map(String::as_str), Some("C.UTF-8"));
        assert_eq!(env.get("TZ").map(String::as_str), Some("UTC"));
        for gone in ["OPENAI_API_KEY", "HOME", "SOME_TOKEN"] {
            assert!(!env.contains_key(gone), "{gone} leaked");
        }
    }
}
