//! `vibedesk swarm batch NAME --targets FILE [--engine local|ray]` (docs
//! §14.8): one team per target, each a cell of a hashed batch plan, cut
//! into shards that the local engine runs in this process and the Ray
//! engine runs as Ray tasks (`vibedesk swarm batch-shard`, hidden). Model
//! calls at once are capped (`--max-calls`); with no model configured the
//! offline planner answers, so a batch runs without an API key.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::ray::{RaySetup, absolute_dir, current_binary};
use super::{AgentSetup, CliError, ProviderArgs, exit, init_logging, load_config};
use crate::agent::EventSink;
use crate::config::{Config, Overrides};
use crate::llm::{LlmError, Provider};
use crate::swarm::batch::{self, BatchPlan, CappedProvider, CellResult, CellRunner};
use crate::swarm::preset;
use crate::swarm::scheduler::DEFAULT_MAX_WORKERS;

/// Where a batch runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Local,
    Ray,
}

#[derive(clap::Args, Debug)]
pub struct SwarmBatchArgs {
    /// The preset's name (`vibedesk swarm list`), or a YAML file.
    pub preset: String,
    /// A file of targets, one per line (`#` starts a comment).
    #[arg(long, value_name = "FILE")]
    pub targets: PathBuf,
    /// The preset variable each target sets.
    #[arg(long, default_value = "target", value_name = "NAME")]
    pub target_var: String,
    /// A variable every team gets, `name=value` (repeatable).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// Model calls at once, all teams together (default `[swarm]
    /// max_workers`, else 4); also the teams run at once.
    #[arg(long, value_name = "N")]
    pub max_calls: Option<usize>,
    #[arg(long, value_enum, default_value = "local")]
    pub engine: Engine,
    /// The Ray dashboard (`http://HEAD:8265`; default `[engines.ray] address`).
    #[arg(long, value_name = "URL")]
    pub address: Option<String>,
    /// Where shards write their files (with Ray: a directory every node
    /// and this machine see at the same path). Default `OUT.shards`.
    #[arg(long, value_name = "DIR")]
    pub shard_dir: Option<PathBuf>,
    /// Ray's retries of a failed shard (default 3).
    #[arg(long, value_name = "N")]
    pub max_retries: Option<u32>,
    /// The results, one JSON line per target (default
    /// `swarm-batch-<plan hash>.jsonl`).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print events as JSON lines.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub provider: ProviderArgs,
    /// Script for the scripted provider (format in README.md).
    #[arg(long)]
    pub script: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct BatchShardArgs {
    /// The batch plan (JSON, as `swarm batch` writes it).
    #[arg(long, value_name = "FILE")]
    pub plan: PathBuf,
    /// `i/N`: run the cells with `index % N == i`.
    #[arg(long, value_name = "I/N")]
    pub shard: String,
    /// The shard directory.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// `i/N` with `i < N`.
pub(super) fn parse_shard(spec: &str) -> Result<(usize, usize), CliError> {
    let bad = || CliError::usage(format!("--shard takes i/N with i < N, not '{spec}'"));
    let (i, n) = spec.split_once('/').ok_or_else(bad)?;
    let (i, n) = (
        i.trim().parse::<usize>().map_err(|_| bad())?,
        n.trim().parse::<usize>().map_err(|_| bad())?,
    );
    if i < n { Ok((i, n)) } else { Err(bad()) }
}

pub async fn batch(args: SwarmBatchArgs) -> Result<(), CliError> {
    let overrides = Overrides {
        script: args.script.clone(),
        ..args.provider.overrides()
    };
    let config = load_config(&overrides)?;
    let _log_guard = init_logging(&config);
    let plan = plan_of(&args, &config)?;
    let hash = plan.hash();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("swarm-batch-{}.jsonl", &hash[..16])));
    let default_dir = PathBuf::from(format!("{}.shards", out.display()));
    let count = plan.shard_count();
    let dir = match args.engine {
        Engine::Local => {
            let dir = absolute_dir(args.shard_dir.as_deref().unwrap_or(&default_dir))?;
            run_local(&plan, &config, &dir, args.json).await?;
            dir
        }
        Engine::Ray => {
            let setup = RaySetup::new(&config, args.address.as_deref())?;
            let dir = setup.shard_dir(args.shard_dir.as_deref(), &default_dir)?;
            run_ray(&plan, &setup, &dir, args.max_retries, args.json).await?;
            dir
        }
    };
    let rows = batch::collect(&plan, &dir, count).map_err(CliError::failed)?;
    write_results(&rows, &out)?;
    report(&rows, &out, args.json);
    if rows.iter().all(|r| r.status == "success") {
        Ok(())
    } else if args.json {
        Err(CliError::quiet(exit::PARTIAL))
    } else {
        Err(CliError::new(
            exit::PARTIAL,
            "some teams did not succeed (see the table)",
        ))
    }
}

