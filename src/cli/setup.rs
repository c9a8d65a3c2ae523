//! One setup for every command (docs §2.1, §2.11): the tools of the
//! manifest, the provider built by its preset's protocol, the MCP servers'
//! start options and persistent memory, all from the one loaded `Config`.

use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, Protocol, ProviderConfig};
use crate::llm::Provider;
use crate::llm::openai::{OpenAiConfig, OpenAiProvider};
use crate::llm::scripted::{Script, ScriptedProvider};

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

/// A provider as its wire protocol builds it, for callers that need more
/// than [`Provider`] (`doctor` lists an OpenAI-compatible server's models).
pub enum Wire {
    OpenAi(Box<OpenAiProvider>),
    Scripted(ScriptedProvider),
}

impl Wire {
    pub fn into_provider(self) -> Arc<dyn Provider> {
        match self {
            Wire::OpenAi(p) => Arc::new(*p),
            Wire::Scripted(p) => Arc::new(p),
        }
    }
}

/// The one place a configured provider is built, by its preset's protocol
/// (docs §2.11), or what is missing said. `connect_timeout` is the TCP
/// connect deadline of an HTTP provider.
pub fn connect(p: &ProviderConfig, connect_timeout: Duration) -> Result<Wire, ProviderSetupError> {
    match p.protocol {
        Protocol::Scripted => {
            let path = p.script.as_ref().ok_or(ProviderSetupError::NoScript)?;
            let script = Script::from_file(path)?;
            Ok(Wire::Scripted(ScriptedProvider::new(script)))
        }
        Protocol::OpenAiChat => {
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
                connect_timeout,
                send_reasoning_content: p.send_reasoning_content,
                temperature: p.temperature,
                max_tokens: p.max_tokens,
                extra_headers: p.headers.clone(),
                discovery: p.discovery,
            })?;
            Ok(Wire::OpenAi(Box::new(provider)))
        }
    }
}

