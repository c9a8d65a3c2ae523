//! A sweep on a Ray cluster (docs §19.2): the plan saved in `<out>.sweep/`
//! (as the local engine saves it) and shipped in the job's package; one Ray
//! task per unfinished shard, each `vibedesk sweep shard --plan plan.json
//! --shard i/N --out DIR --threads 1`; the shards' files collected with
//! [`crate::sweep::collect`] (which refuses until every shard is present
//! exactly once, for this plan) and written by [`crate::sweep::output`],
//! so the file equals the local engine's byte for byte.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::job::{self, JobEvent, ShardJob};
use super::{JobStatus, JobsClient};
use crate::sweep::events::{Best, SweepEvent};
use crate::sweep::local::{self, Finished};
use crate::sweep::plan::Plan;
use crate::sweep::{SweepError, collect, output, shard};

/// Shards a sweep is cut into unless `--shards` says otherwise: enough to
/// spread over a small cluster and to lose little when a node dies, few
/// enough that a task's start (about a second) stays small.
pub const DEFAULT_SHARDS: usize = 16;

/// How a sweep runs on the cluster.
#[derive(Clone, Debug)]
pub struct RaySweep {
    pub client: JobsClient,
    /// An absolute directory every node and this machine see at the same
    /// path; `None`: `<out>.sweep/ray-shards`.
    pub shard_dir: Option<PathBuf>,
    /// N; `None`: [`DEFAULT_SHARDS`], at most one per cell.
    pub shards: Option<usize>,
    pub max_retries: u32,
    pub python: String,
    /// The binary to ship (the running one).
    pub binary: PathBuf,
    /// Where the shards look for local data files (absolute: the nodes
    /// resolve it), and whether they may use the online sources.
    pub data_dir: Option<PathBuf>,
    pub offline: bool,
}

impl RaySweep {
    pub fn new(client: JobsClient, binary: PathBuf) -> RaySweep {
        RaySweep {
            client,
            shard_dir: None,
            shards: None,
            max_retries: super::DEFAULT_MAX_RETRIES,
            python: "python".to_string(),
            binary,
            data_dir: None,
            offline: false,
        }
    }

    fn shard_count(&self, plan: &Plan) -> usize {
        self.shards
            .unwrap_or(DEFAULT_SHARDS)
            .clamp(1, plan.cell_count().max(1))
    }
}

/// A missing or bad address or `[engines.ray]` is the user's to fix (exit
/// 2); anything the cluster did is a failure (exit 1).
impl From<super::RayError> for SweepError {
    fn from(e: super::RayError) -> SweepError {
        use super::RayError as R;
        match e {
            R::NoAddress | R::Address(_) | R::Config { .. } => SweepError::Engine(e.to_string()),
            e => SweepError::Ray(e.to_string()),
        }
    }
}

