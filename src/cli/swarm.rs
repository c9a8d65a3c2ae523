//! `vibedesk swarm list | inspect NAME|FILE | run NAME | show RUN_ID |
//! batch NAME --targets FILE` (the batch in `swarm_batch`):
//! research teams from the command line (docs §14). `run` has `run`'s
//! provider flags, `--json` event stream and exit codes; with no model
//! configured the offline planner answers every member.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::run::write_json_event;
use super::{
    AgentSetup, CliError, ProviderArgs, build_provider, exit, init_logging, load_config,
    provider_or_offline,
};
use crate::agent::events::TaskState;
use crate::agent::events::{AgentEvent, RunStatus};
use crate::agent::{EventSink, LoopDeps};
use crate::config::{Config, Overrides};
use crate::llm::{LlmError, Provider};
use crate::store::run_state::Status;
use crate::swarm::scheduler::{DEFAULT_DEADLINE, DEFAULT_MAX_WORKERS, ProviderFactory};
use crate::swarm::workers::{self, WorkersError};
use crate::swarm::{Catalog, SwarmOptions, preset};
use crate::tui::{SwarmLaunchError, SwarmLauncher};

#[derive(clap::Args, Debug)]
pub struct SwarmArgs {
    #[command(subcommand)]
    pub command: SwarmCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum SwarmCommand {
    /// The presets (name, title, agents, tasks), then the team runs on disk.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Validate a preset (by name, or a YAML file) and print its layers.
    Inspect {
        /// A preset name or a path to a YAML file.
        preset: String,
        #[arg(long)]
        json: bool,
    },
    /// Run a team; stream its progress (or every event as JSON lines).
    Run(SwarmRunArgs),
    /// A team run's record: status, each task's state, attempts and run dirs.
    Show {
        run_id: String,
        #[arg(long)]
        json: bool,
    },
    /// One team per target of a file, locally or on a Ray cluster (docs §14.8).
    Batch(super::swarm_batch::SwarmBatchArgs),
    /// One shard of a batch (what a Ray task runs).
    #[command(hide = true)]
    BatchShard(super::swarm_batch::BatchShardArgs),
}

#[derive(clap::Args, Debug)]
pub struct SwarmRunArgs {
    /// The preset's name (`vibedesk swarm list`), or a YAML file.
    pub preset: String,
    /// A template variable, `name=value` (repeatable).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// Print every event as one JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Tasks run at once (default `[swarm] max_workers`, else 4).
    #[arg(long)]
    pub max_workers: Option<usize>,
    #[command(flatten)]
    pub provider: ProviderArgs,
    /// Script for the scripted provider (format in README.md).
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Every member works in this folder: file tools, `bash`'s writes,
    /// `source: "local"` data (default: `[agent] workspace`, else the team
    /// run's shared `workspace/`).
    #[arg(short = 'C', long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Answer yes to the confirmation a workspace as broad as $HOME or / needs.
    #[arg(long)]
    pub yes: bool,
}

pub async fn swarm(args: SwarmArgs) -> Result<(), CliError> {
    match args.command {
        SwarmCommand::List { json } => list(json),
        SwarmCommand::Inspect { preset, json } => inspect(&preset, json),
        SwarmCommand::Run(args) => run(args).await,
        SwarmCommand::Show { run_id, json } => show(&run_id, json),
        SwarmCommand::Batch(args) => super::swarm_batch::batch(args).await,
        SwarmCommand::BatchShard(args) => super::swarm_batch::batch_shard(args).await,
    }
}

/// Loads the configuration and finishes what a crash left running: sandbox
/// jobs and single runs (as every command that shows runs does), then team
/// runs.
fn config_reconciled(overrides: &Overrides, quiet: bool) -> Result<Config, CliError> {
    let config = load_config(overrides)?;
    let notes = [
        crate::session::reconcile_stale_runs(&config.paths),
        reconciled_note(&config),
    ];
    for note in notes.into_iter().flatten() {
        if !quiet {
            eprintln!("vibedesk: {note}");
        }
    }
    Ok(config)
}

pub(super) fn reconciled_note(config: &Config) -> Option<String> {
    let runs = crate::swarm::reconcile_interrupted(&config.paths);
    let first = runs.first()?;
    Some(format!(
        "{} team run(s) left running by an earlier crash were marked interrupted (first: {})",
        runs.len(),
        first.id
    ))
}

fn list(json: bool) -> Result<(), CliError> {
    let config = config_reconciled(&Overrides::default(), json)?;
    let (presets, errors) = preset::list(&config.paths.config_dir);
    let runs = crate::swarm::list_runs(&config.paths);
    for e in &errors {
        eprintln!("vibedesk: skipped a preset: {e}");
    }
    if json {
        let value = serde_json::json!({
            "presets": presets.iter().map(|p| serde_json::json!({
                "name": p.preset.name,
                "title": p.preset.title,
                "agents": p.preset.agents.len(),
                "tasks": p.preset.tasks.len(),
                "origin": p.origin.to_string(),
            })).collect::<Vec<_>>(),
            "runs": runs,
        });
        println!("{value}");
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{:<28} {:>6} {:>5}  TITLE",
        "PRESET", "AGENTS", "TASKS"
    );
    for p in &presets {
        let user = if p.origin == preset::Origin::Bundled {
            ""
        } else {
            " (user)"
        };
        let _ = writeln!(
            out,
            "{:<28} {:>6} {:>5}  {}{user}",
            p.preset.name,
            p.preset.agents.len(),
            p.preset.tasks.len(),
            p.preset.title
        );
    }
    if presets.is_empty() {
        let _ = writeln!(out, "(no presets)");
    }
    if !runs.is_empty() {
        let _ = writeln!(
            out,
            "\n{:<34} {:<12} {:>7} {:>8}  PRESET",
            "RUN", "STATUS", "TASKS", "SECONDS"
        );
        for r in &runs {
            let _ = writeln!(
                out,
                "{:<34} {:<12} {:>3}/{:<3} {:>8.1}  {}",
                r.id,
                r.status.as_str(),
                r.tasks_succeeded,
                r.tasks,
                r.seconds,
                r.preset
            );
        }
    }
    Ok(())
}

/// The tools and skills a worker can have: those of the registry and skill
/// set every run is built with.
fn catalog(config: &Config) -> Result<Catalog, CliError> {
    let setup = AgentSetup::new(config)?;
    Ok(Catalog {
        tools: setup
            .registry
            .names()
            .into_iter()
            .map(String::from)
            .collect(),
        skills: setup.skills.iter().map(|s| s.name.clone()).collect(),
    })
}

fn inspect(arg: &str, json: bool) -> Result<(), CliError> {
    let config = load_config(&Overrides::default())?;
    let loaded =
        preset::load_name_or_file(&config.paths.config_dir, arg).map_err(CliError::usage)?;
    let report = crate::swarm::inspect(&loaded.preset, &catalog(&config)?);
    if json {
        println!(
            "{}",
            serde_json::json!({
                "name": loaded.preset.name,
                "origin": loaded.origin.to_string(),
                "ok": report.is_ok(),
                "issues": report.issues,
                "layers": report.layers,
            })
        );
    } else {
        print_inspection(&loaded, &report);
    }
    // The issues are on stdout already.
    if report.is_ok() {
        Ok(())
    } else {
        Err(CliError::quiet(exit::FAILED))
    }
}

fn print_inspection(loaded: &preset::LoadedPreset, report: &crate::swarm::Inspection) {
    let p = &loaded.preset;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{} — {} ({})", p.name, p.title, loaded.origin);
    for a in &p.agents {
        let _ = writeln!(
            out,
            "  agent {} ({}): tools [{}], {} iterations, {} s x {} attempt(s){}",
            a.id,
            a.role,
            a.tools
                .iter()
                .map(|t| t.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            a.max_iterations,
            a.timeout_seconds,
            a.max_retries + 1,
            a.model
                .as_ref()
                .map(|m| format!(", model {m}"))
                .unwrap_or_default()
        );
    }
    for v in &p.variables {
        let _ = writeln!(
            out,
            "  variable {}{}{}",
            v.name,
            if v.required { " (required)" } else { "" },
            v.default
                .as_ref()
                .map(|d| format!(" = {d}"))
                .unwrap_or_default()
        );
    }
    for issue in &report.issues {
        let _ = writeln!(out, "{issue}");
    }
    for (i, layer) in report.layers.iter().enumerate() {
        let _ = writeln!(out, "layer {}: {}", i + 1, layer.join(", "));
    }
    let errors = report.errors().count();
    let warnings = report.warnings().count();
    let _ = writeln!(
        out,
        "{}: {errors} error(s), {warnings} warning(s)",
        if errors == 0 { "valid" } else { "invalid" }
    );
}

/// A `--var` that is not `NAME=VALUE`.
#[derive(Debug, thiserror::Error)]
#[error("--var takes NAME=VALUE, not '{0}'")]
struct BadVar(String);

/// Variables by name.
type Vars = BTreeMap<String, String>;

/// `name=value` pairs; the first `=` splits.
fn parse_vars(raw: &[String]) -> Result<Vars, BadVar> {
    raw.iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
            _ => Err(BadVar(kv.clone())),
        })
        .collect()
}

