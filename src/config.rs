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
        expected: &'static str,
    },
    #[error("unknown provider '{0}'; known: {known}", known = preset_names().join(", "))]
    UnknownProvider(String),
}

/// A provider preset (docs §2.11 lists the original's catalog).
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub base_url: Option<&'static str>,
    pub api_key_env: Option<&'static str>,
    pub default_model: Option<&'static str>,
    /// Hosted services need a key; local servers usually do not.
    pub key_required: bool,
    /// Whether the API wants `reasoning_content` echoed back in history.
    pub send_reasoning_content: bool,
}

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "openai",
        aliases: &[],
        base_url: Some("https://api.openai.com/v1"),
        api_key_env: Some("OPENAI_API_KEY"),
        default_model: Some("gpt-4.1-mini"),
        key_required: true,
        send_reasoning_content: false,
    },
    Preset {
        name: "deepseek",
        aliases: &[],
        base_url: Some("https://api.deepseek.com/v1"),
        api_key_env: Some("DEEPSEEK_API_KEY"),
        default_model: Some("deepseek-chat"),
        key_required: true,
        send_reasoning_content: true,
    },
    Preset {
        name: "openrouter",
        aliases: &[],
        base_url: Some("https://openrouter.ai/api/v1"),
        api_key_env: Some("OPENROUTER_API_KEY"),
        default_model: Some("openai/gpt-4.1-mini"),
        key_required: true,
        send_reasoning_content: false,
    },
    Preset {
        name: "moonshot",
        aliases: &["kimi"],
        base_url: Some("https://api.moonshot.cn/v1"),
        api_key_env: Some("MOONSHOT_API_KEY"),
        default_model: Some("kimi-k2-0905-preview"),
        key_required: true,
        send_reasoning_content: true,
    },
    Preset {
        name: "qwen",
        aliases: &["dashscope"],
        base_url: Some("https://dashscope.aliyuncs.com/compatible-mode/v1"),
        api_key_env: Some("DASHSCOPE_API_KEY"),
        default_model: Some("qwen-plus"),
        key_required: true,
        send_reasoning_content: false,
    },
    Preset {
        name: "zhipu",
        aliases: &["glm"],
        base_url: Some("https://open.bigmodel.cn/api/paas/v4"),
        api_key_env: Some("ZHIPUAI_API_KEY"),
        default_model: Some("glm-4.6"),
        key_required: true,
        send_reasoning_content: false,
    },
    Preset {
        name: "ollama",
        aliases: &[],
        base_url: Some("http://127.0.0.1:11434/v1"),
        api_key_env: None,
        default_model: None,
        key_required: false,
        send_reasoning_content: false,
    },
    Preset {
        name: "vllm",
        aliases: &[],
        base_url: Some("http://127.0.0.1:8000/v1"),
        api_key_env: Some("VLLM_API_KEY"),
        default_model: None,
        key_required: false,
        send_reasoning_content: false,
    },
    Preset {
        name: "llamacpp",
        aliases: &["llama.cpp", "llama-cpp"],
        base_url: Some("http://127.0.0.1:8080/v1"),
        api_key_env: None,
        default_model: None,
        key_required: false,
        send_reasoning_content: false,
    },
    Preset {
        name: "custom",
        aliases: &["openai-compatible"],
        base_url: None,
        api_key_env: Some("VIBEDESK_API_KEY"),
        default_model: None,
        key_required: false,
        send_reasoning_content: false,
    },
    Preset {
        name: "scripted",
        aliases: &[],
        base_url: None,
        api_key_env: None,
        default_model: Some("scripted"),
        key_required: false,
        send_reasoning_content: false,
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
    /// Script file for the `scripted` provider.
    pub script: Option<PathBuf>,
    #[serde(default)]
    pub agent: AgentSection,
    #[serde(default)]
    pub compaction: CompactionSection,
    /// Per-provider overrides, e.g. `[providers.ollama] model = "qwen3:8b"`.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderSection>,
    /// `[tui]`: the workstation's theme and key overrides, read by the
    /// workstation itself (`tui::settings`).
    #[serde(default)]
    pub tui: Option<toml::Table>,
    /// `[mcp_servers.NAME]`: MCP servers whose tools join the agent's, read
    /// and validated by the `mcp` room (`mcp::config`, docs §13.1).
    #[serde(default)]
    pub mcp_servers: Option<toml::Table>,
    /// `[mcp]`: settings of all MCP servers together (`max_tools`), read
    /// and validated by the `mcp` room (docs §13.3).
    #[serde(default)]
    pub mcp: Option<toml::Table>,
    /// `[swarm]`: research teams (docs §14.3).
    #[serde(default)]
    pub swarm: SwarmSection,
    /// `[backtest]`: the defaults of every backtest (docs §7.4), checked
    /// into [`BacktestDefaults`] with a suggestion for a mistyped key.
    #[serde(default)]
    pub backtest: Option<toml::Table>,
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
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub api_key: Option<String>,
    pub temperature: Option<f32>,
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
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub api_key: Option<String>,
    /// Where the key came from, for `doctor` (never the key itself).
    pub api_key_source: Option<String>,
    pub key_required: bool,
    pub temperature: Option<f32>,
    pub script: Option<PathBuf>,
    pub headers: Vec<(String, String)>,
    pub send_reasoning_content: bool,
}

