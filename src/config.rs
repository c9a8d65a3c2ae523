//! Configuration: `config.toml` in the config dir, then environment
//! overrides, then command-line flags. Provider presets supply base URLs,
//! key variables and default models so that `provider = "deepseek"` plus the
//! key in the environment is a complete setup.
//!
//! Precedence, lowest first: built-in defaults < preset < `config.toml` top
//! level < `[providers.<name>]` < environment (`VIBEDESK_*`) < CLI flags.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::agent::LoopConfig;
pub use crate::llm::window::WindowDiscovery;
use crate::store::Paths;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot find a home directory; set VIBEDESK_HOME to a directory vibedesk may use")]
    NoHome,
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("environment variable {name}={value:?} is not valid: {expected}")]
    Env {
        name: String,
        value: String,
        expected: String,
    },
    #[error("unknown provider '{0}'; known: {known}", known = preset_names().join(", "))]
    UnknownProvider(String),
    #[error("{flag} {value} is out of range: {expected}")]
    Flag {
        flag: &'static str,
        value: String,
        expected: String,
    },
}

/// A provider preset (docs §2.11 lists the original's catalog).
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    pub name: &'static str,
    /// The wire protocol its server speaks: what `cli::setup` builds.
    pub protocol: Protocol,
    pub aliases: &'static [&'static str],
    pub base_url: Option<&'static str>,
    pub api_key_env: Option<&'static str>,
    pub default_model: Option<&'static str>,
    /// Hosted services need a key; local servers usually do not.
    pub key_required: bool,
    /// Whether the API wants `reasoning_content` echoed back in history.
    pub send_reasoning_content: bool,
    /// A server on the user's machine running a small model (docs §2.11.2):
    /// temperature 0.2, text-form tool calls read, each request's tools
    /// chosen for it and fitted to the window (docs §4.7.1).
    pub local: bool,
    /// How to ask the server for its context window.
    pub discovery: WindowDiscovery,
}

/// The wire protocol a provider speaks (docs §2.11): one builder,
/// `cli::setup::connect`, turns each into a provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// OpenAI-compatible chat completions over SSE (`llm::openai`).
    OpenAiChat,
    /// A scripted conversation from a file (`llm::scripted`).
    Scripted,
}

/// The temperature of the local presets: low, so the reply format holds
/// from run to run (the servers' own default is often 0.8).
pub const LOCAL_TEMPERATURE: f32 = 0.2;

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "openai",
        protocol: Protocol::OpenAiChat,
        aliases: &[],
        base_url: Some("https://api.openai.com/v1"),
        api_key_env: Some("OPENAI_API_KEY"),
        default_model: Some("gpt-4.1-mini"),
        key_required: true,
        send_reasoning_content: false,
        local: false,
        discovery: WindowDiscovery::None,
    },
    Preset {
        name: "deepseek",
        protocol: Protocol::OpenAiChat,
        aliases: &[],
        base_url: Some("https://api.deepseek.com/v1"),
        api_key_env: Some("DEEPSEEK_API_KEY"),
        default_model: Some("deepseek-chat"),
        key_required: true,
        send_reasoning_content: true,
        local: false,
        discovery: WindowDiscovery::None,
    },
    Preset {
        name: "openrouter",
        protocol: Protocol::OpenAiChat,
        aliases: &[],
        base_url: Some("https://openrouter.ai/api/v1"),
        api_key_env: Some("OPENROUTER_API_KEY"),
        default_model: Some("openai/gpt-4.1-mini"),
        key_required: true,
        send_reasoning_content: false,
        local: false,
        discovery: WindowDiscovery::None,
    },
    Preset {
        name: "moonshot",
        protocol: Protocol::OpenAiChat,
        aliases: &["kimi"],
        base_url: Some("https://api.moonshot.cn/v1"),
        api_key_env: Some("MOONSHOT_API_KEY"),
        default_model: Some("kimi-k2-0905-preview"),
        key_required: true,
        send_reasoning_content: true,
        local: false,
        discovery: WindowDiscovery::None,
    },
    Preset {
        name: "qwen",
        protocol: Protocol::OpenAiChat,
        aliases: &["dashscope"],
        base_url: Some("https://dashscope.aliyuncs.com/compatible-mode/v1"),
        api_key_env: Some("DASHSCOPE_API_KEY"),
        default_model: Some("qwen-plus"),
        key_required: true,
        send_reasoning_content: false,
        local: false,
        discovery: WindowDiscovery::None,
    },
    Preset {
        name: "zhipu",
        protocol: Protocol::OpenAiChat,
        aliases: &["glm"],
        base_url: Some("https://open.bigmodel.cn/api/paas/v4"),
        api_key_env: Some("ZHIPUAI_API_KEY"),
        default_model: Some("glm-4.6"),
        key_required: true,
        send_reasoning_content: false,
        local: false,
        discovery: WindowDiscovery::None,
    },
    Preset {
        name: "ollama",
        protocol: Protocol::OpenAiChat,
        aliases: &[],
        base_url: Some("http://127.0.0.1:11434/v1"),
        api_key_env: None,
        default_model: None,
        key_required: false,
        send_reasoning_content: false,
        local: true,
        discovery: WindowDiscovery::Ollama,
    },
    Preset {
        name: "vllm",
        protocol: Protocol::OpenAiChat,
        aliases: &[],
        base_url: Some("http://127.0.0.1:8000/v1"),
        api_key_env: Some("VLLM_API_KEY"),
        default_model: None,
        key_required: false,
        send_reasoning_content: false,
        local: false,
        discovery: WindowDiscovery::Models,
    },
    Preset {
        name: "llamacpp",
        protocol: Protocol::OpenAiChat,
        aliases: &["llama.cpp", "llama-cpp"],
        base_url: Some("http://127.0.0.1:8080/v1"),
        api_key_env: None,
        // llama-server serves the one model it loaded under any name.
        default_model: Some("local"),
        key_required: false,
        send_reasoning_content: false,
        local: true,
        discovery: WindowDiscovery::LlamaCpp,
    },
    Preset {
        name: "custom",
        protocol: Protocol::OpenAiChat,
        aliases: &["openai-compatible"],
        base_url: None,
        api_key_env: Some("VIBEDESK_API_KEY"),
        default_model: None,
        key_required: false,
        send_reasoning_content: false,
        local: false,
        discovery: WindowDiscovery::None,
    },
    Preset {
        name: "scripted",
        protocol: Protocol::Scripted,
        aliases: &[],
        base_url: None,
        api_key_env: None,
        default_model: Some("scripted"),
        key_required: false,
        send_reasoning_content: false,
        local: false,
        discovery: WindowDiscovery::None,
    },
];

pub fn preset(name: &str) -> Option<&'static Preset> {
    let n = name.trim().to_ascii_lowercase();
    PRESETS
        .iter()
        .find(|p| p.name == n || p.aliases.contains(&n.as_str()))
}

pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}

