//! The MCP client (docs §13.2): starts the configured servers in the
//! background, in parallel, each bounded by its start-up timeout, and turns
//! their tools into registry tools ([`super::tool::McpTool`]) that join the
//! session's [`LateTools`] as each server becomes ready.
//!
//! A server that fails to start or dies later is reported with
//! `mcp_server_status`, with a reason that says what happened in words
//! ([`StartError`]), and never blocks the others or the run. A stdio server
//! is a child in a PID namespace and process group of its own, with only
//! its configured `env` plus the sandbox allow-list (docs §6.1), a job
//! record ([`super::spawn`]) and its stderr in its own capped log
//! ([`super::stdio`]); the whole group is killed when the session ends, on
//! drop as well. The tools offered are checked and capped together
//! ([`super::offer`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::{
    NotificationContext, QuitReason, RunningService, RunningServiceCancellationToken,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::client_link::{ProgressRoutes, ServerLink, ToolSummary};
use super::config::{McpServerConfig, McpTransport};
use super::offer::{Checked, allocate, checked_tools, left_out_note};
use super::stdio::{StdioWatch, describe_status, watch_child};
use super::tool::McpTool;
use crate::tools::{LateTools, Registry, Tool};

/// Why a server did not start, in words that stay the same from one run to
/// the next (docs §13.2).
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
    /// The child ended before it was ready: its status and the last line
    /// it wrote to stderr (a traceback's last line says what went wrong).
    #[error("{status}: {}", last_line.as_deref().unwrap_or("(nothing on stderr)"))]
    Exited {
        status: String,
        last_line: Option<String>,
    },
    #[error("did not answer `{request}` within {} s", seconds_label(*.timeout))]
    NoAnswer {
        request: &'static str,
        timeout: Duration,
    },
    #[error(
        "wrote non-MCP output to stdout: {0} (stdout must carry MCP messages only; a server logs to stderr)"
    )]
    NonMcpOutput(String),
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    /// An HTTP server's handshake failed: the innermost cause (connection
    /// refused, an HTTP status), not the transport's type names.
    #[error("the MCP handshake with {url} failed: {cause}")]
    Unreachable { url: String, cause: String },
    #[error("listing its tools failed: {0}")]
    ListTools(String),
}

/// The innermost error of a chain: what went wrong, without the layers'
/// type names around it.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let mut cur = e;
    loop {
        // The HTTP client's own error is held without `source`.
        let next = match cur.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            Some(StreamableHttpError::Client(inner)) => {
                Some(inner as &(dyn std::error::Error + 'static))
            }
            _ => cur.source(),
        };
        match next {
            Some(n) => cur = n,
            None => return cur.to_string(),
        }
    }
}

/// Why a handshake failed, in words: a transport failure's innermost cause
/// (rmcp's own message names the transport's generic types instead).
fn handshake_cause(e: &rmcp::service::ClientInitializeError) -> String {
    match e {
        rmcp::service::ClientInitializeError::TransportError { error, .. } => root_cause(error),
        other => other.to_string(),
    }
}

/// `10`, `1.5`: seconds as a person writes them.
pub fn seconds_label(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        let t = format!("{s:.2}");
        t.trim_end_matches('0').to_string()
    }
}