impl ProviderConfig {
    pub fn is_scripted(&self) -> bool {
        self.name == "scripted"
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
        let (file, found) = read_file_config(&config_file)?;
        let mut agent = agent_config(&file.agent, env, overrides)?;
        compaction_config(&mut agent, &file.compaction, env)?;
        let provider = provider_config(&file, env, overrides, &config_file)?;
        let backtest = match &file.backtest {
            None => BacktestDefaults::default(),
            Some(t) => BacktestDefaults::from_table(t).map_err(|problems| ConfigError::Parse {
                path: config_file.clone(),
                message: format!("[backtest]: {}", problems.join("; ")),
            })?,
        };
        Ok(Config {
            paths,
            config_file,
            config_file_found: found,
            provider,
            agent,
            swarm: file.swarm.clone(),
            backtest,
        })
    }
}

fn read_file_config(path: &Path) -> Result<(FileConfig, bool), ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text)
            .map(|c| (c, true))
            .map_err(|e| ConfigError::Parse {
                path: path.to_path_buf(),
                message: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((FileConfig::default(), false)),
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
) -> Result<Option<ProviderConfig>, ConfigError> {
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
    let temperature = match env.var("VIBEDESK_TEMPERATURE") {
        Some(v) => Some(v.trim().parse::<f32>().map_err(|_| ConfigError::Env {
            name: "VIBEDESK_TEMPERATURE".into(),
            value: v.clone(),
            expected: "a number such as 0.2",
        })?),
        None => section.temperature.or(file.temperature),
    };
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
        model,
        base_url,
        api_key_env,
        api_key,
        api_key_source,
        key_required: preset.key_required,
        temperature,
        script,
        headers,
        send_reasoning_content: section
            .send_reasoning_content
            .unwrap_or(preset.send_reasoning_content),
    }))
}

fn env_num<T: std::str::FromStr>(
    env: &dyn Env,
    name: &str,
    expected: &'static str,
) -> Result<Option<T>, ConfigError> {
    match env.var(name) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse::<T>()
            .map(Some)
            .map_err(|_| ConfigError::Env {
                name: name.to_string(),
                value: v,
                expected,
            }),
    }
}

/// Seconds → duration; `≤ 0` disables (the original's convention).
fn secs(v: f64) -> Option<Duration> {
    (v > 0.0 && v.is_finite()).then(|| Duration::from_secs_f64(v))
}