/// `config.toml` as written by the user. Every field is optional.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    /// Discouraged (prefer the environment), but supported.
    pub api_key: Option<String>,
    pub temperature: Option<f32>,
    /// Most tokens of one reply, sent as `max_tokens` when set.
    pub max_tokens: Option<u32>,
    /// The model's context window in tokens (docs §3.9).
    pub context_window: Option<u64>,
    /// Read tool calls the model writes as text (docs §2.11.1).
    pub text_tool_calls: Option<bool>,
    /// Lean tool schemas and a cache-stable system prompt (docs §4.7).
    pub lean_prompt: Option<bool>,
    /// The tools offered, by name (`["all"]` for every one, docs §4.7).
    pub tools: Option<Vec<String>>,
    /// Script file for the `scripted` provider.
    pub script: Option<PathBuf>,
    #[serde(default)]
    pub agent: AgentSection,
    #[serde(default)]
    pub compaction: CompactionSection,
    /// Per-provider overrides, e.g. `[providers.ollama] model = "qwen3:8b"`.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderSection>,
    /// `[tui]`: the workstation's theme and key overrides, validated into
    /// [`Config::tui`] by `tui::settings`' rules.
    #[serde(default)]
    pub tui: Option<toml::Table>,
    /// `[mcp_servers.NAME]`: MCP servers whose tools join the agent's,
    /// validated into [`Config::mcp`] by the `mcp` room's rules (docs §13.1).
    #[serde(default)]
    pub mcp_servers: Option<toml::Table>,
    /// `[mcp]`: settings of all MCP servers together (`max_tools`),
    /// validated into [`Config::mcp`] (docs §13.3).
    #[serde(default)]
    pub mcp: Option<toml::Table>,
    /// `[swarm]`: research teams (docs §14.3).
    #[serde(default)]
    pub swarm: SwarmSection,
    /// `[backtest]`: the defaults of every backtest (docs §7.4), checked
    /// into [`BacktestDefaults`] with a suggestion for a mistyped key.
    #[serde(default)]
    pub backtest: Option<toml::Table>,
    /// `[engines.ray]`: the Ray cluster sweeps and team batches may run on,
    /// validated into [`Config::ray`] by the Ray engine's rules (docs §19.1).
    #[serde(default)]
    pub engines: Option<toml::Table>,
    /// `[monitor]`: the monitors' approval mode and outbox timings,
    /// validated into [`Config::monitor`] (docs §21.2, §21.4).
    #[serde(default)]
    pub monitor: Option<toml::Table>,
    /// `[smtp]`: the server monitors email through (docs §21.4).
    #[serde(default)]
    pub smtp: Option<toml::Table>,
}

/// The keys of `[backtest]`.
pub const BACKTEST_KEYS: [&str; 7] = [
    "commission_rate",
    "min_commission",
    "slippage",
    "lot_size",
    "allow_short",
    "benchmark",
    "initial_cash",
];

/// `[backtest]` in `config.toml` (docs §7.4): what a backtest uses for a
/// key its `config.json` leaves out, before the market's default. Each key
/// has the range of the `config.json` key of the same name (docs §7.1).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BacktestDefaults {
    pub commission_rate: Option<f64>,
    pub min_commission: Option<f64>,
    pub slippage: Option<f64>,
    pub lot_size: Option<f64>,
    pub allow_short: Option<bool>,
    pub benchmark: Option<String>,
    pub initial_cash: Option<f64>,
}

impl BacktestDefaults {
    /// Checks the section, naming every problem at once.
    pub fn from_table(table: &toml::Table) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        for key in table.keys() {
            if !BACKTEST_KEYS.contains(&key.as_str()) {
                let hint = crate::text::suggest(key, &BACKTEST_KEYS)
                    .map(|s| format!("did you mean '{s}'? "))
                    .unwrap_or_default();
                problems.push(format!(
                    "`{key}`: unknown key; {hint}valid keys: {}",
                    BACKTEST_KEYS.join(", ")
                ));
            }
        }
        let mut number = |key: &str, min: f64, min_open: bool, max: f64| {
            let v = table.get(key)?;
            let x = match v {
                toml::Value::Float(f) => *f,
                toml::Value::Integer(i) => *i as f64,
                other => {
                    problems.push(format!(
                        "`{key}`: must be a number, got {}",
                        other.type_str()
                    ));
                    return None;
                }
            };
            let below = if min_open { x <= min } else { x < min };
            if !x.is_finite() || below || x > max {
                let lo = if min_open { ">" } else { "≥" };
                problems.push(format!("`{key}`: must be {lo} {min} and ≤ {max}, got {x}"));
                return None;
            }
            Some(x)
        };
        let mut out = BacktestDefaults {
            commission_rate: number("commission_rate", 0.0, false, 0.5),
            min_commission: number("min_commission", 0.0, false, 1e9),
            slippage: number("slippage", 0.0, false, 0.5),
            lot_size: number("lot_size", 0.0, false, 1e9),
            initial_cash: number("initial_cash", 0.0, true, 1e15),
            ..Default::default()
        };
        match table.get("allow_short") {
            None => {}
            Some(toml::Value::Boolean(b)) => out.allow_short = Some(*b),
            Some(other) => problems.push(format!(
                "`allow_short`: must be true or false, got {}",
                other.type_str()
            )),
        }
        match table.get("benchmark") {
            None => {}
            Some(toml::Value::String(s)) if !s.trim().is_empty() => {
                out.benchmark = Some(s.trim().to_string());
            }
            Some(other) => problems.push(format!(
                "`benchmark`: must be a ticker such as \"SPY\" (or \"auto\"), got {}",
                other
            )),
        }
        if problems.is_empty() {
            Ok(out)
        } else {
            Err(problems)
        }
    }

    /// The defaults as `config.json` keys, for the `backtest` tool.
    pub fn config_keys(&self) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::json;
        let mut m = serde_json::Map::new();
        let mut put = |k: &str, v: Option<serde_json::Value>| {
            if let Some(v) = v {
                m.insert(k.to_string(), v);
            }
        };
        put("commission_rate", self.commission_rate.map(|x| json!(x)));
        put("min_commission", self.min_commission.map(|x| json!(x)));
        put("slippage", self.slippage.map(|x| json!(x)));
        put("lot_size", self.lot_size.map(|x| json!(x)));
        put("allow_short", self.allow_short.map(|x| json!(x)));
        put("benchmark", self.benchmark.clone().map(|x| json!(x)));
        put("initial_cash", self.initial_cash.map(|x| json!(x)));
        m
    }
}

/// `[swarm] max_workers = 4`, `deadline_seconds = 1800` (docs §14.3).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwarmSection {
    pub max_workers: Option<usize>,
    pub deadline_seconds: Option<u64>,
    /// The approval mode of team members' runs (docs §2.14.2), checked at
    /// load; read-only when unset.
    pub approval: Option<String>,
}

impl SwarmSection {
    /// The mode team members run under: no one is there to ask.
    pub fn approval_mode(&self) -> crate::model::approval::ApprovalMode {
        self.approval
            .as_deref()
            .and_then(|m| m.parse().ok())
            .unwrap_or(crate::model::approval::ApprovalMode::ReadOnly)
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub api_key: Option<String>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    pub context_window: Option<u64>,
    pub text_tool_calls: Option<bool>,
    pub lean_prompt: Option<bool>,
    pub tools: Option<Vec<String>>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub send_reasoning_content: Option<bool>,
}

/// `[agent]`: the loop constants. Times are seconds; `0` disables a timeout.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    pub max_iterations: Option<u32>,
    pub token_threshold: Option<u64>,
    pub llm_timeout_seconds: Option<f64>,
    pub idle_timeout_seconds: Option<f64>,
    pub tool_timeout_seconds: Option<f64>,
    pub stall_timeout_seconds: Option<f64>,
    pub heartbeat_interval_seconds: Option<f64>,
    pub stream_retry_delay_seconds: Option<f64>,
    pub max_retry_after_seconds: Option<f64>,
    pub tool_result_limit: Option<usize>,
    pub max_parallel_tools: Option<usize>,
    pub history_chars: Option<usize>,
    /// Largest user message in bytes (default 1 MiB, at least 1 KiB).
    pub max_message_bytes: Option<usize>,
    pub max_content_filter_skips: Option<u32>,
    pub content_filter_warning_ratio: Option<f64>,
    pub write_cancel_grace_seconds: Option<f64>,
    /// Where file tools work: `session`, `cwd` or a folder path.
    pub workspace: Option<String>,
    /// `ask` (the default), `auto-edit`, `full-auto` or `read-only`
    /// (docs §2.14.2).
    pub approval: Option<String>,
}

/// `[compaction]`: the context-management constants (docs §1.1, §3).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactionSection {
    /// `bpe` (by model, the default), `o200k_base`, `cl100k_base` or `chars4`.
    pub estimator: Option<String>,
    pub keep_recent: Option<usize>,
    pub collapse_preserve_recent: Option<usize>,
    pub collapse_min_chars: Option<usize>,
    pub collapse_head_chars: Option<usize>,
    pub collapse_tail_chars: Option<usize>,
    pub tail_token_budget: Option<u64>,
    pub summary_chunk_chars: Option<usize>,
    /// A layer freeing less than this share of tokens is not retried (0.05).
    pub min_gain: Option<f64>,
}

