//! `vibedesk mcp serve` (docs §13.4): vibedesk's research and memory tools
//! offered to other agents over MCP, through `rmcp`'s server.
//!
//! Each exposed tool is the built-in the agent calls, taken from the same
//! registry and run through [`Tool::call_with_output`] with a real
//! [`ToolContext`], so a backtest goes through the same sandbox runner. The
//! answer carries the text the model would see and, for typed tools, the
//! output as `structuredContent`. A tool's failure is an `isError` result,
//! never a protocol error; only an unknown (or withheld) tool name is one.
//!
//! What a client may do is the user's choice ([`ServePolicy`], docs
//! §13.4.1): by default memory is read-only (`remember` is not offered) and
//! past sessions are not searchable (`session_search` is not offered).
//! Every answer passes the redaction of docs §2.8, and each call runs with
//! the client as its [`origin`](crate::tools::origin), so what it saves is
//! marked `source: mcp:<client>` and it cannot touch the user's own
//! memories.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::tools::events::{ToolEvent, ToolEventSink};
use crate::tools::finalize::{is_success, truncate_for_model};
use crate::tools::invoke::{Invocation, invoke_outside};
use crate::tools::origin;
use crate::tools::redact::{Sink, redact_tool_result, redact_value};
use crate::tools::scheduler::SchedulerConfig;
use crate::tools::{
    BackgroundQueue, Gate, Registry, Served, Tool, ToolContext, ToolError, ToolReply,
};

/// What the user lets clients do beyond the read-only tools (docs §13.4.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServePolicy {
    /// `--allow-memory-write`: offer `remember` (save new memories, forget
    /// or reinforce those MCP clients wrote).
    pub memory_write: bool,
    /// `--allow-sessions`: offer `session_search` over past transcripts.
    pub sessions: bool,
}

impl ServePolicy {
    /// Why a tool behind `gate` is withheld under this policy, or `None`
    /// when offered.
    pub fn withholds(&self, gate: Gate) -> Option<&'static str> {
        match gate {
            Gate::MemoryWrite if !self.memory_write => Some(
                "memory is read-only for MCP clients unless the server is started with --allow-memory-write",
            ),
            Gate::Sessions if !self.sessions => Some(
                "past sessions are not searchable by MCP clients unless the server is started with --allow-sessions",
            ),
            _ => None,
        }
    }
}

/// What the server needs from the caller: the agent's registry, where run
/// dirs go, the workspace and the result limit the model has.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub registry: Arc<Registry>,
    /// `<data>/mcp`: each served session gets a dated run dir under it.
    pub runs_root: PathBuf,
    /// The workspace tools resolve local files in (the cwd or `--workspace`).
    pub workspace: PathBuf,
    /// The agent's scheduler settings, which every served call runs under
    /// ([`crate::tools::invoke`]): the deadline of a tool that names none,
    /// heartbeats, and the characters of a result's text, as the model's
    /// `tool` message is cut (docs §2.7; `structuredContent` is never cut).
    pub scheduler: SchedulerConfig,
    /// Which writing and private tools are offered.
    pub policy: ServePolicy,
    /// How many heavy calls ([`HEAVY`]) run at once; the others queue
    /// (docs §13.4). At least 1.
    pub heavy_calls: usize,
}

/// The served tools (by their MCP names, §13.4.1) whose one call can take
/// a core and much memory for a long time (sweeps, backtests, the statistics and the pricers): at most
/// [`ServeOptions::heavy_calls`] of them run at once, so several large
/// requests queue rather than exhaust the machine.
pub const HEAVY: [&str; 13] = [
    "sweep",
    "factor_screen",
    "backtest",
    "factor_ic",
    "regression",
    "overfitting",
    "stat_test",
    "volatility_model",
    "portfolio_optimize",
    "risk_report",
    "option_price",
    "option_strategy",
    "implied_volatility",
];