/// The options of a team run: `--max-workers`, else `[swarm]`, else the
/// defaults (docs §14.3). A worker count of 0, or more than the open-file
/// limit serves, is refused (the original took 0 as 1 and had no bound).
fn swarm_options(
    config: &Config,
    vars: BTreeMap<String, String>,
    max_workers: Option<usize>,
    provider: Arc<dyn Provider>,
    workspace: Option<PathBuf>,
) -> Result<SwarmOptions, WorkersError> {
    let max_workers = workers::check(
        max_workers
            .or(config.swarm.max_workers)
            .unwrap_or(DEFAULT_MAX_WORKERS),
        workers::open_file_limit(),
    )?;
    Ok(SwarmOptions {
        vars,
        max_workers,
        deadline: config
            .swarm
            .deadline_seconds
            .map_or(DEFAULT_DEADLINE, Duration::from_secs),
        provider_for_model: Some(provider_factory(config, provider)),
        workspace,
    })
}

/// `/swarm NAME k=v …` in the workstation: the same engine call as `swarm
/// run`, with the workstation's tools, memory and provider as every
/// worker's template.
pub(super) struct WorkstationTeams {
    pub config: Config,
    pub deps: LoopDeps,
    /// The chat's provider as `/model` last set it: a team started after a
    /// switch runs on the model the user switched to.
    pub provider: Option<Arc<std::sync::RwLock<Arc<dyn crate::llm::Provider>>>>,
    /// The workstation's chosen folder (`--workspace`); `None`: each team
    /// run's own.
    pub workspace: Option<PathBuf>,
}