/// Receives what the server sends unasked: progress notifications, routed
/// to the call that owns the progress token.
#[derive(Clone, Default)]
pub(crate) struct Handler {
    pub(crate) progress: ProgressRoutes,
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.route(params);
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
    /// The tools offered.
    pub tools: Vec<ToolSummary>,
    /// Tools left out by the cap on MCP tools per request (docs §13.3).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<ToolSummary>,
    /// What the user should know of a ready server: tools skipped for an
    /// invalid schema, tools left out by the cap and how to choose.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// How servers are started.
#[derive(Clone, Debug)]
pub struct StartOptions {
    /// Where each stdio server's stderr log goes (`<dir>/<name>.log`);
    /// `None` keeps only the tail that failure reasons quote.
    pub log_dir: Option<PathBuf>,
    /// Where each stdio server's job record goes while it runs (the
    /// sandbox's jobs dir, docs §6.2), so that the next start kills one a
    /// crash left running; `None` records nothing.
    pub jobs_dir: Option<PathBuf>,
    /// MCP tools offered per request, all servers together (docs §13.3).
    pub max_tools: usize,
}

impl Default for StartOptions {
    fn default() -> Self {
        StartOptions {
            log_dir: None,
            jobs_dir: None,
            max_tools: super::config::DEFAULT_MAX_TOOLS,
        }
    }
}

/// A server that answered: its connection and what ends it.
struct Live {
    cancel: RunningServiceCancellationToken,
    monitor: JoinHandle<()>,
}

/// One server's state, shared with its start task and its exit monitor.
#[derive(Clone)]
struct Shared {
    status: Arc<Mutex<ServerStatus>>,
    live: Arc<Mutex<Option<Live>>>,
    /// The stdio child's process group (its pid: it leads its own group).
    pgid: Arc<Mutex<Option<i32>>>,
    /// Set before an intended stop, so nothing reports `exited`.
    stopping: Arc<AtomicBool>,
    /// A stdio server's child as watched, once spawned: shutdown waits for
    /// it to be reaped, which removes its job record.
    child: Arc<Mutex<Option<StdioWatch>>>,
    /// Its checked tools once ready, before the cap, and the notes of the
    /// checks.
    checked: Arc<Mutex<Option<Checked>>>,
}

/// The servers' tools together: what each offers under the cap, kept in
/// `late` and in each server's status (docs §13.3).
struct Offer {
    cap: usize,
    servers: Vec<Shared>,
    late: LateTools,
    sink: StatusSink,
    /// One re-balancing at a time, so statuses and `late` agree.
    turn: Mutex<()>,
}

impl Offer {
    /// Shares the cap among the ready servers again, after `ready` became
    /// ready: `late` gets the offered tools, each ready server's status its
    /// offered and left-out tools and notes; `ready` reports `ready`, and
    /// another ready server whose share changed reports again.
    fn rebalance(&self, ready: usize) {
        let _turn = self.turn.lock();
        let lists: Vec<Option<Checked>> = self
            .servers
            .iter()
            .map(|s| s.checked.lock().ok().and_then(|c| c.clone()))
            .collect();
        let counts: Vec<usize> = lists
            .iter()
            .map(|l| l.as_ref().map_or(0, |c| c.tools.len()))
            .collect();
        let given = allocate(&counts, self.cap);
        let (kept, clashes) = distinct_names(&lists, &given);
        let offered: Vec<Arc<dyn Tool>> = kept
            .iter()
            .flatten()
            .map(|t| t.clone() as Arc<dyn Tool>)
            .collect();
        self.late.set(offered);
        for (i, (shared, list)) in self.servers.iter().zip(&lists).enumerate() {
            let Some(Checked { tools, notes }) = list else {
                continue;
            };
            let Ok(mut s) = shared.status.lock() else {
                continue;
            };
            let changed = s.tools.len() != kept[i].len();
            s.tools = kept[i].iter().map(|t| t.summary()).collect();
            s.left_out = tools[given[i]..].iter().map(|t| t.summary()).collect();
            s.notes = notes.clone();
            s.notes.extend(clashes[i].iter().cloned());
            if !s.left_out.is_empty() {
                let note = left_out_note(&s.name, &s.left_out, given[i], self.cap);
                s.notes.push(note);
            }
            if i == ready {
                s.state = ServerState::Ready;
                (self.sink)(&s);
            } else if changed && s.state == ServerState::Ready {
                (self.sink)(&s);
            }
        }
    }
}

/// The tools each server offers under its share, with every name
/// distinct: a tool whose name an earlier server's tool (configuration
/// order) already has takes its qualified name, and one whose qualified
/// name is taken too is skipped; each case is a note for `mcp list` and
/// the workstation (docs §13.3).
fn distinct_names(
    lists: &[Option<Checked>],
    given: &[usize],
) -> (Vec<Vec<Arc<McpTool>>>, Vec<Vec<String>>) {
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut kept = Vec::with_capacity(lists.len());
    let mut notes = Vec::with_capacity(lists.len());
    for (list, n) in lists.iter().zip(given) {
        let mut mine = Vec::new();
        let mut said = Vec::new();
        for tool in list.iter().flat_map(|c| &c.tools[..*n]) {
            let plain = tool.summary().name;
            if seen.insert(plain.clone()) {
                mine.push(tool.clone());
                continue;
            }
            let renamed = tool.qualified();
            let name = renamed.summary().name;
            if seen.insert(name.clone()) {
                said.push(format!(
                    "tool `{}` is offered as `{name}`: its name `{plain}` is another MCP tool's",
                    tool.summary().remote_name
                ));
                mine.push(Arc::new(renamed));
            } else {
                tracing::warn!(tool = %plain, "MCP tool skipped: its name is taken");
                said.push(format!(
                    "skipped tool `{}`: its names `{plain}` and `{name}` are other MCP tools'",
                    tool.summary().remote_name
                ));
            }
        }
        kept.push(mine);
        notes.push(said);
    }
    (kept, notes)
}

struct Server {
    shared: Shared,
    /// The start in progress, until it settles.
    start: Option<JoinHandle<()>>,
}

/// The session's MCP servers. Dropping it kills the stdio children's
/// process groups; [`McpClients::shutdown`] also closes the connections.
#[derive(Default)]
pub struct McpClients {
    servers: Vec<Server>,
    /// The offered tools, under the cap.
    late: LateTools,
}

impl std::fmt::Debug for McpClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.statuses()).finish()
    }
}