/// The provider side of the resolved configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderConfig {
    pub name: String,
    /// The preset's wire protocol.
    pub protocol: Protocol,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub api_key: Option<String>,
    /// Where the key came from, for `doctor` (never the key itself).
    pub api_key_source: Option<String>,
    pub key_required: bool,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// Configured window; `None` leaves it to `discovery` (docs §3.9).
    pub context_window: Option<u64>,
    pub discovery: WindowDiscovery,
    pub text_tool_calls: bool,
    /// Lean tool schemas, the run's context in the user message (§4.7).
    pub lean_prompt: bool,
    /// `None`: every tool (or each request's own, with `choose_tools`).
    pub tools: Option<Vec<String>>,
    /// Offer each request the tools chosen for it (a local preset with no
    /// `tools` set, docs §4.7.1).
    pub choose_tools: bool,
    pub script: Option<PathBuf>,
    pub headers: Vec<(String, String)>,
    pub send_reasoning_content: bool,
}

impl ProviderConfig {
    pub fn is_scripted(&self) -> bool {
        self.protocol == Protocol::Scripted
    }

    /// The key shown safely: `set (51 chars, from OPENAI_API_KEY)`.
    pub fn masked_key(&self) -> String {
        match (&self.api_key, &self.api_key_source) {
            (Some(k), src) => format!(
                "set ({} chars{})",
                k.chars().count(),
                src.as_ref()
                    .map(|s| format!(", from {s}"))
                    .unwrap_or_default()
            ),
            (None, _) => match &self.api_key_env {
                Some(env) => format!("not set (looked in {env})"),
                None => "not needed".to_string(),
            },
        }
    }
}

/// Flags from the command line; they override everything else.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub max_iterations: Option<u32>,
    pub script: Option<PathBuf>,
    /// `--tools a,b` (or `all`).
    pub tools: Option<Vec<String>>,
    /// `--approval MODE`, or full-auto for `--yes`.
    pub approval: Option<crate::model::approval::ApprovalMode>,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub paths: Paths,
    /// The config file read (or that would be read), and whether it exists.
    pub config_file: PathBuf,
    pub config_file_found: bool,
    /// `None` when no provider is configured anywhere.
    pub provider: Option<ProviderConfig>,
    pub agent: LoopConfig,
    pub swarm: SwarmSection,
    pub backtest: BacktestDefaults,
    /// `[mcp]` and `[mcp_servers]`, validated by the `mcp` room's rules
    /// (docs §13.1, §13.3).
    pub mcp: Section<crate::mcp::McpSettings>,
    /// `[tui]`: the workstation's theme and keys, key names checked.
    pub tui: Section<crate::tui::settings::TuiSettings>,
    /// `[engines.ray]`: the Ray cluster (docs §19.1).
    pub ray: Section<crate::sweep::ray::RayConfig>,
    /// `[monitor]` and `[smtp]` (docs §21.2, §21.4).
    pub monitor: Section<crate::monitor::settings::MonitorSettings>,
    /// `[agent] workspace`: where the file tools work (docs §2.3.1);
    /// commands resolve it, `--workspace` first.
    pub workspace: WorkspaceSetting,
}

/// What `[agent] workspace` names; the folder itself is checked when a
/// command resolves it, so a missing folder stops only the commands that
/// work in it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum WorkspaceChoice {
    /// `<data>/sessions/<id>/workspace/` (the default).
    #[default]
    Session,
    /// The directory the command was started in.
    Cwd,
    /// A folder (relative paths resolve against the current directory; a
    /// leading `~/` is the home folder).
    Dir(PathBuf),
}

/// `[agent] workspace` as read, with the line it is on to name in errors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkspaceSetting {
    pub choice: WorkspaceChoice,
    /// The 1-based line of the key in the config file, when set there.
    pub line: Option<usize>,
}

impl WorkspaceChoice {
    /// `session`, `cwd` or a folder; `None` for an empty value.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw.trim() {
            "" => None,
            "session" => Some(WorkspaceChoice::Session),
            "cwd" | "." => Some(WorkspaceChoice::Cwd),
            dir => Some(WorkspaceChoice::Dir(PathBuf::from(dir))),
        }
    }
}

/// `[agent] workspace`, or a problem naming its line.
fn workspace_setting(section: &AgentSection, n: &mut Numbers) -> WorkspaceSetting {
    let Some(raw) = &section.workspace else {
        return WorkspaceSetting::default();
    };
    let line = line_of(n.text, "agent", "workspace");
    match WorkspaceChoice::parse(raw) {
        Some(choice) => WorkspaceSetting { choice, line },
        None => {
            let at = line.map(|l| format!("line {l}: ")).unwrap_or_default();
            n.problems.push(format!(
                "{at}`[agent] workspace` = {raw:?} is not valid: must be \"session\", \"cwd\" or a folder path"
            ));
            WorkspaceSetting::default()
        }
    }
}

/// A section of `config.toml` that one group of commands uses, validated
/// when the file loads. Its error is kept rather than raised there, so a
/// mistyped `[mcp_servers]` entry stops the commands that start MCP servers
/// (and `doctor` reports it) while `backtest` or `sweep plan` still run; the
/// file itself is never read again.
pub type Section<T> = Result<T, SectionError>;

/// Why a section is not valid; names the file and the section.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SectionError(String);

fn section<T, E: std::fmt::Display>(r: Result<T, E>) -> Section<T> {
    r.map_err(|e| SectionError(e.to_string()))
}

/// Something that looks up environment variables (tests pass a map).
pub trait Env {
    fn var(&self, name: &str) -> Option<String>;
}

pub struct ProcessEnv;

impl Env for ProcessEnv {
    /// Keys taken out of the environment at start are still found (docs §6.1).
    fn var(&self, name: &str) -> Option<String> {
        crate::secrets::var(name).filter(|v| !v.trim().is_empty())
    }
}

impl Env for BTreeMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned().filter(|v| !v.trim().is_empty())
    }
}

impl Config {
    /// Loads from the process environment and the config file it points to.
    pub fn load(overrides: &Overrides) -> Result<Self, ConfigError> {
        let paths = Paths::from_env().ok_or(ConfigError::NoHome)?;
        Self::load_with(paths, &ProcessEnv, overrides)
    }

    pub fn load_with(
        paths: Paths,
        env: &dyn Env,
        overrides: &Overrides,
    ) -> Result<Self, ConfigError> {
        let config_file = env
            .var("VIBEDESK_CONFIG")
            .map(PathBuf::from)
            .unwrap_or_else(|| paths.config_file());
        let (file, table, text, found) = read_file_config(&config_file)?;
        let mut numbers = Numbers {
            text: &text,
            problems: Vec::new(),
        };
        let mut agent = agent_config(&file.agent, env, overrides, &mut numbers)?;
        let workspace = workspace_setting(&file.agent, &mut numbers);
        compaction_config(&mut agent, &file.compaction, env, &mut numbers)?;
        swarm_numbers(&file.swarm, &mut numbers);
        let provider = provider_config(&file, env, overrides, &config_file, &mut numbers)?;
        if !numbers.problems.is_empty() {
            return Err(ConfigError::Parse {
                path: config_file,
                message: numbers.problems.join("; "),
            });
        }
        if let Some(p) = &provider {
            agent.text_tool_calls = p.text_tool_calls;
            agent.lean_prompt = p.lean_prompt;
            agent.context_window = p.context_window;
            agent.discover_window = p.discovery != WindowDiscovery::None;
            agent.tools = p.tools.clone();
            agent.choose_tools = p.choose_tools;
            // A local server's replies are bounded (docs §2.11.2); a
            // configured `max_tokens` is sent instead of the sized one.
            let local = preset(&p.name).is_some_and(|pr| pr.local)
                || p.base_url.as_deref().is_some_and(is_loopback_url);
            agent.cut_runaways = local;
            agent.size_replies = local && p.max_tokens.is_none();
        }
        let backtest = match &file.backtest {
            None => BacktestDefaults::default(),
            Some(t) => BacktestDefaults::from_table(t).map_err(|problems| ConfigError::Parse {
                path: config_file.clone(),
                message: format!("[backtest]: {}", problems.join("; ")),
            })?,
        };
        let mcp = section(crate::mcp::from_table(&table, &config_file));
        let tui = section(crate::tui::settings::TuiSettings::from_table(
            &table,
            &config_file.display().to_string(),
        ));
        let ray = section(crate::sweep::ray::RayConfig::from_table(
            &table,
            &config_file,
        ));
        let monitor = section(crate::monitor::settings::MonitorSettings::from_table(
            &table,
            &config_file,
        ));
        Ok(Config {
            paths,
            config_file,
            config_file_found: found,
            provider,
            agent,
            swarm: file.swarm.clone(),
            backtest,
            mcp,
            tui,
            ray,
            monitor,
            workspace,
        })
    }
}