impl SwarmLauncher for WorkstationTeams {
    fn launch(
        &self,
        preset: String,
        vars: Vec<(String, String)>,
        events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<(), SwarmLaunchError>> {
        let config = self.config.clone();
        let workspace = self.workspace.clone();
        let mut deps = self.deps.clone();
        if let Some(current) = self.provider.as_ref().and_then(|p| p.read().ok()) {
            deps.provider = current.clone();
        }
        Box::pin(async move {
            let engine = |e: Box<dyn std::error::Error + Send + Sync>| SwarmLaunchError::Engine(e);
            let loaded =
                preset::load_name_or_file(&config.paths.config_dir, &preset).map_err(|e| {
                    match in_app_preset_error(&config, &e) {
                        Some(text) => SwarmLaunchError::Refused(text),
                        None => engine(Box::new(e)),
                    }
                })?;
            let options = swarm_options(
                &config,
                vars.into_iter().collect(),
                None,
                deps.provider.clone(),
                workspace,
            )
            .map_err(|e| engine(Box::new(e)))?;
            crate::swarm::run(&loaded.preset, options, deps, &config.paths, events, cancel)
                .await
                .map(|_| ())
                .map_err(|e| match &e {
                    crate::swarm::scheduler::SwarmError::Variables(v) => {
                        SwarmLaunchError::Refused(in_app_variables(&preset, v))
                    }
                    _ => engine(Box::new(e)),
                })
        })
    }
}

/// A missing variable in the app's syntax: `/swarm NAME k=v`, not the
/// command line's `--var k=v`.
fn in_app_variables(preset: &str, e: &crate::swarm::validate::VariableError) -> String {
    let crate::swarm::validate::VariableError::Missing(missing) = e;
    let names: Vec<String> = missing
        .iter()
        .map(|(n, d)| {
            if d.is_empty() {
                n.clone()
            } else {
                format!("{n} ({d})")
            }
        })
        .collect();
    let example: Vec<String> = missing.iter().map(|(n, _)| format!("{n}=VALUE")).collect();
    format!(
        "missing required variable{}: {}; type /swarm {preset} {}",
        if missing.len() > 1 { "s" } else { "" },
        names.join(", "),
        example.join(" ")
    )
}

/// An unknown team in the app's words: the teams there are, rather than
/// the shell's `vibedesk swarm list`.
fn in_app_preset_error(config: &Config, e: &preset::PresetError) -> Option<String> {
    let preset::PresetError::NotFound { name, dir } = e else {
        return None;
    };
    let (known, _) = preset::list(&config.paths.config_dir);
    let names: Vec<&str> = known.iter().map(|p| p.preset.name.as_str()).collect();
    Some(format!(
        "no team named '{name}' (bundled, or {}/{name}.yaml); the teams: {}; type /swarm NAME k=v",
        dir.display(),
        names.join(", ")
    ))
}

/// An agent's own `model` through the configured provider; with no model
/// configured, every agent gets the offline planner.
fn provider_factory(config: &Config, fallback: Arc<dyn Provider>) -> ProviderFactory {
    let base = config.provider.clone();
    Arc::new(move |model: &str| match &base {
        Some(p) => {
            let mut p = p.clone();
            p.model = Some(model.to_string());
            build_provider(&p).map_err(|e| LlmError::Config(e.to_string()))
        }
        None => Ok(fallback.clone()),
    })
}

async fn run(args: SwarmRunArgs) -> Result<(), CliError> {
    let overrides = Overrides {
        script: args.script.clone(),
        ..args.provider.overrides()
    };
    let config = config_reconciled(&overrides, args.json)?;
    let _log_guard = init_logging(&config);
    let vars = parse_vars(&args.vars).map_err(CliError::usage)?;
    let workspace = super::workspace::for_command(
        args.workspace.as_deref(),
        &config,
        super::workspace::Confirm::from_flag(args.yes),
    )?;
    // Checked before anything starts: a refusal costs nothing.
    let max_workers = workers::check(
        args.max_workers
            .or(config.swarm.max_workers)
            .unwrap_or(DEFAULT_MAX_WORKERS),
        workers::open_file_limit(),
    )
    .map_err(CliError::usage)?;
    let loaded = preset::load_name_or_file(&config.paths.config_dir, &args.preset)
        .map_err(CliError::usage)?;
    let (provider, note) = provider_or_offline(&config).map_err(CliError::usage)?;
    if let Some(note) = note
        && !args.json
    {
        eprintln!("vibedesk: {note}");
    }
    let setup = AgentSetup::new(&config)?;
    if !args.json {
        for note in &setup.notes {
            eprintln!("vibedesk: {note}");
        }
    }
    let deps = setup.team_deps(provider.clone(), &config);
    let options = swarm_options(&config, vars, Some(max_workers), provider, workspace)
        .map_err(CliError::usage)?;
    let (tx, rx) = mpsc::unbounded_channel();
    let printer = tokio::spawn(print_events(rx, args.json));
    let cancel = CancellationToken::new();
    spawn_ctrl_c(cancel.clone(), args.json);
    let result = crate::swarm::run(
        &loaded.preset,
        options,
        deps,
        &config.paths,
        EventSink::new(tx),
        cancel,
    )
    .await;
    let _ = printer.await;
    // The engine refuses before anything starts: a usage error.
    let outcome = result.map_err(CliError::usage)?;
    if !args.json {
        if let Ok(report) = std::fs::read_to_string(&outcome.report) {
            print!("{report}");
        }
        eprintln!(
            "[team run {} · {} · {:.1} s · report {}]",
            outcome.run_id,
            outcome.status.as_str(),
            outcome.seconds,
            outcome.report.display()
        );
    }
    let why = outcome.reason.unwrap_or_default();
    match outcome.status {
        RunStatus::Success => Ok(()),
        RunStatus::Cancelled => Err(CliError::quiet(exit::CANCELLED)),
        RunStatus::Partial if args.json => Err(CliError::quiet(exit::PARTIAL)),
        RunStatus::Partial => Err(CliError::new(
            exit::PARTIAL,
            format!("team run partial: {why}"),
        )),
        // A team is never `unsupported` (its members fail instead); the arm
        // keeps the match whole.
        RunStatus::Failed | RunStatus::Interrupted | RunStatus::Unsupported if args.json => {
            Err(CliError::quiet(exit::FAILED))
        }
        RunStatus::Failed | RunStatus::Interrupted | RunStatus::Unsupported => {
            Err(CliError::failed(format!("team run failed: {why}")))
        }
    }
}

/// Ctrl-C cancels every worker at its next checkpoint; a second one quits.
fn spawn_ctrl_c(cancel: CancellationToken, json: bool) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            if !json {
                eprintln!("\nvibedesk: cancelling the team… (Ctrl-C again to quit at once)");
            }
            cancel.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(i32::from(exit::CANCELLED));
            }
        }
    });
}

