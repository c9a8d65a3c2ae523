//! The command line: `vibedesk` (the workstation), `run`, `doctor`,
//! `sessions`, `trace`, `compact`, `backtest`, `data`, `engine`, `memory`,
//! `mcp`, `swarm`, `sweep`.

mod backtest;
mod compact;
mod data;
mod demo;
mod doctor;
mod engine;
mod error;
mod inspect;
mod mcp;
mod memory;
mod ray;
mod run;
mod swarm;
mod swarm_batch;
mod sweep;
mod workstation;

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};

pub use self::demo::{
    DEMO_PROMPT, DEMO_SCRIPT, DEMO_TOKEN_THRESHOLD, DEMO_TOOLS, DemoProvider, demo_config,
};
pub use self::error::CliError;

use crate::config::{Config, Overrides, ProviderConfig};
use crate::llm::Provider;
use crate::llm::openai::{OpenAiConfig, OpenAiProvider};
use crate::llm::scripted::{Script, ScriptedProvider};

#[derive(Parser, Debug)]
#[command(
    name = "vibedesk",
    version,
    about = "A terminal research workstation with an embedded LLM research agent",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// With no subcommand: the full-screen workstation.
    #[command(flatten)]
    pub workstation: workstation::WorkstationArgs,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one research turn headless; stream the answer (or JSON events).
    Run(run::RunArgs),
    /// Show the resolved configuration (secrets masked) and check the provider answers.
    Doctor(doctor::DoctorArgs),
    /// List sessions on disk, newest first.
    Sessions(inspect::SessionsArgs),
    /// Print a session's trace records as JSON lines.
    Trace(inspect::TraceArgs),
    /// Apply compaction layers to a JSONL message list (inspect or compare with the original).
    Compact(compact::CompactArgs),
    /// Run a backtest (RUN_DIR/config.json) through the sandbox and print its metrics JSON.
    Backtest(backtest::BacktestArgs),
    /// Print a symbol's daily bars as CSV (provenance on stderr).
    Data(data::DataArgs),
    /// The backtest engine: the sandbox entry point (prints the metrics JSON).
    Engine(engine::EngineArgs),
    /// Persistent memory: list, show, add, forget, search, compress, gc, import, reindex.
    Memory(memory::MemoryArgs),
    /// MCP (docs §13): `list` the configured servers, their `tools`, and `serve` vibedesk's research tools to other agents.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Research teams: list, inspect, run and show swarm presets' runs.
    Swarm(swarm::SwarmArgs),
    /// Parameter sweeps (docs §18): `plan` a spec, `run` it on every core, run one `shard` of a plan.
    Sweep(sweep::SweepArgs),
}

/// Provider flags shared by `run` and `doctor`.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct ProviderArgs {
    /// Provider preset: openai, deepseek, openrouter, moonshot, qwen, zhipu, ollama, vllm, llamacpp, custom, scripted.
    #[arg(long)]
    pub provider: Option<String>,
    #[arg(long)]
    pub model: Option<String>,
    /// Any OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1.
    #[arg(long)]
    pub base_url: Option<String>,
    /// The tools offered to the model, comma-separated (`all` for every
    /// one); local presets offer a small research set by default.
    #[arg(long, value_name = "NAMES")]
    pub tools: Option<String>,
}

impl ProviderArgs {
    pub fn overrides(&self) -> Overrides {
        Overrides {
            provider: self.provider.clone(),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            tools: self.tools.as_deref().map(crate::config::split_tools),
            ..Overrides::default()
        }
    }
}

/// Process exit codes.
pub mod exit {
    pub const OK: u8 = 0;
    pub const FAILED: u8 = 1;
    pub const USAGE: u8 = 2;
    /// `run` and `swarm run` ended `partial`: an answer (a report) was
    /// delivered, but some tool calls (some tasks) failed (README, docs §1.4).
    pub const PARTIAL: u8 = 3;
    pub const CANCELLED: u8 = 130;
}

/// Parses the command line, runs the command and turns its [`CliError`]
/// into the stderr line and the exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    guard_secrets();
    match run_command(cli) {
        Ok(()) => ExitCode::from(exit::OK),
        Err(e) => {
            if let Some(line) = e.line() {
                eprintln!("{line}");
            }
            ExitCode::from(e.code)
        }
    }
}