/// The config file read once: its typed sections, the whole table (for the
/// sections other rooms' rules validate), and whether it exists.
fn read_file_config(path: &Path) -> Result<(FileConfig, toml::Table, String, bool), ConfigError> {
    let parse_error = |e: toml::de::Error| ConfigError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let file: FileConfig = toml::from_str(&text).map_err(parse_error)?;
            let table: toml::Table = toml::from_str(&text).map_err(parse_error)?;
            Ok((file, table, text, true))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((
            FileConfig::default(),
            toml::Table::new(),
            String::new(),
            false,
        )),
        Err(source) => Err(ConfigError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn provider_config(
    file: &FileConfig,
    env: &dyn Env,
    overrides: &Overrides,
    config_file: &Path,
    n: &mut Numbers,
) -> Result<Option<ProviderConfig>, ConfigError> {
    // Every provider's numbers are checked, not only the chosen one's.
    n.check("", "temperature", file.temperature, TEMPERATURE);
    n.check("", "max_tokens", file.max_tokens, MAX_TOKENS);
    n.check("", "context_window", file.context_window, CONTEXT_WINDOW);
    for (name, p) in &file.providers {
        let at = format!("providers.{name}");
        n.check(&at, "temperature", p.temperature, TEMPERATURE);
        n.check(&at, "max_tokens", p.max_tokens, MAX_TOKENS);
        n.check(&at, "context_window", p.context_window, CONTEXT_WINDOW);
    }
    let name = overrides
        .provider
        .clone()
        .or_else(|| env.var("VIBEDESK_PROVIDER"))
        .or_else(|| file.provider.clone())
        // A script alone selects the scripted provider.
        .or_else(|| overrides.script.as_ref().map(|_| "scripted".to_string()))
        // A bare base URL means "some OpenAI-compatible server".
        .or_else(|| {
            overrides
                .base_url
                .clone()
                .or_else(|| env.var("VIBEDESK_BASE_URL"))
                .or_else(|| file.base_url.clone())
                .map(|_| "custom".to_string())
        });
    let Some(name) = name else {
        return Ok(None);
    };
    let preset = preset(&name).ok_or_else(|| ConfigError::UnknownProvider(name.clone()))?;
    let section = file
        .providers
        .iter()
        .find(|(k, _)| self::preset(k).is_some_and(|p| p.name == preset.name))
        .map(|(_, v)| v.clone())
        .unwrap_or_default();

    let model = overrides
        .model
        .clone()
        .or_else(|| env.var("VIBEDESK_MODEL"))
        .or_else(|| section.model.clone())
        .or_else(|| file.model.clone())
        .or_else(|| preset.default_model.map(String::from));
    let base_url = overrides
        .base_url
        .clone()
        .or_else(|| env.var("VIBEDESK_BASE_URL"))
        .or_else(|| section.base_url.clone())
        .or_else(|| file.base_url.clone())
        .or_else(|| preset.base_url.map(String::from));
    let api_key_env = section
        .api_key_env
        .clone()
        .or_else(|| file.api_key_env.clone())
        .or_else(|| preset.api_key_env.map(String::from));
    let (api_key, api_key_source) = if let Some(k) = env.var("VIBEDESK_API_KEY") {
        (Some(k), Some("VIBEDESK_API_KEY".to_string()))
    } else if let Some(k) = section.api_key.clone().or_else(|| file.api_key.clone()) {
        (Some(k), Some(config_file.display().to_string()))
    } else if let Some(var) = &api_key_env
        && let Some(k) = env.var(var)
    {
        (Some(k), Some(var.clone()))
    } else {
        (None, None)
    };
    let temperature = env_in::<f32>(env, "VIBEDESK_TEMPERATURE", TEMPERATURE)?
        .or(section.temperature)
        .or(file.temperature)
        .or(preset.local.then_some(LOCAL_TEMPERATURE));
    let max_tokens = env_in::<u32>(env, "VIBEDESK_MAX_TOKENS", MAX_TOKENS)?
        .or(section.max_tokens)
        .or(file.max_tokens)
        .filter(|n| *n > 0);
    let context_window = env_in::<u64>(env, "VIBEDESK_CONTEXT_WINDOW", CONTEXT_WINDOW)?
        .or(section.context_window)
        .or(file.context_window)
        .filter(|n| *n > 0);
    // A server on this machine is a local one, whatever preset named it
    // (`--provider openai --base-url http://127.0.0.1:8080/v1`).
    let local_url = base_url.as_deref().is_some_and(is_loopback_url);
    let text_tool_calls = section
        .text_tool_calls
        .or(file.text_tool_calls)
        .unwrap_or(preset.local || local_url);
    let lean_prompt = section
        .lean_prompt
        .or(file.lean_prompt)
        .unwrap_or(preset.local || local_url);
    let discovery = match preset.discovery {
        WindowDiscovery::None if local_url => WindowDiscovery::Auto,
        d => d,
    };
    let named = overrides
        .tools
        .clone()
        .or_else(|| env.var("VIBEDESK_TOOLS").map(|v| split_tools(&v)));
    let named = named
        .or_else(|| section.tools.clone())
        .or_else(|| file.tools.clone());
    // A local preset told nothing chooses each request's tools (§4.7.1).
    let choose_tools = preset.local && named.is_none();
    let tools = named.filter(|t| !t.iter().any(|n| n.trim().eq_ignore_ascii_case("all")));
    let script = overrides
        .script
        .clone()
        .or_else(|| env.var("VIBEDESK_SCRIPT").map(PathBuf::from))
        .or_else(|| file.script.clone());
    let mut headers: Vec<(String, String)> = section.headers.clone().into_iter().collect();
    if preset.name == "openrouter"
        && !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("x-title"))
    {
        headers.push(("X-Title".into(), "vibedesk".into()));
    }
    Ok(Some(ProviderConfig {
        name: preset.name.to_string(),
        protocol: preset.protocol,
        model,
        base_url,
        api_key_env,
        api_key,
        api_key_source,
        key_required: preset.key_required,
        temperature,
        max_tokens,
        context_window,
        discovery,
        text_tool_calls,
        lean_prompt,
        tools,
        choose_tools,
        script,
        headers,
        send_reasoning_content: section
            .send_reasoning_content
            .unwrap_or(preset.send_reasoning_content),
    }))
}

/// `a, b c` → `["a", "b", "c"]`: the form of `--tools` and `VIBEDESK_TOOLS`.
pub fn split_tools(list: &str) -> Vec<String> {
    list.split(|c: char| c == ',' || c.is_whitespace())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect()
}

/// Whether a base URL names this machine (`localhost`, `127.x`, `[::1]`).
pub fn is_loopback_url(url: &str) -> bool {
    let Some(rest) = url.trim().split("://").nth(1) else {
        return false;
    };
    let host_port = rest.split('/').next().unwrap_or("");
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The range a configured number must lie in (docs §1.1 lists each key's):
/// finite, from `min` to `max`, and 0 too where 0 means "off".
#[derive(Clone, Copy, Debug)]
struct Range {
    min: f64,
    max: f64,
    zero_off: bool,
    unit: &'static str,
}

impl Range {
    const fn new(min: f64, max: f64, unit: &'static str) -> Self {
        Range {
            min,
            max,
            zero_off: false,
            unit,
        }
    }

    /// A timeout: 0 disables it, anything else is at most a week, so that
    /// every deadline `now + timeout` is representable.
    const fn timeout() -> Self {
        Range {
            min: 0.001,
            max: 604_800.0,
            zero_off: true,
            unit: "seconds",
        }
    }

    fn contains(&self, x: f64) -> bool {
        x.is_finite() && ((self.zero_off && x == 0.0) || (x >= self.min && x <= self.max))
    }

    fn describe(&self) -> String {
        let span = format!("from {} to {} {}", self.min, self.max, self.unit);
        if self.zero_off {
            format!("must be 0 (off) or {span}")
        } else {
            format!("must be {span}")
        }
    }
}

/// Ranges of the `[agent]`, `[compaction]`, `[swarm]` and provider numbers.
const MAX_ITERATIONS: Range = Range::new(1.0, 10_000.0, "iterations");
const TOKEN_THRESHOLD: Range = Range::new(512.0, 1e9, "tokens");
const HEARTBEAT: Range = Range::new(0.5, 3_600.0, "seconds");
const RETRY_DELAY: Range = Range::new(0.0, 600.0, "seconds");
const RETRY_AFTER: Range = Range::new(0.0, 3_600.0, "seconds");
const CANCEL_GRACE: Range = Range::new(0.0, 3_600.0, "seconds");
const RESULT_LIMIT: Range = Range::new(200.0, 1e8, "characters");
const PARALLEL_TOOLS: Range = Range::new(1.0, 64.0, "calls");
const CHARS: Range = Range::new(0.0, 1e8, "characters");
const MESSAGE_BYTES: Range = Range::new(
    crate::agent::config::MIN_MAX_MESSAGE_BYTES as f64,
    1_073_741_824.0,
    "bytes",
);
const FILTER_SKIPS: Range = Range::new(1.0, 1_000.0, "replies");
const RATIO: Range = Range::new(0.0, 1.0, "(a share)");
const MESSAGES: Range = Range::new(0.0, 100_000.0, "messages");
const TAIL_BUDGET: Range = Range::new(1.0, 1e9, "tokens");
const CHUNK_CHARS: Range = Range::new(200.0, 1e8, "characters");
const SWARM_DEADLINE: Range = Range::new(1.0, 604_800.0, "seconds");
const TEMPERATURE: Range = Range::new(0.0, 2.0, "");
const MAX_TOKENS: Range = Range {
    min: 1.0,
    max: 10_000_000.0,
    zero_off: true,
    unit: "tokens (0: not sent)",
};
const CONTEXT_WINDOW: Range = Range {
    min: 512.0,
    max: 1e9,
    zero_off: true,
    unit: "tokens (0: asked from the server)",
};

/// The config file's numbers as they are checked: its text, to name the
/// line a bad key is on, and every problem found, reported together.
struct Numbers<'a> {
    text: &'a str,
    problems: Vec<String>,
}

impl Numbers<'_> {
    /// `value` of `[section] key` when in `range`; otherwise the problem is
    /// kept, naming the key, its line and the range, and `None` returned.
    fn check<T: Copy + std::fmt::Debug + Into<Num>>(
        &mut self,
        section: &str,
        key: &str,
        value: Option<T>,
        range: Range,
    ) -> Option<T> {
        let v = value?;
        if range.contains(v.into().0) {
            return Some(v);
        }
        let line = line_of(self.text, section, key)
            .map(|l| format!("line {l}: "))
            .unwrap_or_default();
        let name = if section.is_empty() {
            key.to_string()
        } else {
            format!("[{section}] {key}")
        };
        self.problems.push(format!(
            "{line}`{name}` = {v:?} is out of range: {}",
            range.describe()
        ));
        None
    }
}

impl Numbers<'_> {
    /// `[section] approval` read as an approval mode; an unknown name is
    /// kept as a problem naming the key, its line and the modes.
    fn approval(
        &mut self,
        section: &str,
        value: Option<&str>,
    ) -> Option<crate::model::approval::ApprovalMode> {
        let raw = value?;
        match raw.parse() {
            Ok(mode) => Some(mode),
            Err(e) => {
                let line = line_of(self.text, section, "approval")
                    .map(|l| format!("line {l}: "))
                    .unwrap_or_default();
                self.problems
                    .push(format!("{line}`[{section}] approval` = {raw:?}: {e}"));
                None
            }
        }
    }
}