/// JSON lines (with a `ts`) or one progress line per task event on stderr.
async fn print_events(mut rx: mpsc::UnboundedReceiver<AgentEvent>, json: bool) {
    let mut out = std::io::stdout();
    while let Some(event) = rx.recv().await {
        if json {
            write_json_event(&mut out, &event);
            continue;
        }
        match &event {
            AgentEvent::SwarmStarted {
                run_id,
                title,
                layers,
                tasks,
                ..
            } => eprintln!(
                "team run {run_id}: {title} — {} task(s) in {} layer(s)",
                tasks.len(),
                layers.len()
            ),
            AgentEvent::SwarmTaskStarted {
                task,
                agent,
                attempt,
                ..
            } => {
                eprintln!("  ▶ {task} ({agent}) attempt {attempt}")
            }
            AgentEvent::SwarmTaskRetry {
                task,
                attempt,
                reason,
            } => {
                eprintln!(
                    "  ↻ {task} attempt {attempt} failed ({reason}); retrying with a fresh loop"
                )
            }
            AgentEvent::SwarmTaskFinished {
                task,
                status,
                reason,
                seconds,
                tokens,
            } => {
                let mark = task_mark(*status);
                let why = reason
                    .as_ref()
                    .map(|r| format!(" — {r}"))
                    .unwrap_or_default();
                eprintln!(
                    "  {mark} {task} {} {seconds:.1} s · {tokens} tokens{why}",
                    status.as_str()
                );
            }
            AgentEvent::SwarmWorker { task, event } => {
                if let AgentEvent::Tool(crate::agent::events::ToolEvent::ToolCallStarted {
                    tool,
                    ..
                }) = event.as_ref()
                {
                    eprintln!("    · {task}: {tool}");
                }
            }
            _ => {}
        }
    }
}

