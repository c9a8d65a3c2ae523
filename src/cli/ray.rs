//! The command line's side of a Ray job (docs §19.2), shared by `sweep run
//! --engine ray` and `swarm batch --engine ray`: the job's events as lines
//! on stderr (or `ray_*` JSON lines on stdout with `--json`), Ctrl-C as a
//! stop of the job, and the outcome as a [`CliError`] when it did not
//! succeed.

use std::io::Write;
use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use super::{CliError, exit};
use crate::config::Config;
use crate::sweep::ray::job::{self, JobEvent, JobOutcome, ShardJob};
use crate::sweep::ray::{JobStatus, JobsClient, RayConfig};

/// `sweep run`'s flags for `--engine ray` (docs §19.2).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RayArgs {
    /// Shards the sweep is cut into on Ray (default 16, at most one per
    /// cell); keep it the same to resume.
    #[arg(long, value_name = "N")]
    pub shards: Option<usize>,
    /// Where shards write their files: a directory every Ray node and this
    /// machine see at the same path (default `[engines.ray] shard_dir`, else
    /// `OUT.sweep/ray-shards`).
    #[arg(long, value_name = "DIR")]
    pub shard_dir: Option<PathBuf>,
    /// Ray's retries of a failed shard (default `[engines.ray]
    /// max_retries`, else 3).
    #[arg(long, value_name = "N")]
    pub max_retries: Option<u32>,
}

/// A sweep's Ray run from the flags, `[engines.ray]` and the local
/// engine's data options.
pub(super) fn ray_sweep(
    address: Option<&str>,
    args: &RayArgs,
    opts: &crate::sweep::local::LocalOptions,
) -> Result<crate::sweep::ray::sweep::RaySweep, CliError> {
    let config = super::load_config(&crate::config::Overrides::default())?;
    let setup = RaySetup::new(&config, address)?;
    let mut ray = crate::sweep::ray::sweep::RaySweep::new(setup.client.clone(), current_binary()?);
    ray.shard_dir = match args
        .shard_dir
        .as_deref()
        .or(setup.config.shard_dir.as_deref())
    {
        Some(d) => Some(absolute_dir(d)?),
        None => None,
    };
    if args.shards == Some(0) {
        return Err(CliError::usage("--shards must be at least 1"));
    }
    ray.shards = args.shards;
    ray.max_retries = setup.max_retries(args.max_retries);
    ray.python = setup.python();
    ray.data_dir = std::path::absolute(&opts.data_dir).ok();
    ray.offline = opts.data.offline;
    Ok(ray)
}

/// `--address`, `--shard-dir`, `--max-retries` with `[engines.ray]`.
pub(super) struct RaySetup {
    pub client: JobsClient,
    pub config: RayConfig,
}

impl RaySetup {
    /// `[engines.ray]` from the config as loaded once, the flag's address
    /// before the file's.
    pub fn new(config: &Config, address: Option<&str>) -> Result<RaySetup, CliError> {
        let config = config.ray.clone().map_err(CliError::usage)?;
        let client = config.client(address).map_err(CliError::usage)?;
        Ok(RaySetup { client, config })
    }

    /// The shard directory: the flag, `[engines.ray] shard_dir`, else
    /// `default`; made absolute (the nodes resolve it, not this cwd) and
    /// created.
    pub fn shard_dir(&self, flag: Option<&Path>, default: &Path) -> Result<PathBuf, CliError> {
        let dir = flag
            .map(Path::to_path_buf)
            .or_else(|| self.config.shard_dir.clone())
            .unwrap_or_else(|| default.to_path_buf());
        absolute_dir(&dir)
    }

    /// Retries of a failed shard: the flag, the file, else the default.
    pub fn max_retries(&self, flag: Option<u32>) -> u32 {
        flag.or(self.config.max_retries)
            .unwrap_or(crate::sweep::ray::DEFAULT_MAX_RETRIES)
    }

    pub fn python(&self) -> String {
        self.config
            .python
            .clone()
            .unwrap_or_else(|| "python".to_string())
    }
}

/// `dir`, created, as an absolute path.
pub(super) fn absolute_dir(dir: &Path) -> Result<PathBuf, CliError> {
    std::fs::create_dir_all(dir).map_err(|e| {
        CliError::usage(format!(
            "cannot create the shard directory {}: {e}",
            dir.display()
        ))
    })?;
    std::path::absolute(dir).map_err(|e| {
        CliError::usage(format!(
            "cannot resolve the shard directory {}: {e}",
            dir.display()
        ))
    })
}

/// The running binary: what the package carries to the cluster.
pub(super) fn current_binary() -> Result<PathBuf, CliError> {
    std::env::current_exe()
        .map_err(|e| CliError::failed(format!("cannot find the running vibedesk binary: {e}")))
}

