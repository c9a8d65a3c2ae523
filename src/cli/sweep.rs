//! `vibedesk sweep plan SPEC | run SPEC --out PATH | shard --plan P --shard
//! i/N --out DIR` (docs §18): parameter sweeps from the command line.
//!
//! `run` draws a progress bar on a terminal (stderr) and prints the report
//! on stdout; with `--json` it prints `sweep_started`, `sweep_progress`,
//! `sweep_finished` and `sweep_report` lines instead. Exit codes: 0 done, 1
//! failed, 2 a bad spec or flag, 130 stopped by Ctrl-C (finished cells kept).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{CliError, exit};
use crate::sweep::dispatch::{self, Engine};
use crate::sweep::events::{SweepEvent, bar};
use crate::sweep::local::LocalOptions;
use crate::sweep::{Plan, Spec, SweepError, report, shard};

#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    #[command(subcommand)]
    pub command: SweepCommand,
}

/// Where data comes from and how many workers run.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DataArgs {
    /// A folder searched for local data files, as a run dir's `data/` is
    /// (default: the spec's folder; for `shard`, the current one).
    #[arg(long = "data-dir")]
    pub data_dir: Option<PathBuf>,
    /// Never use the online data sources.
    #[arg(long)]
    pub offline: bool,
    /// Worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
}

#[derive(clap::Subcommand, Debug)]
pub enum SweepCommand {
    /// Check a spec; print its cell count and estimated time (and save the plan).
    Plan {
        spec: PathBuf,
        /// Write the plan's JSON here (what `sweep shard --plan` reads).
        #[arg(long)]
        save: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Run a sweep into a .parquet or .csv file; a re-run resumes.
    Run {
        spec: PathBuf,
        /// The results file: .parquet or .csv.
        #[arg(long)]
        out: PathBuf,
        /// Print events and the report as JSON lines.
        #[arg(long)]
        json: bool,
        /// `local` (every core here) or `ray` (a Ray cluster at --address).
        #[arg(long, default_value = "local")]
        engine: String,
        /// The Ray dashboard's address, e.g. http://HEAD:8265.
        #[arg(long)]
        address: Option<String>,
        #[command(flatten)]
        ray: super::ray::RayArgs,
        #[command(flatten)]
        data: DataArgs,
    },
    /// Run shard i of N of a saved plan into DIR/shard-<i>-of-<N>.csv.
    Shard {
        #[arg(long)]
        plan: PathBuf,
        /// i/N, e.g. 0/4.
        #[arg(long)]
        shard: String,
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        data: DataArgs,
    },
}

pub async fn sweep(args: SweepArgs) -> Result<(), CliError> {
    match args.command {
        SweepCommand::Plan { spec, save, json } => plan(&spec, save.as_deref(), json),
        SweepCommand::Run {
            spec,
            out,
            json,
            engine,
            address,
            ray,
            data,
        } => run(&spec, &out, json, &engine, address, &ray, &data).await,
        SweepCommand::Shard {
            plan,
            shard,
            out,
            json,
            data,
        } => run_shard(&plan, &shard, &out, json, &data).await,
    }
}

fn fail(e: SweepError) -> CliError {
    let code = match e {
        SweepError::Spec(_)
        | SweepError::Plan(_)
        | SweepError::Engine(_)
        | SweepError::OtherPlan(_) => exit::USAGE,
        SweepError::Output(ref m) if m.contains("--out") => exit::USAGE,
        SweepError::Cancelled { .. } => exit::CANCELLED,
        _ => exit::FAILED,
    };
    CliError::new(code, e).of("sweep")
}

/// The spec's plan, with the `[backtest]` defaults of config.toml filled
/// into its base (said on stderr), as the `backtest` tool fills them.
fn load_plan(spec: &Path) -> Result<Plan, CliError> {
    let mut spec = Spec::load(spec).map_err(|e| fail(e.into()))?;
    let config = super::load_config(&crate::config::Overrides::default())?;
    let filled = spec.fill_defaults(&config.backtest.config_keys());
    if !filled.is_empty() {
        eprintln!(
            "sweep: {} from [backtest] in {}",
            filled.join(", "),
            config.config_file.display()
        );
    }
    Plan::from_spec(&spec).map_err(fail)
}

fn plan(spec: &Path, save: Option<&Path>, json: bool) -> Result<(), CliError> {
    let plan = load_plan(spec)?;
    let threads = crate::sweep::local::default_threads();
    let secs = plan.estimate_seconds(threads);
    if let Some(p) = save {
        plan.save(p).map_err(fail)?;
    }
    if json {
        println!(
            "{}",
            json!({"cells": plan.cell_count(), "parameter_sets": plan.combos.len(), "units": plan.units.len(),
                   "windows": plan.windows.iter().map(|w| w.name.clone()).collect::<Vec<_>>(),
                   "rows": plan.row_count(), "estimated_seconds": (secs * 1000.0).round() / 1000.0,
                   "threads": threads, "hash": plan.hash()})
        );
    } else {
        println!(
            "{} cells ({} parameter sets × {} {}), {} windows ({}); estimated {} on {threads} cores; plan {}",
            plan.cell_count(),
            plan.combos.len(),
            plan.units.len(),
            if plan.units.len() == 1 {
                "unit"
            } else {
                "symbols"
            },
            plan.windows.len(),
            plan.windows
                .iter()
                .map(|w| w.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            human(secs),
            plan.short_hash()
        );
    }
    Ok(())
}

fn human(secs: f64) -> String {
    if secs < 1.0 {
        "under a second".into()
    } else if secs < 120.0 {
        format!("{secs:.0} s")
    } else {
        format!("{:.1} min", secs / 60.0)
    }
}

fn ctrl_c() -> CancellationToken {
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            c.cancel();
        }
    });
    cancel
}