impl McpClients {
    /// Starts every configured server in the background and returns at
    /// once. Each says `starting` now, then `ready` (its tools added to
    /// `late` first) or `failed` within its start-up timeout, and later
    /// `exited` if it dies; `late` counts each as pending until then, so a
    /// run that can use the tools may wait for them (docs §13.2).
    pub fn spawn(
        configs: &[McpServerConfig],
        options: &StartOptions,
        sink: &StatusSink,
        late: &LateTools,
    ) -> Self {
        let shared: Vec<Shared> = configs
            .iter()
            .map(|config| Shared {
                status: Arc::new(Mutex::new(ServerStatus {
                    name: config.name.clone(),
                    target: config.target(),
                    state: ServerState::Starting,
                    reason: None,
                    tools: Vec::new(),
                    left_out: Vec::new(),
                    notes: Vec::new(),
                })),
                live: Arc::default(),
                pgid: Arc::default(),
                stopping: Arc::default(),
                child: Arc::default(),
                checked: Arc::default(),
            })
            .collect();
        let offer = Arc::new(Offer {
            cap: options.max_tools,
            servers: shared.clone(),
            late: late.clone(),
            sink: sink.clone(),
            turn: Mutex::new(()),
        });
        let servers = configs
            .iter()
            .zip(shared)
            .enumerate()
            .map(|(index, (config, shared))| {
                if let Ok(s) = shared.status.lock() {
                    sink(&s);
                }
                // A little past the timeout: the start ends by then.
                let until = Instant::now() + config.startup_timeout + Duration::from_secs(3);
                let pending = late.pending(&format!("MCP server {}", config.name), until);
                let start = tokio::spawn(start_server(
                    Start {
                        config: config.clone(),
                        options: options.clone(),
                        shared: shared.clone(),
                        offer: offer.clone(),
                        index,
                    },
                    pending,
                ));
                Server {
                    shared,
                    start: Some(start),
                }
            })
            .collect();
        McpClients {
            servers,
            late: late.clone(),
        }
    }

