//! `vibedesk` with no subcommand: the full-screen workstation. Wires the
//! configured provider (or the bundled demo), the theme and key bindings
//! from `config.toml`, and hands over to [`crate::tui::run`].

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use chrono::Offset;

use super::{
    AgentSetup, CliError, DemoProvider, NO_MODEL_HELP, ProviderArgs, build_provider, init_logging,
    load_config, provider_or_offline,
};
use crate::config::{Config, Overrides};
use crate::llm::Provider;
use crate::session::reconcile_stale_runs;
use crate::tui::app::AppOptions;
use crate::tui::cells::NoticeKind;
use crate::tui::keymap::Keymap;
use crate::tui::runtime::{ModelSwitch, Workstation};
use crate::tui::theme::Theme;

#[derive(clap::Args, Debug, Default, Clone)]
pub struct WorkstationArgs {
    /// Chat with the bundled scripted demo model (offline, no key needed).
    #[arg(long, conflicts_with_all = ["provider", "model", "base_url", "script"])]
    pub demo: bool,
    /// Colour theme: default, light, high-contrast, or NAME for <config>/themes/NAME.toml.
    #[arg(long)]
    pub theme: Option<String>,
    /// Resume this session in the chat.
    #[arg(long)]
    pub session: Option<String>,
    #[command(flatten)]
    pub provider: ProviderArgs,
    #[command(flatten)]
    pub approval: super::ApprovalArgs,
    /// Script for the scripted provider (format in README.md).
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Work in this folder: file tools, `bash`'s writes, `source: "local"`
    /// data (default: `[agent] workspace`, else each session's own folder).
    #[arg(short = 'C', long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

/// What the chat says when a prompt is sent with no model.
fn no_model_text(reason: Option<&str>) -> String {
    let head = match reason {
        Some(r) => format!("The configured model cannot be used: {r}"),
        None => format!("vibedesk: {NO_MODEL_HELP}"),
    };
    format!(
        "{head}\nIn the workstation: quit (Ctrl-C twice) and start `vibedesk --demo` to chat with the bundled demo model, or `vibedesk --provider NAME --model M`."
    )
}

pub async fn workstation(args: WorkstationArgs) -> Result<(), CliError> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(CliError::usage(
            "the workstation needs a terminal; for scripts use `vibedesk run -p \"...\"` (see --help)",
        ));
    }
    let overrides = Overrides {
        script: args.script.clone(),
        approval: args.approval.mode(),
        ..args.provider.overrides()
    };
    let mut config = load_config(&overrides)?;
    if args.demo {
        // A short session reaches every compaction gate (docs §3).
        super::demo_config(&mut config);
        super::demo_approval(&mut config, &args.approval);
    }
    // Asked on the terminal before the screen opens.
    let how = if args.approval.yes {
        super::workspace::Confirm::Given
    } else {
        super::workspace::Confirm::Ask
    };
    let workspace = super::workspace::for_command(args.workspace.as_deref(), &config, how)?;
    let _log_guard = init_logging(&config);

    let (keymap, theme) = keys_and_theme(&config, args.theme.clone())?;

    let mut notices = Vec::new();
    if let Some(notice) = reconcile_stale_runs(&config.paths) {
        notices.push((NoticeKind::Warning, notice));
    }
    if let Some(notice) = super::swarm::reconciled_note(&config) {
        notices.push((NoticeKind::Warning, notice));
    }

    let (provider, failure): (Option<Arc<dyn Provider>>, Option<String>) = if args.demo {
        let demo = DemoProvider::new()
            .map_err(|e| CliError::failed(format!("the bundled demo script is broken: {e}")))?;
        (Some(Arc::new(demo)), None)
    } else {
        match provider_or_offline(&config) {
            Ok((p, offline_note)) => {
                if let Some(note) = offline_note {
                    notices.push((NoticeKind::Info, note));
                }
                (Some(p), None)
            }
            Err(e) => (None, Some(e.to_string())),
        }
    };
    let model_label = model_label(provider.as_deref(), args.demo);
    if let Some(f) = &failure {
        notices.push((
            NoticeKind::Warning,
            format!("the configured model cannot be used: {f}"),
        ));
    }
    // The provider `/model` last chose: the chat's loop gets it through the
    // runtime, and teams started from the workstation read it here.
    let current = provider.clone().map(|p| Arc::new(RwLock::new(p)));
    let switch_model = model_switch(&config, args.demo, current.clone());

    let heartbeat = config.agent.scheduler.heartbeat_interval;
    let options = AppOptions {
        model_label,
        has_model: provider.is_some(),
        demo: args.demo,
        heartbeat,
        threshold: config.agent.token_threshold,
        gates: config.agent.gates(),
        offset: chrono::Local::now().offset().fix(),
        no_model_help: no_model_text(failure.as_deref()),
        max_message_bytes: config.agent.max_message_bytes,
        sessions_dir: config.paths.sessions_dir(),
        workspace_label: workspace
            .as_deref()
            .map(super::workspace::shown)
            .unwrap_or_default(),
        workspace,
        approval: config.agent.approval,
    };
    // A bad MCP entry stops the workstation before its screen opens.
    let mcp_servers = AgentSetup::mcp_servers(&config).map_err(CliError::usage)?;
    // The same tools, memory and skills as `vibedesk run`.
    let setup = AgentSetup::new(&config)?;
    notices.extend(setup.notes.iter().map(|n| (NoticeKind::Warning, n.clone())));
    // MCP servers start in the background: the screen opens at once and
    // their statuses, later exits included, reach the chat through
    // `mcp_events`; their tools join each turn that starts after they are
    // ready, and a turn that can use them waits for those still starting
    // (docs §13.2).
    let (mcp_tx, mcp_rx) = tokio::sync::mpsc::unbounded_channel();
    let mcp = setup.start_mcp(&mcp_servers, &config, &crate::agent::EventSink::new(mcp_tx));
    if let Some(done) = setup.maintain().await {
        notices.push((NoticeKind::Info, format!("memory maintenance: {done}")));
    }
    let maintenance = hourly_maintenance(&setup);
    let mut deps = provider.map(|p| setup.deps(p, &config));
    // The session's policy asks through the overlay (docs §2.14.4).
    let approvals = deps.as_mut().map(|d| {
        let (asker, requests) = tokio::sync::mpsc::unbounded_channel();
        let policy = crate::tools::ApprovalPolicy::asking(config.agent.approval, asker);
        d.authorizer = Some(policy.clone());
        crate::tui::runtime::Approvals { policy, requests }
    });
    // `/swarm` runs teams with the same tools, memory and provider.
    let teams = deps.clone().map(|mut deps| {
        // Members have no one to ask: `[swarm] approval` (docs §2.14.2).
        deps.authorizer = Some(crate::tools::ApprovalPolicy::headless(
            config.swarm.approval_mode(),
        ));
        Arc::new(super::swarm::WorkstationTeams {
            config: config.clone(),
            deps,
            provider: current.clone(),
            workspace: options.workspace.clone(),
        }) as Arc<dyn crate::tui::SwarmLauncher>
    });
    let ws = Workstation {
        paths: config.paths.clone(),
        deps,
        options,
        theme,
        keymap,
        resume: args.session.clone(),
        switch_model,
        notices,
        mcp_events: Some(mcp_rx),
        swarm: teams,
        approvals,
    };
    let result = crate::tui::run(ws).await;
    maintenance.abort();
    mcp.shutdown().await;
    result.map_err(CliError::failed)
}