/// One heavy call per core by default.
pub fn default_heavy_calls() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot create the run directory {path}: {source}")]
    RunDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the tool registry has no '{builtin}' behind the served tool '{name}'")]
    MissingTool {
        name: &'static str,
        builtin: &'static str,
    },
    #[error("the MCP session did not start: {0}")]
    Start(#[from] Box<rmcp::service::ServerInitializeError>),
    #[error("the MCP session ended with an error: {0}")]
    Session(#[from] tokio::task::JoinError),
}

/// One served tool, resolved against the registry.
struct ServedTool {
    /// Its MCP name.
    name: &'static str,
    tool: Arc<dyn Tool>,
    spec: rmcp::model::Tool,
}

/// The server state shared by every connection (HTTP makes one handler per
/// session; stdio has one).
struct Shared {
    tools: Vec<ServedTool>,
    /// The served tools the policy withholds, and why.
    withheld: Vec<(&'static str, &'static str)>,
    /// This server's run dir: read-only calls run here, each writing call
    /// gets a fresh sub-directory so two backtests never share one.
    run_dir: PathBuf,
    /// `<runs_root>/sweeps`: every `sweep` call's run dir, the same for
    /// every call and every server, so a call that reached its deadline is
    /// resumed by the next one with the same spec and `out` (docs §18.7).
    sweep_dir: PathBuf,
    workspace: PathBuf,
    session_id: String,
    scheduler: SchedulerConfig,
    calls: AtomicU64,
    background: BackgroundQueue,
    /// Admits heavy calls ([`HEAVY`]).
    heavy: Arc<tokio::sync::Semaphore>,
    heavy_calls: usize,
}

/// The `rmcp` handler: cheap to clone, one per connection.
#[derive(Clone)]
pub struct VibedeskServer {
    shared: Arc<Shared>,
}

impl VibedeskServer {
    /// Resolves the served tools and creates this server's run dir,
    /// `<runs_root>/<YYYYmmdd_HHMMSS>_<pid>`.
    pub fn new(options: ServeOptions) -> Result<Self, ServeError> {
        let policy = options.policy;
        // A built-in the manifest serves must be in the registry.
        for e in crate::tools::builtin::MANIFEST {
            if let (Some(name), None) = (e.caps.served_name(), options.registry.get(e.name)) {
                return Err(ServeError::MissingTool {
                    name,
                    builtin: e.name,
                });
            }
        }
        let mut tools = Vec::new();
        let mut withheld = Vec::new();
        for tool in crate::tools::builtin::served(&options.registry) {
            let Served::As { name, gate } = tool.caps().served else {
                continue;
            };
            match policy.withholds(gate) {
                Some(why) => withheld.push((name, why)),
                None => tools.push(ServedTool {
                    name,
                    spec: tool_spec(name, tool.as_ref()),
                    tool,
                }),
            }
        }
        let session_id = format!(
            "{}_{}",
            chrono::Local::now().format("%Y%m%d_%H%M%S"),
            std::process::id()
        );
        let run_dir = options.runs_root.join(&session_id);
        create_dir(&run_dir)?;
        Ok(VibedeskServer {
            shared: Arc::new(Shared {
                tools,
                withheld,
                run_dir,
                sweep_dir: options.runs_root.join("sweeps"),
                workspace: options.workspace,
                session_id: format!("mcp-{session_id}"),
                scheduler: options.scheduler,
                calls: AtomicU64::new(0),
                background: BackgroundQueue::default(),
                heavy: Arc::new(tokio::sync::Semaphore::new(options.heavy_calls.max(1))),
                heavy_calls: options.heavy_calls.max(1),
            }),
        })
    }

    /// This server's run dir (writing calls get sub-directories of it).
    pub fn run_dir(&self) -> &std::path::Path {
        &self.shared.run_dir
    }

    /// Serves one client over stdin/stdout until it disconnects. Nothing but
    /// protocol goes to stdout.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        let running = self
            .serve(rmcp::transport::stdio_pipes())
            .await
            .map_err(Box::new)?;
        running.waiting().await?;
        Ok(())
    }

    fn served(&self, name: &str) -> Option<&ServedTool> {
        self.shared.tools.iter().find(|s| s.name == name)
    }

    /// A place among the heavy calls for a call of `served`: waited for
    /// until the client cancels or the call's deadline passes, which
    /// answers `busy` naming how many run.
    async fn admit_heavy(
        &self,
        served: &ServedTool,
        cancel: &CancellationToken,
    ) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, ToolError> {
        if !HEAVY.contains(&served.name) {
            return Ok(None);
        }
        let wait = served
            .tool
            .timeout()
            .or(self.shared.scheduler.default_timeout)
            .unwrap_or(std::time::Duration::from_secs(1800));
        let busy = || {
            ToolError::failed(
                "busy",
                format!(
                    "{} heavy calls (sweeps, backtests, statistics, pricers) are running, the most this server runs at once (--max-heavy-calls), and none finished within this call's {} s deadline: call again later",
                    self.shared.heavy_calls,
                    wait.as_secs()
                ),
            )
        };
        tokio::select! {
            permit = self.shared.heavy.clone().acquire_owned() => permit.map(Some).map_err(|_| busy()),
            _ = cancel.cancelled() => Err(ToolError::failed("cancelled", "the client cancelled the call while it waited for a place among the heavy calls")),
            _ = tokio::time::sleep(wait) => Err(busy()),
        }
    }

    /// The context a call runs with: writing tools get a fresh run dir.
    fn context(
        &self,
        served: &ServedTool,
        cancel: CancellationToken,
    ) -> Result<ToolContext, ToolError> {
        let n = self.shared.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let run_dir = if served.tool.readonly() {
            self.shared.run_dir.clone()
        } else if served.name == "sweep" {
            // A sweep's folder is its `out` (one writer each, §18.3), not
            // the call: the journal must outlive the call to be resumed.
            let dir = self.shared.sweep_dir.clone();
            std::fs::create_dir_all(&dir)
                .map_err(|e| ToolError::io("cannot create the run directory", &dir, e))?;
            dir
        } else {
            let dir = self.shared.run_dir.join(format!("{n:04}_{}", served.name));
            std::fs::create_dir_all(&dir)
                .map_err(|e| ToolError::io("cannot create the run directory", &dir, e))?;
            dir
        };
        Ok(ToolContext {
            call_id: format!("mcp_{n}"),
            session_id: self.shared.session_id.clone(),
            run_dir,
            workspace: self.shared.workspace.clone(),
            cancel,
            background: self.shared.background.clone(),
        })
    }

    /// Runs one call through the agent's call path ([`invoke`]): the same
    /// deadline, cancellation and limits; progress goes to the client when
    /// it sent a token. `cancel` is the client's request: cancelling it
    /// stops the call as the user's Ctrl-C stops an agent's.
    async fn run(
        &self,
        served: &ServedTool,
        args: Value,
        ctx: &ToolContext,
        cancel: &CancellationToken,
        progress: Option<(Peer<RoleServer>, ProgressToken)>,
    ) -> Result<ToolReply, ToolError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let forward = progress.map(|(peer, token)| tokio::spawn(forward_progress(peer, token, rx)));
        let sink: ToolEventSink = Arc::new(move |event| {
            if let ToolEvent::ToolProgress {
                stage,
                current,
                total,
                message,
                ..
            } = event
            {
                let _ = tx.send(progress_message(&stage, current, total, &message));
            }
        });
        let invocation = Invocation {
            iter: 0,
            tool: served.tool.clone(),
            shown_args: args.clone(),
            args,
            config: &self.shared.scheduler,
            sink: &sink,
            run_cancel: cancel,
        };
        let outcome = invoke_outside(invocation, ctx.clone()).await;
        // Every progress notification goes before the result: the sink (and
        // with it the channel's sender) is dropped, so the forwarder drains
        // and ends.
        drop(sink);
        if let Some(forward) = forward {
            let _ = forward.await;
        }
        Ok(ToolReply {
            text: outcome.raw,
            output: outcome.output,
        })
    }
}