/// Prints a job's events: lines on stderr, or `ray_*` JSON lines on
/// stdout with `--json`.
pub(super) fn job_printer(json: bool, address: String) -> impl FnMut(&JobEvent) + Send {
    let mut done = 0usize;
    move |e: &JobEvent| {
        if let JobEvent::ShardDone { .. } = e {
            done += 1;
        }
        if json {
            print_json(e, done);
        } else {
            print_text(e, done, &address);
        }
    }
}

/// Runs `job` on the cluster and follows it, printing its events. Ctrl-C
/// stops the job.
pub(super) async fn follow(
    setup: &RaySetup,
    job: &ShardJob,
    json: bool,
) -> Result<JobOutcome, CliError> {
    let cancel = CancellationToken::new();
    let ctrl_c = spawn_ctrl_c(cancel.clone(), json);
    let mut print = job_printer(json, setup.client.address().to_string());
    let mut on_event = |e: JobEvent| print(&e);
    let outcome = job::run(&setup.client, job, &mut on_event, &cancel).await;
    ctrl_c.abort();
    outcome.map_err(CliError::failed)
}

/// What a finished job means for the command: success, or the error that
/// names the job, the shards that failed and how to resume.
pub(super) fn check(outcome: &JobOutcome, shard_dir: &Path) -> Result<(), CliError> {
    let resume = format!(
        "finished shards are kept in {}; run the same command again to resume",
        shard_dir.display()
    );
    match outcome.status {
        JobStatus::Succeeded => Ok(()),
        JobStatus::Stopped => Err(CliError::new(
            exit::CANCELLED,
            format!(
                "the Ray job {} was stopped; {resume}",
                outcome.submission_id
            ),
        )),
        status => Err(CliError::failed(format!(
            "the Ray job {} ended {}{}{}; {resume}",
            outcome.submission_id,
            status.as_str(),
            if outcome.failed.is_empty() {
                String::new()
            } else {
                format!(
                    " with shard(s) {:?} failed after their retries",
                    outcome.failed
                )
            },
            outcome
                .message
                .as_ref()
                .map(|m| format!(" ({})", crate::text::one_line(m, 300)))
                .unwrap_or_default()
        ))),
    }
}

/// Ctrl-C stops the job (the follow loop posts the stop); a second one
/// quits at once.
fn spawn_ctrl_c(cancel: CancellationToken, json: bool) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            if !json {
                eprintln!(
                    "\nvibedesk: stopping the Ray job… (Ctrl-C again to quit without waiting)"
                );
            }
            cancel.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(i32::from(exit::CANCELLED));
            }
        }
    })
}

fn print_text(e: &JobEvent, done: usize, address: &str) {
    match e {
        JobEvent::Packaged { package, bytes } => eprintln!(
            "ray: package {package} ({:.1} MB)",
            *bytes as f64 / 1_000_000.0
        ),
        JobEvent::Uploaded { seconds, .. } => eprintln!("ray: uploaded in {seconds:.1} s"),
        JobEvent::Submitted { submission_id } => {
            eprintln!("ray: job {submission_id} submitted to {address} (Ctrl-C stops it)")
        }
        JobEvent::Status { status } => eprintln!("ray: job {}", status.as_str()),
        JobEvent::ShardStarted { shard, node, .. } => {
            eprintln!("  ▶ shard {shard} on {node}")
        }
        JobEvent::ShardDone { shard, seconds, .. } => {
            eprintln!("  ✓ shard {shard} {seconds:.1} s · {done} done in this job")
        }
        JobEvent::ShardFailed { shard, error } => {
            eprintln!("  ✗ shard {shard}: {}", crate::text::one_line(error, 300))
        }
        JobEvent::Log { line } => eprintln!("  ray│ {line}"),
        JobEvent::StopRequested => eprintln!("ray: stop requested"),
    }
}

fn print_json(e: &JobEvent, done: usize) {
    let value = match e {
        JobEvent::Packaged { package, bytes } => {
            serde_json::json!({"event": "ray_packaged", "package": package, "bytes": bytes})
        }
        JobEvent::Uploaded { package, seconds } => {
            serde_json::json!({"event": "ray_uploaded", "package": package, "seconds": seconds})
        }
        JobEvent::Submitted { submission_id } => {
            serde_json::json!({"event": "ray_submitted", "submission_id": submission_id})
        }
        JobEvent::Status { status } => {
            serde_json::json!({"event": "ray_status", "status": status.as_str()})
        }
        JobEvent::ShardStarted {
            shard,
            node,
            node_id,
        } => serde_json::json!({
            "event": "ray_shard_started", "shard": shard, "node": node, "node_id": node_id
        }),
        JobEvent::ShardDone {
            shard,
            seconds,
            node_id,
        } => serde_json::json!({
            "event": "ray_shard_done", "shard": shard, "seconds": seconds, "done": done, "node_id": node_id
        }),
        JobEvent::ShardFailed { shard, error } => {
            serde_json::json!({"event": "ray_shard_failed", "shard": shard, "error": error})
        }
        JobEvent::Log { line } => serde_json::json!({"event": "ray_log", "line": line}),
        JobEvent::StopRequested => serde_json::json!({"event": "ray_stop_requested"}),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}