/// Keeps credentials from the processes vibedesk starts (docs §6.1): the
/// process becomes non-dumpable, and credential variables leave the
/// environment for memory, where the configuration still finds them. Runs
/// before the async runtime exists, so no other thread can read the
/// environment while it changes.
fn guard_secrets() {
    if let Err(e) = crate::secrets::protect() {
        eprintln!(
            "vibedesk: warning: cannot make this process non-dumpable ({e}); same-user processes may read its memory"
        );
    }
    // SAFETY: only this thread exists: clap parsed the command line on it,
    // no child has been spawned, and the runtime (the first other thread)
    // is built after this returns.
    let _ = unsafe { crate::secrets::take_from_environment(&[]) };
}

fn run_command(cli: Cli) -> Result<(), CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(format!("cannot start the async runtime: {e}")))?;
    let result = runtime.block_on(async move {
        match cli.command {
            None => workstation::workstation(cli.workstation).await,
            Some(Command::Run(args)) => run::run(args).await,
            Some(Command::Doctor(args)) => doctor::doctor(args).await,
            Some(Command::Sessions(args)) => inspect::sessions(args),
            Some(Command::Trace(args)) => inspect::trace(args),
            Some(Command::Compact(args)) => compact::compact(args).await,
            Some(Command::Backtest(args)) => backtest::backtest(args).await,
            Some(Command::Data(args)) => data::data(args).await,
            Some(Command::Engine(args)) => engine::engine(args).await,
            Some(Command::Memory(args)) => memory::memory(args),
            Some(Command::Mcp(command)) => mcp::mcp(command).await,
            Some(Command::Swarm(args)) => swarm::swarm(args).await,
            Some(Command::Sweep(args)) => sweep::sweep(args).await,
        }
    });
    // Do not wait for tasks still parked on stdin or timers.
    runtime.shutdown_background();
    result
}

/// Loads the configuration, or says why it cannot be loaded (exit 2).
pub(crate) fn load_config(overrides: &Overrides) -> Result<Config, CliError> {
    Config::load(overrides).map_err(CliError::usage)
}

/// `vibedesk.log` is cut at this size; the previous one is kept as
/// `vibedesk.log.1`, so the log never holds more than twice this (docs §5.5).
pub const VIBEDESK_LOG_CAP: u64 = 10 * 1024 * 1024;

/// What is logged unless `VIBEDESK_LOG` says otherwise: `info`, except the
/// MCP SDK's per-message lines (one for every progress notification a
/// server sends: 21 MB in 10 s from a server reporting in a loop).
pub const DEFAULT_LOG_FILTER: &str = "info,rmcp::service=warn";

/// Logs go to a 0600 file in the state dir, never to the terminal, capped
/// with one rotation.
pub(crate) fn init_logging(config: &Config) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    let dir = config.paths.logs_dir();
    let file = crate::logfile::LogFile::open(&dir, "vibedesk.log", VIBEDESK_LOG_CAP).ok()?;
    let (writer, guard) = tracing_appender::non_blocking(file);
    let filter = tracing_subscriber::EnvFilter::try_from_env("VIBEDESK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(false)
        .try_init();
    Some(guard)
}

/// How to set up a model, in a few lines.
pub const NO_MODEL_HELP: &str = "no model is configured. Pick a provider and give it a key, for example:\n  export DEEPSEEK_API_KEY=...; vibedesk run --provider deepseek -p \"...\"\n  vibedesk run --provider ollama --model qwen3:8b -p \"...\"      (local server)\n  vibedesk run --base-url http://127.0.0.1:8000/v1 --model M -p \"...\"\nor put `provider = \"deepseek\"` in config.toml (see `vibedesk doctor`). To see the engine work without a model: vibedesk run --demo";

/// Why the configured provider cannot be built: what is missing and where
/// to set it.
#[derive(Debug, thiserror::Error)]
pub enum ProviderSetupError {
    #[error("the scripted provider needs a script: pass --script FILE (format in README.md)")]
    NoScript,
    #[error("provider '{0}' needs a base URL: pass --base-url URL or set base_url in config.toml")]
    NoBaseUrl(String),
    #[error("provider '{0}' needs a model name: pass --model NAME or set model in config.toml")]
    NoModel(String),
    #[error(
        "provider '{provider}' needs an API key: export {env}=... (or set api_key_env in config.toml)"
    )]
    NoKey { provider: String, env: String },
    #[error("{0}")]
    Llm(#[from] crate::llm::LlmError),
}