/// The shard command's arguments after the binary.
fn argv(ray: &RaySweep, dir: &Path) -> Vec<String> {
    let mut a: Vec<String> = [
        "sweep",
        "shard",
        "--plan",
        "plan.json",
        "--shard",
        "{shard}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(["--out".to_string(), dir.display().to_string()]);
    // One core per task: Ray gives each task one CPU.
    a.extend(["--threads".to_string(), "1".to_string()]);
    if let Some(d) = &ray.data_dir {
        a.extend(["--data-dir".to_string(), d.display().to_string()]);
    }
    if ray.offline {
        a.push("--offline".to_string());
    }
    a
}

/// Runs `plan` on the cluster into `out`; `on_job` sees the job's events
/// (for the terminal), `events` the sweep's progress. Cancelling stops the
/// job; finished shards stay for the next run, which skips them.
pub async fn run(
    plan: Arc<Plan>,
    out: &Path,
    ray: &RaySweep,
    cancel: CancellationToken,
    events: Arc<dyn Fn(&SweepEvent) + Send + Sync>,
    on_job: &mut (dyn FnMut(&JobEvent) + Send),
) -> Result<Finished, SweepError> {
    output::check_extension(out)?;
    let state = local::state_dir(out);
    std::fs::create_dir_all(&state).map_err(SweepError::io("create", &state))?;
    // One writer per out, one plan per folder (docs §18.3); held to the end.
    let _claim = crate::sweep::claim::Claim::take(&state, out, &plan)?;
    plan.save(&state.join("plan.json"))?;
    let dir = shard_dir(ray, &state)?;
    let count = ray.shard_count(&plan);
    let pending: Vec<usize> = (0..count)
        .filter(|&i| {
            shard::read_complete(&plan, &dir.join(shard::file_name(i, count)), i, count).is_none()
        })
        .collect();
    let total = plan.cell_count();
    let skipped: usize = (0..count)
        .filter(|i| !pending.contains(i))
        .map(|i| shard::cells(&plan, i, count).len())
        .sum();
    events(&SweepEvent::Started {
        total,
        skipped,
        threads: count,
    });
    let started = Instant::now();
    if !pending.is_empty() {
        let mut job = ShardJob::new(
            "sweep",
            &plan.hash(),
            ray.binary.clone(),
            argv(ray, &dir),
            count,
        );
        job.files = vec![("plan.json".to_string(), plan.to_bytes())];
        job.shards = pending;
        job.max_retries = ray.max_retries;
        job.python = ray.python.clone();
        let progress = Mutex::new(Tally::new(skipped, total));
        let mut on_event = |e: JobEvent| {
            if let JobEvent::ShardDone { shard: i, .. } = e
                && let Ok(mut t) = progress.lock()
            {
                t.shard_done(&plan, &dir, i, count);
                events(&t.event());
            }
            on_job(&e);
        };
        let outcome = job::run(&ray.client, &job, &mut on_event, &cancel).await?;
        finish_job(&outcome, &plan, &dir, count, &events, started, skipped)?;
    }
    let results = collect::collect(&plan, &dir, count)?;
    output::write(&plan, &results, out)?;
    let computed = total - skipped;
    events(&SweepEvent::Finished {
        done: total,
        total,
        computed,
        skipped,
        elapsed_s: started.elapsed().as_secs_f64(),
        cancelled: false,
    });
    Ok(Finished {
        results,
        computed,
        skipped,
        elapsed: started.elapsed(),
        out: out.to_path_buf(),
        state_dir: state,
    })
}

/// The shard directory, absolute and created.
fn shard_dir(ray: &RaySweep, state: &Path) -> Result<PathBuf, SweepError> {
    let dir = ray
        .shard_dir
        .clone()
        .unwrap_or_else(|| state.join("ray-shards"));
    std::fs::create_dir_all(&dir).map_err(SweepError::io("create", &dir))?;
    std::path::absolute(&dir).map_err(SweepError::io("resolve", &dir))
}

/// A job that did not succeed: stopped (Ctrl-C) is a cancelled sweep with
/// its finished shards kept; anything else an engine error naming the job.
fn finish_job(
    outcome: &job::JobOutcome,
    plan: &Plan,
    dir: &Path,
    count: usize,
    events: &Arc<dyn Fn(&SweepEvent) + Send + Sync>,
    started: Instant,
    skipped: usize,
) -> Result<(), SweepError> {
    if outcome.status == JobStatus::Succeeded {
        return Ok(());
    }
    let done: usize = (0..count)
        .filter(|&i| {
            shard::read_complete(plan, &dir.join(shard::file_name(i, count)), i, count).is_some()
        })
        .map(|i| shard::cells(plan, i, count).len())
        .sum();
    let total = plan.cell_count();
    if outcome.status == JobStatus::Stopped {
        events(&SweepEvent::Finished {
            done,
            total,
            computed: done.saturating_sub(skipped),
            skipped,
            elapsed_s: started.elapsed().as_secs_f64(),
            cancelled: true,
        });
        return Err(SweepError::Cancelled { done, total });
    }
    Err(SweepError::Ray(format!(
        "the Ray job {} ended {}{}{}; {done} of {total} cells are kept in {}, and running the sweep again resumes",
        outcome.submission_id,
        outcome.status.as_str(),
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
            .unwrap_or_default(),
        dir.display()
    )))
}

/// Cells done, the rate and the best cell, as shards finish.
struct Tally {
    done: usize,
    computed: usize,
    total: usize,
    started: Instant,
    best: Option<Best>,
}

impl Tally {
    fn new(skipped: usize, total: usize) -> Tally {
        Tally {
            done: skipped,
            computed: 0,
            total,
            started: Instant::now(),
            best: None,
        }
    }

    /// Counts shard `i`'s cells and reads its file for the best cell (the
    /// file is on the shared directory; a node's own disk gives nothing).
    fn shard_done(&mut self, plan: &Plan, dir: &Path, i: usize, count: usize) {
        let cells = shard::cells(plan, i, count).len();
        self.done = (self.done + cells).min(self.total);
        self.computed += cells;
        let Some(rows) =
            shard::read_complete(plan, &dir.join(shard::file_name(i, count)), i, count)
        else {
            return;
        };
        for cell_rows in rows.chunk_by(|a, b| a.cell == b.cell) {
            let score = local::cell_score(plan, cell_rows);
            if score.is_finite() && self.best.as_ref().is_none_or(|b| score > b.value) {
                self.best = Some(Best {
                    cell: cell_rows[0].cell,
                    label: local::cell_label(plan, cell_rows[0].cell),
                    metric: plan.rank_by.clone(),
                    value: score,
                });
            }
        }
    }

    fn event(&self) -> SweepEvent {
        let rate = self.computed as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
        SweepEvent::Progress {
            done: self.done,
            total: self.total,
            rate,
            eta_s: if rate > 0.0 {
                (self.total - self.done) as f64 / rate
            } else {
                f64::NAN
            },
            best: self.best.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shard_command_runs_one_core_from_the_package() {
        let client = JobsClient::new("http://127.0.0.1:1", None).unwrap();
        let mut ray = RaySweep::new(client, PathBuf::from("/x/vibedesk"));
        ray.data_dir = Some(PathBuf::from("/data"));
        ray.offline = true;
        let a = argv(&ray, Path::new("/shared/s"));
        assert_eq!(
            a.join(" "),
            "sweep shard --plan plan.json --shard {shard} --out /shared/s --threads 1 --data-dir /data --offline"
        );
    }
}