/// A configured number as `f64` for its range check (integers above 2^53
/// round, which no range's bounds come near).
struct Num(f64);

macro_rules! num_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Num {
            fn from(v: $t) -> Num {
                Num(v as f64)
            }
        }
    )*};
}
num_from!(f64, f32, u32, u64, usize);

/// The 1-based line of `[section] key` in a TOML text (`section` dotted,
/// empty for the top level).
fn line_of(text: &str, section: &str, key: &str) -> Option<usize> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    let mut table = doc.get_ref();
    for part in section.split('.').filter(|p| !p.is_empty()) {
        table = table
            .iter()
            .find(|(k, _)| k.get_ref() == part)?
            .1
            .get_ref()
            .as_table()?;
    }
    let (_, value) = table.iter().find(|(k, _)| k.get_ref() == key)?;
    let at = value.span().start.min(text.len());
    Some(
        text.as_bytes()[..at]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1,
    )
}

/// A number from the environment, in `range`.
fn env_in<T>(env: &dyn Env, name: &str, range: Range) -> Result<Option<T>, ConfigError>
where
    T: std::str::FromStr + Copy + Into<Num>,
{
    let Some(raw) = env.var(name) else {
        return Ok(None);
    };
    match raw.trim().parse::<T>() {
        Ok(v) if range.contains(v.into().0) => Ok(Some(v)),
        _ => Err(ConfigError::Env {
            name: name.to_string(),
            value: raw,
            expected: range.describe(),
        }),
    }
}

/// Seconds already in range → duration; 0 disables.
fn secs(v: f64) -> Option<Duration> {
    (v > 0.0)
        .then(|| Duration::try_from_secs_f64(v).ok())
        .flatten()
}

fn agent_config(
    section: &AgentSection,
    env: &dyn Env,
    overrides: &Overrides,
    n: &mut Numbers,
) -> Result<LoopConfig, ConfigError> {
    const A: &str = "agent";
    let mut c = LoopConfig::default();
    if let Some(v) = overrides.max_iterations
        && !MAX_ITERATIONS.contains(f64::from(v))
    {
        return Err(ConfigError::Flag {
            flag: "--max-iterations",
            value: v.to_string(),
            expected: MAX_ITERATIONS.describe(),
        });
    }
    let file_max = n.check(A, "max_iterations", section.max_iterations, MAX_ITERATIONS);
    if let Some(v) = overrides
        .max_iterations
        .or(env_in(env, "VIBEDESK_MAX_ITERATIONS", MAX_ITERATIONS)?)
        .or(file_max)
    {
        c.max_iterations = v;
    }
    let file_t = n.check(
        A,
        "token_threshold",
        section.token_threshold,
        TOKEN_THRESHOLD,
    );
    if let Some(v) = env_in(env, "VIBEDESK_TOKEN_THRESHOLD", TOKEN_THRESHOLD)?.or(file_t) {
        c.token_threshold = v;
    }
    let t = Range::timeout();
    let file_llm = n.check(A, "llm_timeout_seconds", section.llm_timeout_seconds, t);
    if let Some(v) = env_in(env, "VIBEDESK_LLM_TIMEOUT_SECONDS", t)?.or(file_llm) {
        c.llm_timeout = secs(v);
        // The original uses the LLM timeout as the idle timeout too (docs §1.1).
        c.idle_timeout = secs(v);
    }
    if let Some(v) = n.check(A, "idle_timeout_seconds", section.idle_timeout_seconds, t) {
        c.idle_timeout = secs(v);
    }
    let file_tool = n.check(A, "tool_timeout_seconds", section.tool_timeout_seconds, t);
    if let Some(v) = env_in(env, "VIBEDESK_TOOL_TIMEOUT_SECONDS", t)?.or(file_tool) {
        c.scheduler.default_timeout = secs(v);
    }
    let file_stall = n.check(A, "stall_timeout_seconds", section.stall_timeout_seconds, t);
    if let Some(v) = env_in(env, "VIBEDESK_STALL_TIMEOUT_SECONDS", t)?.or(file_stall) {
        c.stall_timeout = secs(v);
    }
    let file_beat = n.check(
        A,
        "heartbeat_interval_seconds",
        section.heartbeat_interval_seconds,
        HEARTBEAT,
    );
    if let Some(v) = env_in(env, "VIBEDESK_HEARTBEAT_INTERVAL_SECONDS", HEARTBEAT)?.or(file_beat) {
        c.scheduler.heartbeat_interval = secs(v).unwrap_or(c.scheduler.heartbeat_interval);
    }
    if let Some(v) = n.check(
        A,
        "stream_retry_delay_seconds",
        section.stream_retry_delay_seconds,
        RETRY_DELAY,
    ) {
        c.stream_retry_delay = secs(v).unwrap_or_default();
    }
    if let Some(v) = n.check(
        A,
        "max_retry_after_seconds",
        section.max_retry_after_seconds,
        RETRY_AFTER,
    ) {
        c.max_retry_after = secs(v).unwrap_or_default();
    }
    if let Some(v) = n.check(
        A,
        "tool_result_limit",
        section.tool_result_limit,
        RESULT_LIMIT,
    ) {
        c.scheduler.result_limit = v;
    }
    if let Some(v) = n.check(
        A,
        "max_parallel_tools",
        section.max_parallel_tools,
        PARALLEL_TOOLS,
    ) {
        c.scheduler.max_parallel = v;
    }
    if let Some(v) = n.check(A, "history_chars", section.history_chars, CHARS) {
        c.history_chars = v;
    }
    if let Some(v) = n.check(
        A,
        "max_message_bytes",
        section.max_message_bytes,
        MESSAGE_BYTES,
    ) {
        c.max_message_bytes = v;
    }
    if let Some(v) = n.check(
        A,
        "max_content_filter_skips",
        section.max_content_filter_skips,
        FILTER_SKIPS,
    ) {
        c.max_content_filter_skips = v;
    }
    if let Some(v) = n.check(
        A,
        "content_filter_warning_ratio",
        section.content_filter_warning_ratio,
        RATIO,
    ) {
        c.content_filter_warning_ratio = v;
    }
    if let Some(v) = n.check(
        A,
        "write_cancel_grace_seconds",
        section.write_cancel_grace_seconds,
        CANCEL_GRACE,
    ) {
        c.scheduler.write_cancel_grace = secs(v).unwrap_or_default();
    }
    if let Some(mode) = n.approval(A, section.approval.as_deref()) {
        c.approval = mode;
    }
    if let Some(mode) = overrides.approval {
        c.approval = mode;
    }
    Ok(c)
}