/// Builds the configured provider, or explains what is missing.
pub fn build_provider(p: &ProviderConfig) -> Result<Arc<dyn Provider>, ProviderSetupError> {
    if p.is_scripted() {
        let path = p.script.as_ref().ok_or(ProviderSetupError::NoScript)?;
        let script = Script::from_file(path)?;
        return Ok(Arc::new(ScriptedProvider::new(script)));
    }
    let base_url = p
        .base_url
        .clone()
        .ok_or_else(|| ProviderSetupError::NoBaseUrl(p.name.clone()))?;
    let model = p
        .model
        .clone()
        .ok_or_else(|| ProviderSetupError::NoModel(p.name.clone()))?;
    if p.key_required && p.api_key.is_none() {
        return Err(ProviderSetupError::NoKey {
            provider: p.name.clone(),
            env: p
                .api_key_env
                .clone()
                .unwrap_or_else(|| "VIBEDESK_API_KEY".to_string()),
        });
    }
    let provider = OpenAiProvider::new(OpenAiConfig {
        provider_name: p.name.clone(),
        base_url,
        model,
        api_key: p.api_key.clone(),
        connect_timeout: std::time::Duration::from_secs(15),
        send_reasoning_content: p.send_reasoning_content,
        temperature: p.temperature,
        max_tokens: p.max_tokens,
        extra_headers: p.headers.clone(),
        discovery: p.discovery,
    })?;
    Ok(Arc::new(provider))
}

/// Everything a turn gets besides the model, for `vibedesk run` and the
/// workstation alike: the tools, persistent memory (recall into each
/// message, the snapshot for the system prompt) and the skills.
pub struct AgentSetup {
    pub registry: Arc<crate::tools::Registry>,
    /// The MCP servers' tools, filled in as they become ready (docs §13.2).
    pub late_tools: crate::tools::LateTools,
    pub memory: Option<Arc<crate::memory::MemoryStore>>,
    pub memory_flags: crate::memory::MemoryFlags,
    pub recall: Option<Arc<dyn crate::agent::context::RecallHook>>,
    pub memory_snapshot: String,
    pub skills: Vec<crate::agent::context::SkillLine>,
    /// Things the user should see at start (memory warnings, a store that
    /// would not open).
    pub notes: Vec<String>,
}

/// Where MCP servers' stderr logs go (`<state>/logs/mcp/<name>.log`) and
/// their job records (the sandbox's, so the next start reaps them), and
/// `[mcp] max_tools` (docs §13.2, §13.3). A bad `[mcp]` was refused with the
/// servers' entries already (`AgentSetup::mcp_servers`); here it falls back
/// to the default.
pub(crate) fn mcp_start_options(config: &Config) -> crate::mcp::StartOptions {
    crate::mcp::StartOptions {
        log_dir: Some(config.paths.logs_dir().join("mcp")),
        jobs_dir: Some(config.paths.jobs_dir()),
        max_tools: crate::mcp::config::load_max_tools(&config.config_file)
            .unwrap_or(crate::mcp::config::DEFAULT_MAX_TOOLS),
    }
}

/// A server's state as the public `mcp_server_status` event (docs §13.2).
pub fn mcp_status_event(s: &crate::mcp::ServerStatus) -> crate::agent::AgentEvent {
    use crate::agent::events::McpServerState;
    use crate::mcp::ServerState;
    crate::agent::AgentEvent::McpServerStatus {
        server: s.name.clone(),
        state: match s.state {
            ServerState::Starting => McpServerState::Starting,
            ServerState::Ready => McpServerState::Ready,
            ServerState::Failed => McpServerState::Failed,
            ServerState::Exited => McpServerState::Exited,
        },
        tools: s.tools.len(),
        reason: s.reason.clone(),
        notes: s.notes.clone(),
    }
}