/// The key bindings and the theme from `config.toml` (`--theme` first); a
/// bad one is a usage error.
fn keys_and_theme(config: &Config, theme: Option<String>) -> Result<(Keymap, Theme), CliError> {
    let settings = config.tui.as_ref().map_err(CliError::usage)?;
    let keymap = settings.keymap().map_err(CliError::usage)?;
    let theme_name = theme
        .or_else(|| settings.theme.clone())
        .unwrap_or_else(|| "default".to_string());
    let theme = Theme::load(&theme_name, Some(&config.paths.config_dir.join("themes")))
        .map_err(CliError::usage)?;
    Ok((keymap, theme))
}

/// How the status bar names the model.
fn model_label(provider: Option<&dyn Provider>, demo: bool) -> String {
    match provider {
        Some(p) if demo => format!("{} (demo)", p.model()),
        Some(p) if p.name() == crate::llm::offline::OFFLINE => {
            "offline planner (no model)".to_string()
        }
        Some(p) => format!("{} · {}", p.name(), p.model()),
        None => "no model".to_string(),
    }
}

/// `/model NAME`: the configured provider with another model (not for the
/// demo or a scripted provider, whose model is fixed).
fn model_switch(
    config: &Config,
    demo: bool,
    current: Option<Arc<RwLock<Arc<dyn Provider>>>>,
) -> Option<ModelSwitch> {
    match (&config.provider, demo) {
        (Some(pc), false) if !pc.is_scripted() => {
            let pc = pc.clone();
            Some(Arc::new(move |name: &str| {
                let mut next = pc.clone();
                next.model = Some(name.to_string());
                let p = build_provider(&next)?;
                if let Some(slot) = &current
                    && let Ok(mut held) = slot.write()
                {
                    *held = p.clone();
                }
                let label = format!("{} · {}", p.name(), p.model());
                Ok((p, label))
            }))
        }
        _ => None,
    }
}

/// Memory GC and compression, checked every hour while the workstation is
/// open (`run_due` does nothing until a day has passed since the last run).
fn hourly_maintenance(setup: &AgentSetup) -> tokio::task::JoinHandle<()> {
    let store = setup.memory.clone();
    let flags = setup.memory_flags.clone();
    tokio::spawn(async move {
        let Some(store) = store else { return };
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(3600));
        tick.tick().await;
        loop {
            tick.tick().await;
            let (s, f) = (store.clone(), flags.clone());
            let report = tokio::task::spawn_blocking(move || {
                crate::memory::maintenance::run_due(&s, chrono::Utc::now(), &f).summary()
            })
            .await;
            if let Ok(Some(line)) = report {
                tracing::info!("memory maintenance: {line}");
            }
        }
    })
}