/// A progress line for the client: the stage, the count when there is one.
fn progress_message(
    stage: &str,
    current: Option<f64>,
    total: Option<f64>,
    message: &str,
) -> String {
    let count = match (current, total) {
        (Some(c), Some(t)) => format!(" ({c}/{t})"),
        (Some(c), None) => format!(" ({c})"),
        _ => String::new(),
    };
    format!("{stage}{count}: {message}")
}

/// Sends each progress message as `notifications/progress`, numbered from 1:
/// MCP wants the value to grow with each notification, which the sandbox's
/// stage counters do not promise across stages.
async fn forward_progress(
    peer: Peer<RoleServer>,
    token: ProgressToken,
    mut rx: mpsc::UnboundedReceiver<String>,
) {
    let mut step = 0.0;
    while let Some(message) = rx.recv().await {
        step += 1.0;
        let note = ProgressNotificationParam::new(token.clone(), step).with_message(message);
        if let Err(e) = peer.notify_progress(note).await {
            tracing::debug!("progress notification not sent: {e}");
        }
    }
}

/// `mcp:<client name>`: the name a 2026-07-28 client sends with each
/// request, else the one of its `initialize` (letters, digits and `-_.`
/// kept, others `_`, at most 40 characters); `mcp:unknown` without one.
fn client_origin(context: &RequestContext<RoleServer>) -> String {
    let name = context
        .meta
        .client_info()
        .map(|info| info.name)
        .or_else(|| {
            context
                .peer
                .peer_info()
                .map(|info| info.client_info.name.clone())
        })
        .unwrap_or_default();
    let clean: String = name
        .trim()
        .chars()
        .take(40)
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "mcp:unknown".to_string()
    } else {
        format!("mcp:{clean}")
    }
}