impl AgentSetup {
    /// The tools: file tools and `bash`, the agent's `compact`, market data
    /// and indicators (embedded dataset first, online sources as fallback),
    /// the quant tools (options, portfolios, risk), factor IC, regression
    /// and overfitting,
    /// `backtest`/`read_artifact` (the engine in the sandbox), and the memory
    /// and skill tools. Memory is opened once here, so its snapshot is
    /// frozen for the session (docs §4.4).
    pub fn new(config: &Config) -> Self {
        use crate::tools::builtin::{backtest, market};
        let data = &config.paths.data_dir;
        // Jobs are recorded so that the next start ends what a crash left.
        let runner =
            crate::sandbox::RunnerConfig::from_env().with_jobs_dir(Some(config.paths.jobs_dir()));
        let mut registry = crate::tools::Registry::new();
        let _ = crate::tools::builtin::register_defaults_with(&mut registry, runner.clone());
        let _ = crate::agent::register_agent_tools(&mut registry);
        let _ = market::register_market_tools(&mut registry, config.paths.cache_dir.clone());
        // The quant desk (docs §15): options, portfolios, risk.
        let _ = crate::tools::builtin::quant::register_quant_tools(
            &mut registry,
            crate::research::data::DataConfig {
                cache_dir: Some(config.paths.cache_dir.clone()),
                ..crate::research::data::DataConfig::default()
            },
        );
        // Time-series tests and volatility models (docs §16).
        let _ = crate::tools::builtin::stats::register_stats_tools(
            &mut registry,
            crate::research::data::DataConfig {
                cache_dir: Some(config.paths.cache_dir.clone()),
                ..crate::research::data::DataConfig::default()
            },
        );
        // Is the edge real (docs §17): factor IC, regressions, overfitting.
        let _ = crate::tools::builtin::factor::register_factor_tools(
            &mut registry,
            crate::research::data::DataConfig {
                cache_dir: Some(config.paths.cache_dir.clone()),
                ..crate::research::data::DataConfig::default()
            },
        );
        // Parameter sweeps (docs §18), under the scheduler's deadline when
        // it names one.
        let _ = crate::tools::builtin::sweep::register_sweep_tool(
            &mut registry,
            Some(config.paths.cache_dir.clone()),
            config.agent.scheduler.default_timeout,
        );
        let mut backtest_config =
            backtest::BacktestToolConfig::new(Some(config.paths.cache_dir.clone()));
        backtest_config.runner = runner;
        backtest_config.defaults = config.backtest.config_keys();
        // A tool timeout under the engine's own deadline is the engine's too:
        // the backtest is a write tool, which the call path only warns about
        // at its deadline, so the sandbox is what stops it (docs §2.6).
        if let Some(limit) = config.agent.scheduler.default_timeout {
            backtest_config.timeout = backtest_config.timeout.min(limit);
        }
        let _ = backtest::register_backtest_tools(&mut registry, backtest_config);
        let flags = crate::memory::MemoryFlags::from_env();
        let mut notes = crate::memory::maintenance::warnings(&flags);
        let skills =
            crate::memory::skills::SkillSet::load(Some(&crate::memory::user_skills_dir(data)));
        let skill_lines = crate::agent::recall::skill_lines(&skills);
        let store = match crate::memory::MemoryStore::open(
            crate::memory::memory_dir(data),
            flags.clone(),
        ) {
            Ok(s) => Some(Arc::new(s)),
            Err(e) => {
                notes.push(format!(
                    "persistent memory is unavailable this session: {e}"
                ));
                None
            }
        };
        let (recall, snapshot) = match &store {
            Some(s) => {
                let _ = crate::tools::builtin::memory::register_memory_tools(
                    &mut registry,
                    s.clone(),
                    Arc::new(skills),
                    config.paths.sessions_dir(),
                );
                (
                    Some(Arc::new(crate::agent::recall::MemoryRecall::new(s.clone()))
                        as Arc<dyn crate::agent::context::RecallHook>),
                    crate::agent::recall::memory_snapshot(s),
                )
            }
            None => (None, String::new()),
        };
        AgentSetup {
            registry: Arc::new(registry),
            late_tools: crate::tools::LateTools::default(),
            memory: store,
            memory_flags: flags,
            recall,
            memory_snapshot: snapshot,
            skills: skill_lines,
            notes,
        }
    }

    /// The MCP servers of `config.toml` (docs §13.1), checked: a bad entry
    /// stops the command before anything starts.
    pub fn mcp_servers(
        config: &Config,
    ) -> Result<Vec<crate::mcp::McpServerConfig>, crate::mcp::McpConfigError> {
        crate::mcp::config::load(&config.config_file)
    }