    /// Starts every server and waits until each is ready or has failed (at
    /// most the slowest start-up timeout): for `vibedesk mcp list`,
    /// `doctor` and tests.
    pub async fn start(
        configs: &[McpServerConfig],
        options: &StartOptions,
        sink: &StatusSink,
    ) -> Self {
        let late = LateTools::default();
        let mut clients = Self::spawn(configs, options, sink, &late);
        for server in &mut clients.servers {
            if let Some(start) = server.start.take() {
                let _ = start.await;
            }
        }
        clients
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Every server's current state, in configuration order.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.servers
            .iter()
            .filter_map(|s| s.shared.status.lock().ok().map(|g| g.clone()))
            .collect()
    }

    /// The tools offered (of the servers that started, under the cap), as
    /// registry tools.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.late.snapshot()
    }

    /// Adds the tools to `registry`. Their names are distinct among
    /// themselves ([`distinct_names`]); one taken by a tool already in
    /// `registry` is logged and left out.
    pub fn register(&self, registry: &mut Registry) {
        for tool in self.tools() {
            if let Err(e) = registry.register(tool) {
                tracing::warn!("MCP tool not registered: {e}");
            }
        }
    }

    /// Ends every server: stops starts in progress, closes the connections
    /// and kills the stdio children's process groups.
    pub async fn shutdown(mut self) {
        let servers = std::mem::take(&mut self.servers);
        let mut monitors = Vec::new();
        let mut children = Vec::new();
        for mut server in servers {
            if let Some(live) = server.stop() {
                live.cancel.cancel();
                monitors.push(live.monitor);
            }
            children.extend(server.shared.child.lock().ok().and_then(|c| c.clone()));
        }
        // The monitors own the connections; closing them is quick once the
        // children are gone, and never worth holding up the exit for long.
        // Each child is reaped (its job record removed) before the process
        // exits, so a clean exit leaves no record behind (docs §13.2).
        let reaped = join_all(
            children
                .iter()
                .map(|c| c.exit_within(Duration::from_secs(2))),
        );
        let _ = tokio::time::timeout(Duration::from_secs(2), join_all(monitors)).await;
        let _ = reaped.await;
    }
}

impl Server {
    /// Marks the server stopping, ends a start in progress and kills the
    /// child's group; the connection, if any, is the caller's to close.
    fn stop(&mut self) -> Option<Live> {
        self.shared.stopping.store(true, Ordering::SeqCst);
        if let Some(start) = self.start.take() {
            start.abort();
        }
        kill_group(&self.shared.pgid);
        self.shared.live.lock().ok().and_then(|mut l| l.take())
    }
}