/// `[swarm] deadline_seconds`: the whole team run, at most a week (its
/// `max_workers` is checked against the open-file limit when a team runs).
fn swarm_numbers(section: &SwarmSection, n: &mut Numbers) {
    n.approval("swarm", section.approval.as_deref());
    n.check(
        "swarm",
        "deadline_seconds",
        section.deadline_seconds,
        SWARM_DEADLINE,
    );
}

fn compaction_config(
    agent: &mut LoopConfig,
    section: &CompactionSection,
    env: &dyn Env,
    n: &mut Numbers,
) -> Result<(), ConfigError> {
    const C: &str = "compaction";
    let c = &mut agent.compaction;
    if let Some(e) = env
        .var("VIBEDESK_ESTIMATOR")
        .or_else(|| section.estimator.clone())
    {
        if crate::llm::tokens::Estimator::from_name(&e, "").is_none() {
            return Err(ConfigError::Env {
                name: "VIBEDESK_ESTIMATOR (or [compaction] estimator)".into(),
                value: e,
                expected: "one of bpe, o200k_base, cl100k_base, chars4".into(),
            });
        }
        c.estimator = e;
    }
    let mut set = |dst: &mut usize, key: &str, v: Option<usize>, range: Range| {
        if let Some(v) = n.check(C, key, v, range) {
            *dst = v;
        }
    };
    set(
        &mut c.keep_recent,
        "keep_recent",
        section.keep_recent,
        MESSAGES,
    );
    set(
        &mut c.collapse.preserve_recent,
        "collapse_preserve_recent",
        section.collapse_preserve_recent,
        MESSAGES,
    );
    set(
        &mut c.collapse.min_chars,
        "collapse_min_chars",
        section.collapse_min_chars,
        CHARS,
    );
    set(
        &mut c.collapse.head_chars,
        "collapse_head_chars",
        section.collapse_head_chars,
        CHARS,
    );
    set(
        &mut c.collapse.tail_chars,
        "collapse_tail_chars",
        section.collapse_tail_chars,
        CHARS,
    );
    set(
        &mut c.auto.chunk_chars,
        "summary_chunk_chars",
        section.summary_chunk_chars,
        CHUNK_CHARS,
    );
    if let Some(v) = n.check(
        C,
        "tail_token_budget",
        section.tail_token_budget,
        TAIL_BUDGET,
    ) {
        c.auto.tail_token_budget = v;
    }
    if let Some(v) = n.check(C, "min_gain", section.min_gain, RATIO) {
        c.min_gain = v;
    }
    // A collapsed message must be shorter than the collapse threshold, or it
    // would be collapsed again every iteration.
    let floor = c.collapse.head_chars + c.collapse.tail_chars + 40;
    if floor >= c.collapse.min_chars {
        c.collapse.min_chars = floor;
    }
    Ok(())
}

/// A commented starting point for `config.toml`.
pub const EXAMPLE_CONFIG: &str = r#"# vibedesk configuration. Every key is optional.
# provider = "deepseek"          # openai, deepseek, openrouter, moonshot (kimi), qwen (dashscope),
#                                # zhipu (glm), ollama, vllm, llamacpp, custom, scripted
# model = "deepseek-chat"
# base_url = "https://api.deepseek.com/v1"
# api_key_env = "DEEPSEEK_API_KEY"   # the key itself stays in the environment

# [providers.ollama]
# model = "qwen3:8b"

# [providers.llamacpp]          # llama-server --jinja on 127.0.0.1:8080
# temperature = 0.2             # local presets default to 0.2; sent only when set
# max_tokens = 1024             # sent only when set
# context_window = 8192         # default: asked from the server (/props)
# text_tool_calls = true        # read calls the model writes as text (local default)
# lean_prompt = true            # lean tool schemas, the date in the user message (local default)
# tools = ["get_market_data", "technical_indicator", "backtest"]   # or ["all"]; local default: chosen per request

# [agent]
# max_iterations = 50
# token_threshold = 40000
# llm_timeout_seconds = 300
# tool_timeout_seconds = 1800
# stall_timeout_seconds = 1800
# max_message_bytes = 1048576   # the largest user message; hand larger texts in as workspace files
# workspace = "session"         # where file tools work: "session" (a folder per session), "cwd" or a path

# [compaction]
# estimator = "bpe"            # or o200k_base, cl100k_base, chars4 (the original's len/4)
# tail_token_budget = 20000