fn agent_config(
    section: &AgentSection,
    env: &dyn Env,
    overrides: &Overrides,
) -> Result<LoopConfig, ConfigError> {
    let mut c = LoopConfig::default();
    let secs_expected = "a number of seconds (0 disables)";
    if let Some(v) = overrides
        .max_iterations
        .or(env_num(
            env,
            "VIBEDESK_MAX_ITERATIONS",
            "a whole number ≥ 1",
        )?)
        .or(section.max_iterations)
    {
        c.max_iterations = v.max(1);
    }
    if let Some(v) = env_num(env, "VIBEDESK_TOKEN_THRESHOLD", "a whole number of tokens")?
        .or(section.token_threshold)
    {
        c.token_threshold = v.max(1);
    }
    if let Some(v) =
        env_num(env, "VIBEDESK_LLM_TIMEOUT_SECONDS", secs_expected)?.or(section.llm_timeout_seconds)
    {
        c.llm_timeout = secs(v);
        // The original uses the LLM timeout as the idle timeout too (docs §1.1).
        c.idle_timeout = secs(v);
    }
    if let Some(v) = section.idle_timeout_seconds {
        c.idle_timeout = secs(v);
    }
    if let Some(v) = env_num(env, "VIBEDESK_TOOL_TIMEOUT_SECONDS", secs_expected)?
        .or(section.tool_timeout_seconds)
    {
        c.scheduler.default_timeout = secs(v);
    }
    if let Some(v) = env_num(env, "VIBEDESK_STALL_TIMEOUT_SECONDS", secs_expected)?
        .or(section.stall_timeout_seconds)
    {
        c.stall_timeout = secs(v);
    }
    if let Some(v) = env_num(env, "VIBEDESK_HEARTBEAT_INTERVAL_SECONDS", secs_expected)?
        .or(section.heartbeat_interval_seconds)
    {
        // Clamped to ≥ 0.5 s (docs §2.4).
        c.scheduler.heartbeat_interval = Duration::from_secs_f64(v.max(0.5));
    }
    if let Some(v) = section.stream_retry_delay_seconds {
        c.stream_retry_delay = secs(v).unwrap_or_default();
    }
    if let Some(v) = section.max_retry_after_seconds {
        c.max_retry_after = secs(v).unwrap_or_default();
    }
    if let Some(v) = section.tool_result_limit {
        c.scheduler.result_limit = v.max(200);
    }
    if let Some(v) = section.max_parallel_tools {
        c.scheduler.max_parallel = v.clamp(1, 64);
    }
    if let Some(v) = section.history_chars {
        c.history_chars = v;
    }
    if let Some(v) = section.max_message_bytes {
        c.max_message_bytes = v.max(crate::agent::config::MIN_MAX_MESSAGE_BYTES);
    }
    if let Some(v) = section.max_content_filter_skips {
        c.max_content_filter_skips = v.max(1);
    }
    if let Some(v) = section.content_filter_warning_ratio {
        c.content_filter_warning_ratio = v;
    }
    if let Some(v) = section.write_cancel_grace_seconds {
        c.scheduler.write_cancel_grace = secs(v).unwrap_or_default();
    }
    Ok(c)
}

fn compaction_config(
    agent: &mut LoopConfig,
    section: &CompactionSection,
    env: &dyn Env,
) -> Result<(), ConfigError> {
    let c = &mut agent.compaction;
    if let Some(e) = env
        .var("VIBEDESK_ESTIMATOR")
        .or_else(|| section.estimator.clone())
    {
        if crate::llm::tokens::Estimator::from_name(&e, "").is_none() {
            return Err(ConfigError::Env {
                name: "VIBEDESK_ESTIMATOR (or [compaction] estimator)".into(),
                value: e,
                expected: "one of bpe, o200k_base, cl100k_base, chars4",
            });
        }
        c.estimator = e;
    }
    let set = |dst: &mut usize, v: Option<usize>| {
        if let Some(v) = v {
            *dst = v;
        }
    };
    set(&mut c.keep_recent, section.keep_recent);
    set(
        &mut c.collapse.preserve_recent,
        section.collapse_preserve_recent,
    );
    set(&mut c.collapse.min_chars, section.collapse_min_chars);
    set(&mut c.collapse.head_chars, section.collapse_head_chars);
    set(&mut c.collapse.tail_chars, section.collapse_tail_chars);
    set(
        &mut c.auto.chunk_chars,
        section.summary_chunk_chars.map(|v| v.max(200)),
    );
    if let Some(v) = section.tail_token_budget {
        c.auto.tail_token_budget = v;
    }
    if let Some(v) = section.min_gain {
        c.min_gain = v.clamp(0.0, 1.0);
    }
    // A collapsed message must be shorter than the collapse threshold, or it
    // would be collapsed again every iteration.
    if c.collapse.head_chars + c.collapse.tail_chars + 40 >= c.collapse.min_chars {
        c.collapse.min_chars = c.collapse.head_chars + c.collapse.tail_chars + 40;
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

# [agent]
# max_iterations = 50
# token_threshold = 40000
# llm_timeout_seconds = 300
# tool_timeout_seconds = 1800
# stall_timeout_seconds = 1800
# max_message_bytes = 1048576   # the largest user message; hand larger texts in as workspace files

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
        let c = load(
            d.path(),
            Some("[agent]\nmax_message_bytes = 0\n"),
            &[],
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(
            c.agent.max_message_bytes, 1024,
            "a limit of 0 would refuse every message"
        );
    }
}