fn plan_of(args: &SwarmBatchArgs, config: &Config) -> Result<BatchPlan, CliError> {
    let targets = batch::read_targets(&args.targets).map_err(CliError::usage)?;
    let loaded = preset::load_name_or_file(&config.paths.config_dir, &args.preset)
        .map_err(CliError::usage)?;
    let vars: BTreeMap<String, String> = args
        .vars
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
            _ => Err(CliError::usage(format!(
                "--var takes NAME=VALUE, not '{kv}'"
            ))),
        })
        .collect::<Result<_, _>>()?;
    let max_calls = args
        .max_calls
        .or(config.swarm.max_workers)
        .unwrap_or(DEFAULT_MAX_WORKERS);
    if max_calls == 0 {
        return Err(CliError::usage("--max-calls must be at least 1"));
    }
    let workers = config.swarm.max_workers.unwrap_or(DEFAULT_MAX_WORKERS);
    BatchPlan::new(&loaded, &args.target_var, vars, targets, max_calls, workers)
        .map_err(CliError::usage)
}

/// The teams of this process: one model-call cap shared by all, agents
/// with a model of their own included.
fn cell_runner(plan: &BatchPlan, config: &Config, permits: usize) -> Result<CellRunner, CliError> {
    let loaded_preset = plan.preset().map_err(CliError::usage)?;
    let (provider, _) = super::provider_or_offline(config).map_err(CliError::usage)?;
    let permits = Arc::new(Semaphore::new(permits.max(1)));
    let capped: Arc<dyn Provider> =
        Arc::new(CappedProvider::new(provider.clone(), permits.clone()));
    // An agent's own model through the configured provider, as `swarm
    // run` does; with none configured, the offline planner for every agent.
    let base = config.provider.clone();
    let factory: crate::swarm::scheduler::ProviderFactory = Arc::new(move |model: &str| {
        let p = match &base {
            Some(p) => {
                let mut p = p.clone();
                p.model = Some(model.to_string());
                super::build_provider(&p).map_err(|e| LlmError::Config(e.to_string()))?
            }
            None => provider.clone(),
        };
        Ok(Arc::new(CappedProvider::new(p, permits.clone())) as Arc<dyn Provider>)
    });
    let setup = AgentSetup::new(config)?;
    let deps = setup.team_deps(capped, config);
    let config = config.clone();
    let max_workers = plan.max_workers;
    Ok(Arc::new(move |index, target, vars| {
        let (preset, deps, config, factory) = (
            loaded_preset.clone(),
            deps.clone(),
            config.clone(),
            factory.clone(),
        );
        Box::pin(async move {
            let options = crate::swarm::SwarmOptions {
                vars,
                max_workers,
                provider_for_model: Some(factory),
                ..crate::swarm::SwarmOptions::default()
            };
            let outcome = crate::swarm::run(
                &preset,
                options,
                deps,
                &config.paths,
                EventSink::none(),
                CancellationToken::new(),
            )
            .await;
            cell_result(index, target, outcome)
        })
    }))
}

fn cell_result(
    index: usize,
    target: String,
    outcome: Result<crate::swarm::SwarmOutcome, crate::swarm::SwarmError>,
) -> CellResult {
    match outcome {
        Ok(o) => CellResult {
            index,
            target,
            status: o.status.as_str().to_string(),
            reason: o.reason,
            run_id: Some(o.run_id),
            seconds: (o.seconds * 10.0).round() / 10.0,
            report: std::fs::read_to_string(&o.report).unwrap_or_default(),
        },
        Err(e) => CellResult {
            index,
            target,
            status: "refused".to_string(),
            reason: Some(e.to_string()),
            run_id: None,
            seconds: 0.0,
            report: String::new(),
        },
    }
}