    /// Starts `servers` in the background (docs §13.2) and returns at once:
    /// their statuses go to `sink` as they come up, and their tools join
    /// [`AgentSetup::late_tools`], which every loop built by
    /// [`AgentSetup::deps`] shares. A run whose provider can call tools
    /// waits for servers still starting, up to their start-up timeouts; the
    /// offline planner never does. The returned clients must live as long
    /// as the session.
    pub fn start_mcp(
        &self,
        servers: &[crate::mcp::McpServerConfig],
        config: &Config,
        sink: &crate::agent::EventSink,
    ) -> crate::mcp::McpClients {
        if servers.is_empty() {
            return crate::mcp::McpClients::default();
        }
        let sink = sink.clone();
        let statuses: crate::mcp::StatusSink =
            Arc::new(move |s: &crate::mcp::ServerStatus| sink.emit(mcp_status_event(s)));
        crate::mcp::McpClients::spawn(
            servers,
            &mcp_start_options(config),
            &statuses,
            &self.late_tools,
        )
    }

    /// What the first request of a run with `prompt` costs under `config`
    /// (its tool subset, the skills, the memory snapshot), in estimated
    /// tokens; `vibedesk doctor` reports it (docs §4.7).
    pub fn first_request(
        &self,
        config: &Config,
        prompt: &str,
    ) -> crate::agent::context::FirstRequest {
        use crate::agent::context;
        let mut registry = match &config.agent.tools {
            Some(names) => self.registry.subset(names).0,
            None => crate::tools::Registry::clone(&self.registry),
        };
        let lean = config.agent.lean_prompt;
        if lean {
            registry = registry.leaned();
        }
        let runs = config.paths.runs_dir().join("20260101_000000_abcdef");
        let workspace = config
            .paths
            .sessions_dir()
            .join("0123456789ab")
            .join("workspace");
        let state = context::workspace_summary(Some(&runs), Some(&workspace), &[]);
        let inputs = context::PromptInputs {
            registry: &registry,
            skills: &self.skills,
            state: &state,
            memory_snapshot: &self.memory_snapshot,
            now: chrono::Utc::now(),
        };
        let (system, prompt) = if lean {
            (
                context::stable_system_prompt(&inputs),
                context::with_run_context(&context::run_context(&inputs), prompt),
            )
        } else {
            (context::system_prompt(&inputs), prompt.to_string())
        };
        let model = config
            .provider
            .as_ref()
            .and_then(|p| p.model.clone())
            .unwrap_or_default();
        let estimator =
            crate::llm::tokens::Estimator::from_name(&config.agent.compaction.estimator, &model)
                .unwrap_or_else(|| crate::llm::tokens::Estimator::for_model(&model));
        context::first_request(&system, &prompt, &registry, &estimator)
    }

    pub fn deps(&self, provider: Arc<dyn Provider>, config: &Config) -> crate::agent::LoopDeps {
        let mut deps = crate::agent::LoopDeps::new(
            provider,
            self.registry.clone(),
            config.agent.clone(),
            config.paths.runs_dir(),
        );
        deps.recall = self.recall.clone();
        deps.late_tools = self.late_tools.clone();
        deps.memory_snapshot = self.memory_snapshot.clone();
        deps.skills = self.skills.clone();
        deps
    }

    /// Memory GC and compression, at most once a day (docs §8.6–§8.7): the
    /// original never runs them. Returns a line to show when something ran.
    pub async fn maintain(&self) -> Option<String> {
        let store = self.memory.clone()?;
        let flags = self.memory_flags.clone();
        tokio::task::spawn_blocking(move || {
            crate::memory::maintenance::run_due(&store, chrono::Utc::now(), &flags).summary()
        })
        .await
        .ok()
        .flatten()
    }
}

/// The configured provider, or the offline planner when none is configured.
/// The second value says why the offline planner is in use, for a notice.
pub fn provider_or_offline(
    config: &Config,
) -> Result<(Arc<dyn Provider>, Option<String>), ProviderSetupError> {
    match &config.provider {
        Some(p) => build_provider(p).map(|p| (p, None)),
        None => Ok((
            Arc::new(crate::llm::offline::OfflineProvider::new()),
            Some("no model is configured: the offline planner answers plain requests (backtests, prices, indicators, options, portfolios, risk, memory) from the built-in data; `vibedesk doctor` shows how to connect a model".to_string()),
        )),
    }
}