fn options(data: &DataArgs, default_dir: &Path) -> LocalOptions {
    let paths = crate::store::Paths::from_env();
    LocalOptions {
        data_dir: data
            .data_dir
            .clone()
            .unwrap_or_else(|| default_dir.to_path_buf()),
        data: crate::research::backtest::RunOptions {
            cache_dir: paths.map(|p| p.cache_dir),
            offline: data.offline,
            ..Default::default()
        },
        threads: data.threads,
    }
}

/// Events as JSON lines, or a bar redrawn on a terminal's stderr.
fn printer(json: bool) -> Arc<dyn Fn(&SweepEvent) + Send + Sync> {
    let tty = std::io::stderr().is_terminal();
    let lock = Arc::new(Mutex::new(()));
    Arc::new(move |ev: &SweepEvent| {
        let _g = lock.lock();
        if json {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", ev.to_json());
            let _ = out.flush();
            return;
        }
        let mut err = std::io::stderr().lock();
        match ev {
            SweepEvent::Progress { done, total, .. } if tty => {
                let _ = write!(err, "\r\x1b[2K{} {}", bar(*done, *total, 24), ev.line());
            }
            SweepEvent::Progress { .. } => {}
            SweepEvent::Finished { .. } if tty => {
                let _ = writeln!(err, "\r\x1b[2K{}", ev.line());
            }
            _ => {
                let _ = writeln!(err, "{}", ev.line());
            }
        }
        let _ = err.flush();
    })
}

async fn run(
    spec: &Path,
    out: &Path,
    json: bool,
    engine: &str,
    address: Option<String>,
    ray: &super::ray::RayArgs,
    data: &DataArgs,
) -> Result<(), CliError> {
    let engine = Engine::parse(engine, address).map_err(fail)?;
    crate::sweep::output::check_extension(out).map_err(fail)?;
    let plan = Arc::new(load_plan(spec)?);
    let spec_dir = spec
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let opts = options(data, spec_dir);
    let events = printer(json);
    let finished = match engine {
        // The Ray engine (docs §19) reads [engines.ray] and prints its job.
        Engine::Ray { address } => {
            let ray = super::ray::ray_sweep(address.as_deref(), ray, &opts)?;
            let mut print = super::ray::job_printer(json, ray.client.address().to_string());
            crate::sweep::ray::sweep::run(plan.clone(), out, &ray, ctrl_c(), events, &mut print)
                .await
        }
        engine => {
            dispatch::run(
                engine,
                plan.clone(),
                out.to_path_buf(),
                opts,
                ctrl_c(),
                events,
            )
            .await
        }
    }
    .map_err(fail)?;
    let report = report::summarise(&plan, &finished.results);
    let files = report.write_heatmaps(&finished.state_dir);
    if json {
        let mut v = report.to_json();
        v["event"] = json!("sweep_report");
        v["out"] = json!(finished.out.display().to_string());
        v["heatmap_files"] = json!(files);
        println!("{v}");
    } else {
        print!("{}", report.text());
        println!("results: {}", finished.out.display());
        for f in files {
            println!("heatmap: {f}");
        }
    }
    Ok(())
}

async fn run_shard(
    plan_path: &Path,
    which: &str,
    out: &Path,
    json: bool,
    data: &DataArgs,
) -> Result<(), CliError> {
    let (i, n) = shard::parse_shard(which).map_err(|m| CliError::usage(m).of("sweep"))?;
    let plan = Plan::load(plan_path).map_err(fail)?;
    let opts = options(data, Path::new("."));
    let path = shard::run_shard_with(&plan, i, n, out, &opts, &ctrl_c(), printer(json))
        .await
        .map_err(fail)?;
    if !json {
        println!("{}", path.display());
    }
    Ok(())
}