/// Builds the configured provider, or explains what is missing.
pub fn build_provider(p: &ProviderConfig) -> Result<Arc<dyn Provider>, ProviderSetupError> {
    connect(p, Duration::from_secs(15)).map(Wire::into_provider)
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
        max_tools: config
            .mcp
            .as_ref()
            .map_or(crate::mcp::DEFAULT_MAX_TOOLS, |m| m.max_tools),
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
    /// The tools: every built-in of the manifest (`tools::builtin::MANIFEST`,
    /// docs §2.1): file tools and `bash`, the agent's `compact`, market data
    /// and indicators (embedded dataset first, online sources as fallback),
    /// the quant tools (options, portfolios, risk), factor IC, regression
    /// and overfitting, `backtest`/`read_artifact` (the engine in the
    /// sandbox), and the memory and skill tools. Memory is opened once
    /// here, so its snapshot is frozen for the session (docs §4.4). Two
    /// tools with one name stop the command here, naming both.
    pub fn new(config: &Config) -> Result<Self, crate::tools::builtin::RegisterError> {
        use crate::tools::builtin::{self, MemoryEnv, ToolEnv, backtest};
        let data = &config.paths.data_dir;
        // Jobs are recorded so that the next start ends what a crash left.
        let runner =
            crate::sandbox::RunnerConfig::from_env().with_jobs_dir(Some(config.paths.jobs_dir()));
        let mut env = ToolEnv::new(crate::research::data::DataConfig {
            cache_dir: Some(config.paths.cache_dir.clone()),
            ..crate::research::data::DataConfig::default()
        });
        env.runner = runner.clone();
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
        env.backtest = Arc::new(backtest_config);
        env.tool_timeout = config.agent.scheduler.default_timeout;
        env.data_dir = Some(data.clone());
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
        env.memory = store.as_ref().map(|s| MemoryEnv {
            store: s.clone(),
            skills: Arc::new(skills),
            sessions_dir: config.paths.sessions_dir(),
        });
        let mut registry = crate::tools::Registry::new();
        builtin::register_entries(&mut registry, builtin::MANIFEST, &env)?;
        // Test only: a panicking tool for the panic boundary's end-to-end
        // tests (docs §2.4), in debug builds when asked.
        #[cfg(debug_assertions)]
        builtin::panic_probe::register_if_asked(&mut registry);
        let (recall, snapshot) = match &store {
            Some(s) => (
                Some(Arc::new(crate::agent::recall::MemoryRecall::new(s.clone()))
                    as Arc<dyn crate::agent::context::RecallHook>),
                crate::agent::recall::memory_snapshot(s),
            ),
            None => (None, String::new()),
        };
        Ok(AgentSetup {
            registry: Arc::new(registry),
            late_tools: crate::tools::LateTools::default(),
            memory: store,
            memory_flags: flags,
            recall,
            memory_snapshot: snapshot,
            skills: skill_lines,
            notes,
        })
    }

    /// The MCP servers of `config.toml` (docs §13.1), checked: a bad entry
    /// stops the command before anything starts.
    pub fn mcp_servers(
        config: &Config,
    ) -> Result<Vec<crate::mcp::McpServerConfig>, crate::config::SectionError> {
        config
            .mcp
            .as_ref()
            .map(|m| m.servers.clone())
            .map_err(Clone::clone)
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
    /// (its tool subset, or the tools chosen for `prompt` and fitted to a
    /// configured window, the skills, the memory snapshot), in estimated
    /// tokens; `vibedesk doctor` reports it (docs §4.7).
    pub fn first_request(
        &self,
        config: &Config,
        prompt: &str,
    ) -> crate::agent::context::FirstRequest {
        use crate::agent::{context, tool_choice};
        let mut available = match &config.agent.tools {
            Some(names) => self.registry.subset(names).0,
            None => crate::tools::Registry::clone(&self.registry),
        };
        let lean = config.agent.lean_prompt;
        if lean {
            available = available.leaned();
        }
        let model = config
            .provider
            .as_ref()
            .and_then(|p| p.model.clone())
            .unwrap_or_default();
        let estimator =
            crate::llm::tokens::Estimator::from_name(&config.agent.compaction.estimator, &model)
                .unwrap_or_else(|| crate::llm::tokens::Estimator::for_model(&model));
        let texts = |registry: &crate::tools::Registry, note: Option<&str>| {
            self.first_texts(config, registry, prompt, note)
        };
        let fitted = tool_choice::fit(
            &config.agent,
            config.agent.context_window,
            &available,
            prompt,
            &estimator,
            |offered, note| {
                let (system, user) = texts(offered, note);
                estimator.count(&[
                    crate::model::Message::system(system),
                    crate::model::Message::user(user),
                ])
            },
        );
        let (registry, note) = match &fitted {
            Some(f) => (
                available.subset(&f.choice.offered).0,
                tool_choice::others_note(&f.choice.held_back()),
            ),
            None => (available.clone(), None),
        };
        let (system, user) = texts(&registry, note.as_deref());
        context::first_request(&system, &user, &registry, &estimator)
    }

    /// The system text and the user message of a first request offering
    /// `registry`, with the note naming the tools held back.
    fn first_texts(
        &self,
        config: &Config,
        registry: &crate::tools::Registry,
        prompt: &str,
        note: Option<&str>,
    ) -> (String, String) {
        use crate::agent::context;
        let runs = config.paths.runs_dir().join("20260101_000000_abcdef");
        let workspace = config
            .paths
            .sessions_dir()
            .join("0123456789ab")
            .join("workspace");
        let state = context::workspace_summary(Some(&runs), Some(&workspace), &[]);
        let inputs = context::PromptInputs {
            registry,
            skills: &self.skills,
            state: &state,
            memory_snapshot: &self.memory_snapshot,
            now: chrono::Utc::now(),
        };
        let note = note.map(|n| format!("\n{n}\n")).unwrap_or_default();
        if config.agent.lean_prompt {
            let run_context = format!("{}{note}", context::run_context(&inputs).trim_end());
            (
                context::stable_system_prompt(&inputs),
                context::with_run_context(&run_context, prompt),
            )
        } else {
            (
                format!("{}{note}", context::system_prompt(&inputs)),
                prompt.to_string(),
            )
        }
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
        // Headless by default: a call that would ask is refused (docs §2.14).
        deps.authorizer = Some(crate::tools::ApprovalPolicy::headless(
            config.agent.approval,
        ));
        deps
    }

    /// [`AgentSetup::deps`] for a team's members: their runs have no one
    /// to ask and run under `[swarm] approval`, read-only by default; what
    /// they write to their own run dirs is free in every mode (docs
    /// §2.14.2).
    pub fn team_deps(
        &self,
        provider: Arc<dyn Provider>,
        config: &Config,
    ) -> crate::agent::LoopDeps {
        let mut deps = self.deps(provider, config);
        deps.authorizer = Some(crate::tools::ApprovalPolicy::headless(
            config.swarm.approval_mode(),
        ));
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
            Arc::new(crate::llm::offline::OfflineProvider::with_tools(
                crate::tools::builtin::planner_tools(),
            )),
            Some("no model is configured: the offline planner answers plain requests (backtests, prices, indicators, options, portfolios, risk, memory) from the built-in data; `vibedesk doctor` shows how to connect a model".to_string()),
        )),
    }
}