/// A task state's glyph, as the workstation's Teams view draws it.
fn task_mark(state: TaskState) -> &'static str {
    match state {
        TaskState::Pending => "○",
        TaskState::Running => "▶",
        TaskState::Retrying => "↻",
        TaskState::Success => "✓",
        TaskState::Partial => "◐",
        TaskState::TimedOut => "⏱",
        TaskState::Cancelled => "⊘",
        TaskState::Interrupted => "!",
        TaskState::Failed => "✗",
    }
}

/// A run status's glyph: ✓ success, ◐ partial, ✗ failed, ⊘ cancelled.
fn status_mark(status: Status) -> &'static str {
    match status {
        Status::Running => "▶",
        Status::Success => "✓",
        Status::Partial => "◐",
        Status::Cancelled => "⊘",
        Status::Interrupted => "!",
        Status::Failed => "✗",
        Status::Unsupported => "∅",
    }
}

fn show(id: &str, json: bool) -> Result<(), CliError> {
    let config = config_reconciled(&Overrides::default(), json)?;
    let (record, dir) = crate::swarm::load_run(&config.paths, id).map_err(CliError::usage)?;
    if json {
        println!("{}", serde_json::to_string(&record).unwrap_or_default());
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{} — {} ({})", record.id, record.title, record.preset);
    let _ = writeln!(
        out,
        "{} status {}{} · {:.1} s · started {}",
        status_mark(record.status),
        record.status.as_str(),
        record
            .reason
            .as_ref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default(),
        record.seconds,
        record.started_at
    );
    if !record.vars.is_empty() {
        let vars: Vec<String> = record
            .vars
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(out, "variables {}", vars.join(", "));
    }
    for t in &record.tasks {
        let _ = writeln!(
            out,
            "  {} {:<24} {:<12} attempts {} · {:.1} s · {} tokens{}",
            task_mark(t.state),
            t.id,
            t.state.as_str(),
            t.attempts,
            t.seconds,
            t.tokens,
            t.reason
                .as_ref()
                .map(|r| format!(" — {r}"))
                .unwrap_or_default()
        );
        for d in &t.run_dirs {
            let _ = writeln!(out, "      run dir {d}");
        }
    }
    let _ = writeln!(
        out,
        "report {}",
        dir.join(crate::swarm::record::REPORT_FILE).display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::RwLock;

    use super::*;
    use crate::agent::AgentEvent;
    use crate::llm::scripted::{Script, ScriptedProvider};

    fn scripted(json: &str) -> Arc<dyn Provider> {
        Arc::new(ScriptedProvider::new(Script::from_json(json).unwrap()))
    }

    /// `/model` in the workstation swaps the chat's provider; a team
    /// started after it runs on the new one too, not on the provider the
    /// workstation opened with.
    #[tokio::test]
    async fn a_team_started_after_model_runs_on_the_model_switched_to() {
        let dir = tempfile::tempdir().unwrap();
        let paths = crate::store::Paths::under(dir.path());
        let config = Config::load_with(
            paths,
            &BTreeMap::<String, String>::new(),
            &Default::default(),
        )
        .unwrap();
        // The provider the workstation opened with fails every call.
        let first = scripted(r#"{"model": "first", "turns": []}"#);
        let setup = crate::cli::AgentSetup::new(&config).unwrap();
        let deps = setup.deps(first.clone(), &config);
        let current = Arc::new(RwLock::new(first));
        let teams = WorkstationTeams {
            config: config.clone(),
            deps,
            provider: Some(current.clone()),
            workspace: None,
        };
        let yaml = dir.path().join("t.yaml");
        std::fs::write(
            &yaml,
            "name: t\nagents:\n  - {id: a, max_retries: 0}\ntasks:\n  - {id: t1, agent_id: a, prompt_template: 'Say hello.'}\n",
        )
        .unwrap();
        let status = |rx: &mut tokio::sync::mpsc::UnboundedReceiver<AgentEvent>| {
            let mut last = None;
            while let Ok(e) = rx.try_recv() {
                if let AgentEvent::SwarmFinished { status, .. } = e {
                    last = Some(status);
                }
            }
            last
        };
        let run = |teams: &WorkstationTeams| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let launched = teams.launch(
                yaml.display().to_string(),
                Vec::new(),
                EventSink::new(tx),
                CancellationToken::new(),
            );
            (launched, rx)
        };
        let (launched, mut rx) = run(&teams);
        launched.await.unwrap();
        assert_eq!(status(&mut rx), Some(RunStatus::Failed));

        // `/model` writes the slot (cli::workstation::model_switch).
        *current.write().unwrap() =
            scripted(r#"{"model": "second", "turns": [{"text": "Hello from the second model."}]}"#);
        let (launched, mut rx) = run(&teams);
        launched.await.unwrap();
        assert_eq!(status(&mut rx), Some(RunStatus::Success));
    }
}