impl Drop for McpClients {
    fn drop(&mut self) {
        for server in &mut self.servers {
            if let Some(live) = server.stop() {
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

/// What one server's start needs.
struct Start {
    config: McpServerConfig,
    options: StartOptions,
    shared: Shared,
    offer: Arc<Offer>,
    /// Its place in the configuration (and in `offer`).
    index: usize,
}

/// One server's start, in its own task: connect, then `ready` with its
/// tools in `late`, or `failed` with the reason (and, for a stdio server,
/// where its stderr is). `pending` drops when this ends, however it ends.
async fn start_server(start: Start, pending: crate::tools::late::Pending) {
    let Start {
        config,
        options,
        shared,
        offer,
        index,
    } = start;
    let started = connect(&config, &options, &shared).await;
    let log = shared
        .child
        .lock()
        .ok()
        .and_then(|c| c.as_ref().and_then(|w| w.log.clone()));
    let (service, remote_tools, stdio) = match started {
        Ok(ok) => ok,
        Err(e) => {
            tracing::warn!(server = %config.name, "MCP server failed to start: {e}");
            // What a failed start left running goes with its group.
            kill_group(&shared.pgid);
            let mut reason = e.to_string();
            if let Some(path) = log {
                reason.push_str(&format!("; its stderr is in {}", path.display()));
            }
            if let Ok(mut s) = shared.status.lock() {
                s.state = ServerState::Failed;
                s.reason = Some(reason);
                (offer.sink)(&s);
            }
            drop(pending);
            return;
        }
    };
    if shared.stopping.load(Ordering::SeqCst) {
        return;
    }
    let mut link = ServerLink::new(
        &config.name,
        service.peer().clone(),
        service.service().progress.clone(),
    );
    if let Some(watch) = &stdio {
        link = link.with_oversized(watch.unmatched.clone());
    }
    let link = Arc::new(link);
    let checked = checked_tools(&config, &link, &remote_tools);
    let count = checked.tools.len();
    if let Ok(mut c) = shared.checked.lock() {
        *c = Some(checked);
    }
    // Into `late` and the statuses, before the run waiting on `pending`
    // looks.
    offer.rebalance(index);
    tracing::info!(server = %config.name, tools = count, "MCP server ready");
    let cancel = service.cancellation_token();
    let monitor = tokio::spawn(watch_exit(
        service,
        link,
        stdio.map(|w| (w, log)),
        shared.clone(),
        offer.sink.clone(),
    ));
    if let Ok(mut l) = shared.live.lock() {
        *l = Some(Live { cancel, monitor });
    }
    drop(pending);
}

/// Waits for the connection to end; an end nobody asked for is `exited`,
/// with the child's status and last stderr line when it is a stdio server.
async fn watch_exit(
    service: RunningService<RoleClient, Handler>,
    link: Arc<ServerLink>,
    stdio: Option<(StdioWatch, Option<PathBuf>)>,
    shared: Shared,
    sink: StatusSink,
) {
    let lost = link.lost_token();
    let quit = tokio::select! {
        quit = service.waiting() => Some(quit),
        // Dropping the service (with the future) closes the connection.
        _ = lost.cancelled() => None,
    };
    if shared.stopping.load(Ordering::SeqCst) {
        return;
    }
    let mut reason = match quit {
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
    if let Some((watch, log)) = &stdio
        && let Some(status) = watch.exit_within(Duration::from_secs(2)).await
    {
        watch.drained(Duration::from_secs(1)).await;
        reason = StartError::Exited {
            status: describe_status(&status),
            last_line: watch.last_stderr_line(),
        }
        .to_string();
        if let Some(path) = log {
            reason.push_str(&format!("; its stderr is in {}", path.display()));
        }
    }
    tracing::warn!(server = %link.name, "MCP server gone: {reason}");
    // What the server left in its group goes now, while the group id is
    // still its own, rather than at the session's end.
    kill_group(&shared.pgid);
    link.mark_exited(&reason);
    if let Ok(mut s) = shared.status.lock() {
        s.state = ServerState::Exited;
        s.reason = Some(reason);
        sink(&s);
    }
}

type Connected = (
    RunningService<RoleClient, Handler>,
    Vec<rmcp::model::Tool>,
    Option<StdioWatch>,
);

/// Spawns or connects, shakes hands and lists the tools, by the start-up
/// deadline. A stdio child's group and watch go into `shared` as soon as
/// it is spawned.
async fn connect(
    config: &McpServerConfig,
    options: &StartOptions,
    shared: &Shared,
) -> Result<Connected, StartError> {
    let deadline = Instant::now() + config.startup_timeout;
    match &config.transport {
        McpTransport::Stdio { command, args, env } => {
            let env = child_env(&crate::sandbox::env::parent_env(), env);
            let spawned = super::spawn::spawn_server(
                &config.name,
                command,
                args,
                &env,
                options.jobs_dir.as_deref(),
            )
            .await
            .map_err(|source| StartError::Spawn {
                command: command.clone(),
                source,
            })?;
            connect_stdio(config, spawned, options, shared, deadline).await
        }
        McpTransport::Http {
            url,
            bearer_token_env,
        } => connect_http(config, url, bearer_token_env.as_deref(), deadline).await,
    }
}

/// The handshake and tool list over a spawned child's pipes, each failure
/// explained by what the child did ([`stdio_step`]).
async fn connect_stdio(
    config: &McpServerConfig,
    spawned: super::spawn::Spawned,
    options: &StartOptions,
    shared: &Shared,
    deadline: Instant,
) -> Result<Connected, StartError> {
    let super::spawn::Spawned {
        mut child,
        pid_namespace,
        record,
    } = spawned;
    let pid = child.id();
    if let (Some(pid), Ok(mut slot)) = (pid, shared.pgid.lock()) {
        *slot = i32::try_from(pid).ok();
    }
    let stdin = child.stdin.take();
    let header = format!(
        "--- {} vibedesk started `{}` (pid {}{}) ---\n",
        chrono::Local::now().format("%Y-%m-%d %H:%M:%S"),
        config.target(),
        pid.unwrap_or(0),
        if pid_namespace {
            ", in a PID namespace of its own"
        } else {
            ""
        }
    );
    let (stdout, watch) = watch_child(
        child,
        record,
        &config.name,
        options.log_dir.as_deref(),
        &header,
    );
    if let Ok(mut slot) = shared.child.lock() {
        *slot = Some(watch.clone());
    }
    let Some(stdin) = stdin else {
        return Err(StartError::Handshake("the child has no stdin".into()));
    };
    let timeout = config.startup_timeout;
    let service = stdio_step(
        Handler::default().serve((stdout, stdin)),
        "initialize",
        timeout,
        deadline,
        &watch,
    )
    .await
    .map_err(|e| e.into_start(StartError::Handshake))?;
    let tools = stdio_step(
        list_tools_capped(service.peer()),
        "tools/list",
        timeout,
        deadline,
        &watch,
    )
    .await
    .map_err(|e| e.into_start(StartError::ListTools))?;
    Ok((service, tools, Some(watch)))
}

/// The most tools read from one server's `tools/list` (over every page).
pub const MAX_LISTED_TOOLS: usize = 20_000;
/// The most `tools/list` pages read from one server.
pub const MAX_TOOL_PAGES: usize = 64;

/// Why a server's tool list was not read.
#[derive(Debug, thiserror::Error)]
pub enum ListToolsError {
    #[error("{0}")]
    Service(#[from] rmcp::ServiceError),
    #[error(
        "the server lists more than {MAX_LISTED_TOOLS} tools (or more than {MAX_TOOL_PAGES} pages of them): the list is not read further"
    )]
    TooMany,
}

/// `tools/list` page by page, as the SDK's `list_all_tools` does, but with
/// caps on the tools and the pages (docs §13.3): each message is bounded by
/// the transport, and a server that pages forever is refused instead of
/// filling memory until the start deadline.
async fn list_tools_capped(
    peer: &rmcp::Peer<rmcp::RoleClient>,
) -> Result<Vec<rmcp::model::Tool>, ListToolsError> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_TOOL_PAGES {
        let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
        let page = peer.list_tools(Some(params)).await?;
        tools.extend(page.tools);
        if tools.len() > MAX_LISTED_TOOLS {
            return Err(ListToolsError::TooMany);
        }
        cursor = page.next_cursor;
        if cursor.is_none() {
            return Ok(tools);
        }
    }
    Err(ListToolsError::TooMany)
}

/// What the HTTP transport reads of one event or response: four times the
/// most one answer may be, so that an answer over it is refused by its
/// size, as over stdio (docs §13.3), rather than by the SDK closing the
/// whole connection at its own 16 MiB bound. Past this the SDK still does.
pub const HTTP_READ_BYTES: usize = 4 * super::stdio::MAX_MESSAGE_BYTES;

/// The handshake and tool list over streamable HTTP.
async fn connect_http(
    config: &McpServerConfig,
    url: &str,
    bearer_token_env: Option<&str>,
    deadline: Instant,
) -> Result<Connected, StartError> {
    let mut http = StreamableHttpClientTransportConfig::with_uri(url);
    http.max_sse_event_size = HTTP_READ_BYTES;
    http.max_json_response_size = HTTP_READ_BYTES;
    if let Some(var) = bearer_token_env {
        // From memory: the variable left the environment at start (docs §6.1).
        let token = crate::secrets::var(var)
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| StartError::MissingToken(var.to_string()))?;
        http = http.auth_header(token);
    }
    let no_answer = |request| StartError::NoAnswer {
        request,
        timeout: config.startup_timeout,
    };
    let service = tokio::time::timeout_at(
        deadline,
        Handler::default().serve(StreamableHttpClientTransport::from_config(http)),
    )
    .await
    .map_err(|_| no_answer("initialize"))?
    .map_err(|e| StartError::Unreachable {
        url: url.to_string(),
        cause: handshake_cause(&e),
    })?;
    let tools = tokio::time::timeout_at(deadline, list_tools_capped(service.peer()))
        .await
        .map_err(|_| no_answer("tools/list"))?
        .map_err(|e| StartError::ListTools(e.to_string()))?;
    Ok((service, tools, None))
}

/// How one step of a stdio start failed, before it is put in words.
enum StepError {
    /// The step's own error (the transport's text), when nothing better
    /// explains it.
    Step(String),
    /// The reason found: an exit, non-MCP output or no answer.
    Known(StartError),
}

impl StepError {
    fn into_start(self, wrap: fn(String) -> StartError) -> StartError {
        match self {
            StepError::Step(e) => wrap(e),
            StepError::Known(e) => e,
        }
    }
}

/// Resolves when the child exits unsuccessfully; never otherwise.
async fn failed_exit(watch: &StdioWatch) {
    match watch.exited().await {
        Some(status) if !status.success() => {}
        _ => std::future::pending().await,
    }
}

/// Runs one request of a stdio start against the child's exit and the
/// deadline. A failure is explained by what the child did, in this order:
/// it exited (status and last stderr line), it wrote non-MCP output to
/// stdout, it did not answer in time; the transport's own error (a broken
/// pipe, which differs by timing) only when none of these applies.
async fn stdio_step<T, E: std::fmt::Display>(
    step: impl std::future::Future<Output = Result<T, E>>,
    request: &'static str,
    timeout: Duration,
    deadline: Instant,
    watch: &StdioWatch,
) -> Result<T, StepError> {
    let failure = tokio::select! {
        result = step => match result {
            Ok(v) => return Ok(v),
            Err(e) => Some(e.to_string()),
        },
        // A wrapper may exit 0 leaving the real server on the pipes.
        _ = failed_exit(watch) => None,
        _ = tokio::time::sleep_until(deadline) => {
            let no_answer = StartError::NoAnswer { request, timeout };
            return Err(StepError::Known(match watch.junk() {
                Some(junk) => StartError::NonMcpOutput(junk),
                None => no_answer,
            }));
        }
    };
    // The transport gives up when the child does: wait (briefly) for the
    // exit, and for the pipes to be read to their end, so the reason does
    // not depend on which noticed first.
    let exit = watch
        .exit_within(Duration::from_secs(2).min(deadline.saturating_duration_since(Instant::now())))
        .await;
    watch.drained(Duration::from_secs(1)).await;
    let exited = |status: std::process::ExitStatus| StartError::Exited {
        status: describe_status(&status),
        last_line: watch.last_stderr_line(),
    };
    Err(match (exit, watch.junk(), failure) {
        (Some(status), Some(junk), _) if status.success() => {
            StepError::Known(StartError::NonMcpOutput(junk))
        }
        (Some(status), _, _) => StepError::Known(exited(status)),
        (None, Some(junk), _) => StepError::Known(StartError::NonMcpOutput(junk)),
        (None, None, Some(e)) => StepError::Step(e),
        (None, None, None) => StepError::Known(StartError::NoAnswer { request, timeout }),
    })
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