fn create_dir(dir: &std::path::Path) -> Result<(), ServeError> {
    std::fs::create_dir_all(dir).map_err(|source| ServeError::RunDir {
        path: dir.display().to_string(),
        source,
    })
}

/// The MCP tool: the served name, the built-in's description and generated
/// argument schema, and truthful hints.
fn tool_spec(name: &'static str, tool: &dyn Tool) -> rmcp::model::Tool {
    let schema = match tool.parameters() {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    let readonly = tool.readonly();
    let mut annotations = ToolAnnotations::new().read_only(readonly);
    if !readonly {
        // The writing tools can overwrite: `remember` replaces or forgets
        // an entry, a backtest given a `run_dir` in the workspace rewrites
        // that dir's config.json and artifacts, and a sweep replaces its
        // results file.
        annotations = annotations.destructive(true);
    }
    let spec = rmcp::model::Tool::new(name, tool.description().to_string(), Arc::new(schema))
        .annotate(annotations);
    // A typed tool's output type is its `structuredContent`'s schema.
    match tool.output_schema() {
        Some(Value::Object(output)) => spec.with_raw_output_schema(Arc::new(output)),
        _ => spec,
    }
}

/// A call's answer as an MCP result: the model's text (cut as the model's
/// is), the typed output as `structuredContent`, `isError` when the tool
/// failed or answered with a structured failure (docs §2.5). Both pass the
/// redaction of docs §2.8: a client is not the user, so it gets what a
/// trace would keep, not the raw text the model reads.
pub fn call_result(
    tool: &str,
    reply: Result<ToolReply, ToolError>,
    limit: usize,
) -> CallToolResult {
    let (text, output, failed) = match reply {
        Ok(reply) => {
            let failed = !is_success(&reply.text);
            (reply.text, reply.output, failed)
        }
        Err(e) => {
            let text = e.to_result_json(tool);
            let output = serde_json::from_str::<Value>(&text).ok();
            (text, output, true)
        }
    };
    let text = redact_tool_result(&text);
    let output = output.map(|o| redact_value(&o, Sink::Result));
    let content = vec![ContentBlock::text(truncate_for_model(&text, limit))];
    let mut result = if failed {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    // Structured content must be an object for peers before 2026-07-28.
    result.structured_content = output.filter(Value::is_object);
    result
}

impl ServerHandler for VibedeskServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("vibedesk", env!("CARGO_PKG_VERSION"))
                    .with_title("vibedesk research tools"),
            )
            .with_instructions(
                "Backtests on daily data (the embedded dataset works offline), market data, \
                 technical indicators, and vibedesk's persistent memory and skills.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.shared.tools.iter().map(|s| s.spec.clone()).collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.served(name).map(|s| s.spec.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(served) = self.served(&request.name) else {
            let shared = &self.shared;
            let offered: Vec<&str> = shared.tools.iter().map(|s| s.name).collect();
            let offered = offered.join(", ");
            let why = shared.withheld.iter().find(|(n, _)| *n == request.name);
            let message = match why {
                Some((_, why)) => format!(
                    "the tool '{}' is not offered: {why}; this server has {offered}",
                    request.name
                ),
                None => format!("unknown tool '{}'; this server has {offered}", request.name),
            };
            return Err(ErrorData::invalid_params(message, None));
        };
        let name = served.name;
        let args = Value::Object(request.arguments.unwrap_or_default());
        // Heavy calls queue for a place (docs §13.4) before anything is made.
        let admitted = self.admit_heavy(served, &context.ct).await;
        let reply = match admitted.and_then(|permit| {
            self.context(served, context.ct.child_token())
                .map(|ctx| (permit, ctx))
        }) {
            Ok((_permit, ctx)) => {
                let progress = context
                    .meta
                    .get_progress_token()
                    .map(|token| (context.peer.clone(), token));
                let client = client_origin(&context);
                tracing::info!(tool = name, call = %ctx.call_id, client = %client, "mcp tool call");
                origin::scope(client, self.run(served, args, &ctx, &context.ct, progress)).await
            }
            Err(e) => Err(e),
        };
        Ok(call_result(name, reply, self.shared.scheduler.result_limit).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_carry_text_structure_and_the_error_flag() {
        let ok = call_result(
            "indicators",
            Ok(ToolReply {
                text: r#"{"status":"ok","rows":3}"#.into(),
                output: Some(json!({"status": "ok", "rows": 3})),
            }),
            10_000,
        );
        assert_eq!(ok.is_error, Some(false));
        assert_eq!(
            ok.structured_content,
            Some(json!({"status": "ok", "rows": 3}))
        );

        // A structured failure the tool answered with is an error result.
        let refused = call_result(
            "backtest",
            Ok(ToolReply {
                text: r#"{"status":"error","error":"bad config"}"#.into(),
                output: Some(json!({"status": "error", "error": "bad config"})),
            }),
            10_000,
        );
        assert_eq!(refused.is_error, Some(true));

        let failed = call_result(
            "market_data",
            Err(ToolError::InvalidArguments(
                "missing required argument(s): symbol".into(),
            )),
            10_000,
        );
        assert_eq!(failed.is_error, Some(true));
        let text = serde_json::to_value(&failed.content).unwrap().to_string();
        assert!(
            text.contains("missing required argument(s): symbol"),
            "{text}"
        );
        assert_eq!(
            failed.structured_content.unwrap()["error_code"],
            "invalid_arguments"
        );

        // The text is cut as the model's is; the structure is whole.
        let long = "x".repeat(500);
        let cut = call_result(
            "recall",
            Ok(ToolReply {
                text: long.clone(),
                output: None,
            }),
            300,
        );
        let text = cut.content[0].as_text().unwrap().text.clone();
        assert_eq!(text, truncate_for_model(&long, 300));
        assert!(text.chars().count() <= 300, "{text}");
        assert!(text.contains("TRUNCATED"), "{text}");
    }

    /// A new tool is one module and one manifest line (docs/extending.md):
    /// with the throwaway `probe`'s line added, the tool is offered to the
    /// model, served over MCP with its output schema through the one call
    /// path, and the docs' table test reports it missing.
    #[tokio::test]
    async fn a_new_tool_is_one_module_and_one_manifest_line() {
        use crate::tools::builtin::{self, Family, MANIFEST, entry, probe::Probe, testkit};
        let manifest = [MANIFEST, &[entry::<Probe>(Family::Market)]].concat();
        let dir = tempfile::tempdir().unwrap();
        let mut registry = Registry::new();
        builtin::register_entries(&mut registry, &manifest, &testkit::env(dir.path(), true))
            .unwrap();
        // Offered to the model, with the schema its argument type says.
        let specs = registry.specs();
        let spec = specs.iter().find(|s| s.name == "probe").unwrap();
        assert_eq!(spec.parameters["required"], json!(["text"]));

        let server = VibedeskServer::new(ServeOptions {
            registry: Arc::new(registry),
            runs_root: dir.path().join("mcp"),
            workspace: dir.path().join("ws"),
            scheduler: SchedulerConfig::default(),
            policy: ServePolicy::default(),
            heavy_calls: 1,
        })
        .unwrap();
        let served = server.served("probe").unwrap();
        let output = served.spec.output_schema.as_ref().unwrap();
        assert!(output["properties"]["echo"].is_object(), "{output:?}");
        let cancel = CancellationToken::new();
        let ctx = server.context(served, cancel.clone()).unwrap();
        let reply = server
            .run(served, json!({"text": "hi"}), &ctx, &cancel, None)
            .await;
        let result = call_result("probe", reply, 10_000);
        assert_eq!(
            result.structured_content,
            Some(json!({"status": "ok", "echo": "hi"}))
        );

        // The docs' table lists the manifest; the probe's line makes its
        // test fail until the tool has a row.
        let guide = include_str!("../../docs/extending.md");
        assert!(builtin::table_mismatches(MANIFEST, guide).is_empty());
        assert_eq!(
            builtin::table_mismatches(&manifest, guide),
            ["'probe' is a built-in tool the table does not list"]
        );
    }

    #[test]
    fn every_heavy_name_is_a_served_tool() {
        let served: Vec<&str> = crate::tools::builtin::MANIFEST
            .iter()
            .filter_map(|e| e.caps.served_name())
            .collect();
        for h in HEAVY {
            assert!(served.contains(&h), "{h} is not served: {served:?}");
        }
        assert!(!HEAVY.contains(&"market_data"));
    }

    #[test]
    fn progress_messages_name_the_stage_and_count() {
        assert_eq!(
            progress_message("simulate", Some(3.0), Some(10.0), "bar 3"),
            "simulate (3/10): bar 3"
        );
        assert_eq!(
            progress_message("fetch", None, None, "fetching"),
            "fetch: fetching"
        );
    }
}
