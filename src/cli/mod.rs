//! The command line: `vibedesk` (the workstation), `run`, `doctor`,
//! `sessions`, `trace`, `compact`, `backtest`, `data`, `engine`, `memory`,
//! `mcp`, `swarm`, `sweep`, `monitor`, `daemon`, `report`, `export`.

mod backtest;
mod compact;
mod data;
mod demo;
mod doctor;
mod engine;
mod error;
mod factor;
mod inspect;
mod mcp;
mod memory;
mod monitor;
mod ray;
mod report;
mod run;
mod setup;
mod swarm;
mod swarm_batch;
mod sweep;
mod workspace;
mod workstation;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use self::demo::{
    DEMO_PROMPT, DEMO_SCRIPT, DEMO_TOKEN_THRESHOLD, DEMO_TOOLS, DemoProvider, demo_approval,
    demo_config,
};
pub use self::error::CliError;
pub(crate) use self::setup::mcp_start_options;
pub use self::setup::{
    AgentSetup, ProviderSetupError, Wire, build_provider, connect, mcp_status_event,
    provider_or_offline,
};

use crate::config::{Config, Overrides};

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
    /// Factor research (docs §17.11): `screen` many factor expressions (a file, or --library alpha101) over a universe.
    Factor(factor::FactorArgs),
    /// Parameter sweeps (docs §18): `plan` a spec, `run` it on every core, run one `shard` of a plan.
    Sweep(sweep::SweepArgs),
    /// Monitors (docs §21): research on a schedule with a verdict delivered once: add, list, show, run, pause, resume, remove, history.
    Monitor(monitor::MonitorArgs),
    /// Run monitors on schedule and deliver their verdicts, in the foreground until SIGTERM (docs §21.2).
    Daemon(monitor::DaemonArgs),
    /// A backtest run's tear sheet as one self-contained HTML file (or Markdown with SVGs); prints its path.
    Report(report::ReportArgs),
    /// A research session as Markdown (or one HTML file): the conversation, tool calls, figures, artifacts.
    Export(report::ExportArgs),
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

/// The approval flags shared by `run` and the workstation (docs §2.14.2).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct ApprovalArgs {
    /// Which tool calls run unasked: ask (the default: reads only),
    /// auto-edit (workspace writes too), full-auto (everything; the
    /// sandbox still confines) or read-only (writes refused).
    #[arg(long, value_name = "MODE")]
    pub approval: Option<crate::model::approval::ApprovalMode>,
    /// Nothing asks for this invocation: `--approval full-auto` (unless
    /// `--approval` names a mode), and a workspace as broad as $HOME or /
    /// is taken as confirmed.
    #[arg(long)]
    pub yes: bool,
}

impl ApprovalArgs {
    /// The mode the flags name, if any: `--approval`'s, else full-auto
    /// for `--yes`.
    pub fn mode(&self) -> Option<crate::model::approval::ApprovalMode> {
        self.approval.or(self
            .yes
            .then_some(crate::model::approval::ApprovalMode::FullAuto))
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
    /// `run` ended `unsupported`: no tool offered could serve the request;
    /// the answer on stdout says what is missing and the nearest request
    /// that runs (README, docs §1.4).
    pub const UNSUPPORTED: u8 = 4;
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
            Some(Command::Factor(args)) => factor::factor(args).await,
            Some(Command::Sweep(args)) => sweep::sweep(args).await,
            Some(Command::Monitor(args)) => monitor::monitor(args).await,
            Some(Command::Daemon(args)) => monitor::daemon(args).await,
            Some(Command::Report(args)) => report::report(args),
            Some(Command::Export(args)) => report::export(args),
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