# [backtest]                   # defaults for a backtest whose config.json leaves the key out
# commission_rate = 0.001      # 10 bp of notional per fill (US equities: 0)
# min_commission = 1.0
# slippage = 0.0005            # 5 bp of the open, against the trade
# lot_size = 1                 # whole shares; 0 = fractional
# allow_short = true
# benchmark = "SPY"
# initial_cash = 1000000
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn load(
        dir: &Path,
        file: Option<&str>,
        e: &[(&str, &str)],
        o: Overrides,
    ) -> Result<Config, ConfigError> {
        let paths = Paths::under(dir);
        if let Some(text) = file {
            std::fs::create_dir_all(&paths.config_dir).unwrap();
            std::fs::write(paths.config_file(), text).unwrap();
        }
        Config::load_with(paths, &env(e), &o)
    }

    #[test]
    fn owned_sections_are_typed_at_load_and_a_bad_one_is_kept_for_its_commands() {
        let d = tempfile::tempdir().unwrap();
        let good = "[mcp]\nmax_tools = 7\n[mcp_servers.time]\ncommand = \"mcp-server-time\"\n\
                    [tui]\ntheme = \"light\"\n[tui.keys]\ntranscripts = \"f2\"\n\
                    [engines.ray]\naddress = \"http://h:8265\"\n";
        let c = load(d.path(), Some(good), &[], Overrides::default()).unwrap();
        let mcp = c.mcp.as_ref().unwrap();
        assert_eq!((mcp.max_tools, mcp.servers.len()), (7, 1));
        assert_eq!(mcp.servers[0].name, "time");
        assert_eq!(c.tui.as_ref().unwrap().theme.as_deref(), Some("light"));
        assert_eq!(
            c.ray.as_ref().unwrap().address.as_deref(),
            Some("http://h:8265")
        );

        // Nothing configured: each section's defaults.
        let e = tempfile::tempdir().unwrap();
        let c = load(e.path(), None, &[], Overrides::default()).unwrap();
        assert_eq!(c.mcp.unwrap(), crate::mcp::McpSettings::default());
        assert_eq!(c.tui.unwrap(), crate::tui::settings::TuiSettings::default());
        assert_eq!(c.ray.unwrap(), crate::sweep::ray::RayConfig::default());

        // Each bad section is its own error, naming the file and the
        // problem; the rest of the config loads.
        let f = tempfile::tempdir().unwrap();
        let bad = "model = \"m\"\n[mcp_servers.a]\ncomand = \"x\"\n\
                   [tui.keys]\nno_such_action = \"f2\"\n\
                   [engines.ray]\nadress = \"http://h:8265\"\n[backtest]\nlot_size = 100\n";
        let c = load(f.path(), Some(bad), &[], Overrides::default()).unwrap();
        assert_eq!(c.backtest.lot_size, Some(100.0));
        let file = c.config_file.display().to_string();
        for (section, needle) in [
            (&c.mcp.as_ref().err(), "comand"),
            (&c.tui.as_ref().err(), "no_such_action"),
            (&c.ray.as_ref().err(), "adress"),
        ] {
            let e = section.expect("the bad section is an error").to_string();
            assert!(e.contains(needle) && e.contains(&file), "{e}");
        }
    }

    #[test]
    fn nothing_configured_means_no_provider() {
        let d = tempfile::tempdir().unwrap();
        let c = load(d.path(), None, &[], Overrides::default()).unwrap();
        assert!(c.provider.is_none());
        assert!(!c.config_file_found);
        assert_eq!(c.agent.max_iterations, 50);
    }

    #[test]
    fn preset_plus_key_from_env() {
        let d = tempfile::tempdir().unwrap();
        let c = load(
            d.path(),
            Some("provider = \"kimi\"\n"),
            &[("MOONSHOT_API_KEY", "sk-abc")],
            Overrides::default(),
        )
        .unwrap();
        let p = c.provider.unwrap();
        assert_eq!(p.name, "moonshot");
        assert_eq!(p.base_url.as_deref(), Some("https://api.moonshot.cn/v1"));
        assert_eq!(p.api_key.as_deref(), Some("sk-abc"));
        assert!(p.send_reasoning_content);
        assert_eq!(p.masked_key(), "set (6 chars, from MOONSHOT_API_KEY)");
        assert!(!p.masked_key().contains("abc"));
    }

    #[test]
    fn precedence_file_section_env_flags() {
        let d = tempfile::tempdir().unwrap();
        let file = "provider = \"ollama\"\nmodel = \"top\"\n[providers.ollama]\nmodel = \"section\"\n[agent]\nmax_iterations = 7\n";
        let c = load(d.path(), Some(file), &[], Overrides::default()).unwrap();
        assert_eq!(
            c.provider.as_ref().unwrap().model.as_deref(),
            Some("section")
        );
        assert_eq!(c.agent.max_iterations, 7);
        let c = load(
            d.path(),
            None,
            &[("VIBEDESK_MODEL", "envm"), ("VIBEDESK_MAX_ITERATIONS", "9")],
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(c.provider.as_ref().unwrap().model.as_deref(), Some("envm"));
        assert_eq!(c.agent.max_iterations, 9);
        let o = Overrides {
            model: Some("flag".into()),
            max_iterations: Some(3),
            ..Overrides::default()
        };
        let c = load(d.path(), None, &[("VIBEDESK_MODEL", "envm")], o).unwrap();
        assert_eq!(c.provider.unwrap().model.as_deref(), Some("flag"));
        assert_eq!(c.agent.max_iterations, 3);
    }

    #[test]
    fn bad_input_gets_clear_errors() {
        let d = tempfile::tempdir().unwrap();
        let e = load(
            d.path(),
            Some("provder = \"x\"\n"),
            &[],
            Overrides::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("provder"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let e = load(
            d.path(),
            None,
            &[("VIBEDESK_MAX_ITERATIONS", "lots")],
            Overrides::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("VIBEDESK_MAX_ITERATIONS"), "{e}");
        let e = load(
            d.path(),
            None,
            &[("VIBEDESK_PROVIDER", "nope")],
            Overrides::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("deepseek"), "{e}");
    }

    #[test]
    fn compaction_section_and_estimator() {
        let d = tempfile::tempdir().unwrap();
        let c = load(
            d.path(),
            Some(
                "[compaction]\nestimator = \"chars4\"\ntail_token_budget = 5000\nkeep_recent = 5\n",
            ),
            &[],
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(c.agent.compaction.estimator, "chars4");
        assert_eq!(c.agent.compaction.auto.tail_token_budget, 5000);
        assert_eq!(c.agent.compaction.keep_recent, 5);
        let e = load(
            d.path(),
            None,
            &[("VIBEDESK_ESTIMATOR", "words")],
            Overrides::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("chars4"), "{e}");
    }

    #[test]
    fn base_url_alone_selects_custom_and_zero_disables_timeouts() {
        let d = tempfile::tempdir().unwrap();
        let c = load(
            d.path(),
            Some("[agent]\nllm_timeout_seconds = 0\n"),
            &[("VIBEDESK_BASE_URL", "http://127.0.0.1:9/v1")],
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(c.provider.unwrap().name, "custom");
        assert!(c.agent.llm_timeout.is_none());
        assert!(c.agent.idle_timeout.is_none());
    }

    #[test]
    fn the_backtest_section_sets_defaults_as_config_json_keys() {
        let d = tempfile::tempdir().unwrap();
        let c = load(d.path(), None, &[], Overrides::default()).unwrap();
        assert!(
            c.backtest.config_keys().is_empty(),
            "no section, no defaults"
        );
        let file = "[backtest]\ncommission_rate = 0.001\nmin_commission = 1\nslippage = 0.0002\nlot_size = 100\nallow_short = false\nbenchmark = \" QQQ \"\ninitial_cash = 250000\n";
        let c = load(d.path(), Some(file), &[], Overrides::default()).unwrap();
        assert_eq!(
            serde_json::Value::Object(c.backtest.config_keys()),
            serde_json::json!({"commission_rate": 0.001, "min_commission": 1.0, "slippage": 0.0002,
                "lot_size": 100.0, "allow_short": false, "benchmark": "QQQ", "initial_cash": 250000.0})
        );
    }

    #[test]
    fn the_backtest_section_names_every_problem_with_a_suggestion() {
        let d = tempfile::tempdir().unwrap();
        let file = "[backtest]\ncomission_rate = 0.001\nslippage = 2\nallow_short = \"yes\"\ninitial_cash = 0\nbenchmark = \"\"\nwhatever = 1\n";
        let e = load(d.path(), Some(file), &[], Overrides::default())
            .unwrap_err()
            .to_string();
        for part in [
            "[backtest]:",
            "`comission_rate`: unknown key; did you mean 'commission_rate'?",
            "`whatever`: unknown key; valid keys: commission_rate,",
            "`slippage`: must be ≥ 0 and ≤ 0.5, got 2",
            "`allow_short`: must be true or false, got string",
            "`initial_cash`: must be > 0",
            "`benchmark`: must be a ticker",
        ] {
            assert!(e.contains(part), "{part} in {e}");
        }
        let e = load(
            d.path(),
            Some("[backtest]\nlot_size = \"round\"\n"),
            &[],
            Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("`lot_size`: must be a number, got string"),
            "{e}"
        );
    }

    #[test]
    fn local_presets_read_text_calls_at_a_low_temperature_with_the_research_tools() {
        let d = tempfile::tempdir().unwrap();
        let c = load(
            d.path(),
            Some("provider = \"llamacpp\"\n"),
            &[],
            Overrides::default(),
        )
        .unwrap();
        let p = c.provider.unwrap();
        assert_eq!(p.base_url.as_deref(), Some("http://127.0.0.1:8080/v1"));
        assert_eq!(p.model.as_deref(), Some("local"));
        assert_eq!(p.temperature, Some(LOCAL_TEMPERATURE));
        assert!(p.text_tool_calls && p.lean_prompt);
        assert_eq!(p.discovery, WindowDiscovery::LlamaCpp);
        assert_eq!(p.tools, None);
        assert!(p.choose_tools, "each request gets its own tools");
        assert!(c.agent.text_tool_calls && c.agent.discover_window && c.agent.lean_prompt);
        assert!(c.agent.choose_tools && c.agent.tools.is_none());
        assert!(
            c.agent.size_replies && c.agent.cut_runaways,
            "a local reply is sized to the window and watched for runaways"
        );
        let c = load(
            d.path(),
            Some("provider = \"ollama\"\nmodel = \"qwen2.5-coder:1.5b\"\n"),
            &[],
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(c.provider.unwrap().discovery, WindowDiscovery::Ollama);
    }

    #[test]
    fn a_server_on_this_machine_is_local_whatever_the_preset() {
        let d = tempfile::tempdir().unwrap();
        let o = Overrides {
            provider: Some("openai".into()),
            base_url: Some("http://127.0.0.1:8080/v1".into()),
            ..Overrides::default()
        };
        let c = load(d.path(), None, &[("OPENAI_API_KEY", "sk-x")], o).unwrap();
        let p = c.provider.unwrap();
        assert!(
            p.text_tool_calls && p.lean_prompt,
            "text-form calls are read from a local server, and its prompt is lean"
        );
        assert_eq!(p.discovery, WindowDiscovery::Auto);
        assert_eq!(p.temperature, None, "only the local presets set one");
        assert_eq!(p.tools, None);
        assert!(!p.choose_tools, "only the local presets choose");
        assert!(c.agent.size_replies && c.agent.cut_runaways);
        let c = load(
            d.path(),
            Some("provider = \"deepseek\"\n"),
            &[("DEEPSEEK_API_KEY", "k")],
            Overrides::default(),
        )
        .unwrap();
        let p = c.provider.unwrap();
        assert!(!p.text_tool_calls && !p.lean_prompt && p.discovery == WindowDiscovery::None);
        assert!(
            !c.agent.size_replies && !c.agent.cut_runaways,
            "a hosted model's replies"
        );
        assert!(is_loopback_url("http://localhost:11434/v1"));
        assert!(is_loopback_url("http://[::1]:8080/v1"));
        assert!(!is_loopback_url("https://api.openai.com/v1"));
    }

    #[test]
    fn sampling_window_and_tools_are_set_per_provider_and_overridden() {
        let d = tempfile::tempdir().unwrap();
        let file = "provider = \"llamacpp\"\n[providers.llamacpp]\ntemperature = 0.1\nmax_tokens = 1024\ncontext_window = 4096\ntext_tool_calls = false\nlean_prompt = false\ntools = [\"get_market_data\"]\n";
        let c = load(d.path(), Some(file), &[], Overrides::default()).unwrap();
        let p = c.provider.as_ref().unwrap();
        assert_eq!(
            (p.temperature, p.max_tokens, p.context_window),
            (Some(0.1), Some(1024), Some(4096))
        );
        assert!(!p.text_tool_calls && !p.lean_prompt && !c.agent.lean_prompt);
        assert_eq!(c.agent.context_window, Some(4096));
        assert_eq!(c.agent.tools, Some(vec!["get_market_data".to_string()]));
        assert!(!c.agent.choose_tools, "a named set is kept");
        assert!(
            !c.agent.size_replies && c.agent.cut_runaways,
            "a configured max_tokens is sent instead of the sized one"
        );
        let o = Overrides {
            tools: Some(split_tools("all")),
            ..Overrides::default()
        };
        let c = load(d.path(), Some(file), &[("VIBEDESK_MAX_TOKENS", "512")], o).unwrap();
        assert_eq!(c.agent.tools, None, "`all` offers every tool");
        assert!(!c.agent.choose_tools, "`all` is not a choice per request");
        assert_eq!(c.provider.unwrap().max_tokens, Some(512));
        assert_eq!(split_tools("a, b c"), vec!["a", "b", "c"]);
    }

    #[test]
    fn the_approval_mode_is_read_checked_and_overridden() {
        use crate::model::approval::ApprovalMode;
        let d = tempfile::tempdir().unwrap();
        let c = load(d.path(), None, &[], Overrides::default()).unwrap();
        assert_eq!(c.agent.approval, ApprovalMode::Ask, "ask by default");
        let file = "[agent]\napproval = \"auto-edit\"\n";
        let c = load(d.path(), Some(file), &[], Overrides::default()).unwrap();
        assert_eq!(c.agent.approval, ApprovalMode::AutoEdit);
        let o = Overrides {
            approval: Some(ApprovalMode::FullAuto),
            ..Overrides::default()
        };
        let c = load(d.path(), Some(file), &[], o).unwrap();
        assert_eq!(c.agent.approval, ApprovalMode::FullAuto, "the flag wins");
        let e = load(
            d.path(),
            Some("[agent]\nmax_iterations = 5\napproval = \"sometimes\"\n"),
            &[],
            Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("line 3: `[agent] approval` = \"sometimes\": unknown approval mode"),
            "{e}"
        );
        assert!(e.contains("ask, auto-edit, full-auto, read-only"), "{e}");
    }

    #[test]
    fn the_message_limit_is_set_in_the_agent_section_with_a_floor() {
        let d = tempfile::tempdir().unwrap();
        let c = load(d.path(), None, &[], Overrides::default()).unwrap();
        assert_eq!(c.agent.max_message_bytes, 1024 * 1024);
        let c = load(
            d.path(),
            Some("[agent]\nmax_message_bytes = 4096\n"),
            &[],
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(c.agent.max_message_bytes, 4096);
        let e = load(
            d.path(),
            Some("[agent]\nmax_message_bytes = 0\n"),
            &[],
            Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(
                "line 2: `[agent] max_message_bytes` = 0 is out of range: must be from 1024"
            ),
            "a limit of 0 would refuse every message: {e}"
        );
    }

    #[test]
    fn every_number_out_of_its_range_is_named_with_its_line_all_at_once() {
        let d = tempfile::tempdir().unwrap();
        let file = "temperature = nan\n[providers.ollama]\ncontext_window = 9223372036854775807\n\
                    [agent]\nheartbeat_interval_seconds = 0.1\nmax_parallel_tools = 0\n\
                    content_filter_warning_ratio = -1\nllm_timeout_seconds = 604800\n\
                    [compaction]\nmin_gain = 2\ncollapse_head_chars = 9223372036854775807\n\
                    [swarm]\ndeadline_seconds = 9223372036854775807\n";
        let e = load(d.path(), Some(file), &[], Overrides::default())
            .unwrap_err()
            .to_string();
        for part in [
            "line 1: `temperature` = NaN is out of range: must be from 0 to 2",
            "line 3: `[providers.ollama] context_window` = 9223372036854775807",
            "line 5: `[agent] heartbeat_interval_seconds` = 0.1 is out of range: must be from 0.5 to 3600 seconds",
            "line 6: `[agent] max_parallel_tools` = 0",
            "line 7: `[agent] content_filter_warning_ratio` = -1.0",
            "line 10: `[compaction] min_gain` = 2.0",
            "line 11: `[compaction] collapse_head_chars`",
            "line 13: `[swarm] deadline_seconds`",
        ] {
            assert!(e.contains(part), "{part} in {e}");
        }
        assert!(
            !e.contains("llm_timeout_seconds"),
            "a week is in range: {e}"
        );
        // The environment and the flag are checked too, naming themselves.
        let e = load(
            d.path(),
            None,
            &[("VIBEDESK_STALL_TIMEOUT_SECONDS", "-1")],
            Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("VIBEDESK_STALL_TIMEOUT_SECONDS") && e.contains("0 (off)"),
            "{e}"
        );
        let o = Overrides {
            max_iterations: Some(0),
            ..Overrides::default()
        };
        let e = load(d.path(), None, &[], o).unwrap_err().to_string();
        assert!(
            e.contains("--max-iterations 0 is out of range: must be from 1"),
            "{e}"
        );
    }
}