/// Every unfinished shard in this process at once; the cap bounds the calls.
async fn run_local(
    plan: &BatchPlan,
    config: &Config,
    dir: &Path,
    json: bool,
) -> Result<(), CliError> {
    let count = plan.shard_count();
    let runner = cell_runner(plan, config, plan.max_calls)?;
    let pending: Vec<usize> = (0..count)
        .filter(|&s| !batch::shard_done(plan, dir, s, count))
        .collect();
    if !json {
        eprintln!(
            "swarm batch: {} team(s) of {} in {count} shard(s), {} to run, at most {} model call(s) at once",
            plan.targets.len(),
            plan.preset_name,
            pending.len(),
            plan.max_calls
        );
    }
    let runs = pending
        .iter()
        .map(|&s| batch::run_shard(plan, s, count, dir, runner.clone()));
    for result in futures_util::future::join_all(runs).await {
        result.map_err(CliError::failed)?;
    }
    Ok(())
}

async fn run_ray(
    plan: &BatchPlan,
    setup: &RaySetup,
    dir: &Path,
    max_retries: Option<u32>,
    json: bool,
) -> Result<(), CliError> {
    let count = plan.shard_count();
    let pending: Vec<usize> = (0..count)
        .filter(|&s| !batch::shard_done(plan, dir, s, count))
        .collect();
    if pending.is_empty() {
        return Ok(());
    }
    let argv = [
        "swarm",
        "batch-shard",
        "--plan",
        "plan.json",
        "--shard",
        "{shard}",
        "--out",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([dir.display().to_string()])
    .collect();
    let mut job =
        crate::sweep::ray::ShardJob::new("batch", &plan.hash(), current_binary()?, argv, count);
    job.files = vec![("plan.json".to_string(), plan.to_bytes())];
    job.shards = pending;
    job.max_retries = setup.max_retries(max_retries);
    // Shards at once times each shard's own cap stays within --max-calls.
    job.max_in_flight = Some(count);
    job.python = setup.python();
    let outcome = super::ray::follow(setup, &job, json).await?;
    super::ray::check(&outcome, dir)
}

/// `vibedesk swarm batch-shard`: one shard, as a Ray task runs it. Each
/// process gets its share of the cap: `max_calls / N`, at least 1.
pub async fn batch_shard(args: BatchShardArgs) -> Result<(), CliError> {
    let (shard, count) = parse_shard(&args.shard)?;
    let plan = BatchPlan::load(&args.plan).map_err(CliError::usage)?;
    let config = load_config(&Overrides::default())?;
    let permits = (plan.max_calls / count).max(1);
    let runner = cell_runner(&plan, &config, permits)?;
    batch::run_shard(&plan, shard, count, &args.out, runner)
        .await
        .map(|_| ())
        .map_err(CliError::failed)
}

fn write_results(rows: &[CellResult], out: &Path) -> Result<(), CliError> {
    let mut bytes = Vec::new();
    for r in rows {
        bytes.extend(serde_json::to_vec(r).unwrap_or_default());
        bytes.push(b'\n');
    }
    crate::fsio::write_atomic(out, &bytes, crate::fsio::Durability::Synced)
        .map_err(CliError::failed)
}

fn report(rows: &[CellResult], out: &Path, json: bool) {
    let mut stdout = std::io::stdout().lock();
    if json {
        let value = serde_json::json!({
            "event": "batch_finished",
            "out": out.display().to_string(),
            "teams": rows.len(),
            "succeeded": rows.iter().filter(|r| r.status == "success").count(),
        });
        let _ = writeln!(stdout, "{value}");
        return;
    }
    let _ = writeln!(
        stdout,
        "{:<16} {:<10} {:>8}  RUN",
        "TARGET", "STATUS", "SECONDS"
    );
    for r in rows {
        let _ = writeln!(
            stdout,
            "{:<16} {:<10} {:>8.1}  {}{}",
            r.target,
            r.status,
            r.seconds,
            r.run_id.as_deref().unwrap_or("-"),
            r.reason
                .as_ref()
                .map(|w| format!(" — {}", crate::text::one_line(w, 120)))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(stdout, "results {}", out.display());
}
