//! The local engine (docs §18.3): the cells on every core, their rows into
//! the journal as they finish, progress as [`SweepEvent`]s, Ctrl-C at the
//! next cell, and the results file once every cell is done.
//!
//! Workers take blocks of consecutive cells (one unit each, so a worker
//! reuses that unit's prices, contexts and moving averages) from a shared
//! counter; the calling thread writes what they send.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::SweepError;
use super::eval::{Prepared, Scratch, evaluate_cell};
use super::events::{Best, SweepEvent};
use super::journal::Journal;
use super::plan::Plan;
use super::rows::{Results, Row};

/// The fewest cells a worker takes at a time: enough that the counter is
/// not contended.
const BLOCK: usize = 8;

/// The most: a block's rows wait in memory until it is done, and progress
/// moves a block at a time.
const MAX_BLOCK: usize = 512;

/// Blocks per worker a run is cut into at least, for an even spread.
const BLOCKS_PER_WORKER: usize = 16;

/// A progress event at most this often.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// The workers a machine runs: one per core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Consecutive cells of one unit, as long as an even spread over
/// `threads` allows (between [`BLOCK`] and [`MAX_BLOCK`]). Long blocks
/// matter: a worker entering a unit computes its moving averages and
/// contexts, so two workers taking turns at one unit's cells each compute
/// them (measured: moving averages were 9 % of the 17,400-cell bench's
/// time, each made twice).
fn blocks(plan: &Plan, todo: &[usize], threads: usize) -> Vec<std::ops::Range<usize>> {
    let len =
        (todo.len() / threads.max(1).saturating_mul(BLOCKS_PER_WORKER)).clamp(BLOCK, MAX_BLOCK);
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=todo.len() {
        let split = i == todo.len()
            || i - start == len
            || plan.cell(todo[i]).unit != plan.cell(todo[start]).unit;
        if split {
            out.push(start..i);
            start = i;
        }
    }
    out
}

/// Runs the `todo` cells on `threads` workers; `sink` receives each
/// block's rows (cells in any order, a cell's windows together) on the
/// calling thread. Stops at the next cell once `cancel` fires or `sink`
/// fails; returns the cells computed.
pub fn run_cells(
    prep: &Prepared,
    todo: &[usize],
    threads: usize,
    cancel: &CancellationToken,
    sink: &mut dyn FnMut(Vec<Row>) -> Result<(), SweepError>,
) -> Result<usize, SweepError> {
    let blocks = blocks(&prep.plan, todo, threads);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let threads = threads.clamp(1, blocks.len().max(1));
    // A block's rows, or the cell whose evaluation panicked and why.
    let (tx, rx) = mpsc::channel::<Result<(usize, Vec<Row>), SweepError>>();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let tx = tx.clone();
            let (next, stop, blocks) = (&next, &stop, &blocks);
            let work = move || {
                let mut scratch = Scratch::default();
                loop {
                    let b = next.fetch_add(1, Ordering::Relaxed);
                    let Some(range) = blocks.get(b) else { break };
                    let mut rows = Vec::with_capacity(range.len() * prep.plan.windows.len());
                    let mut cells = 0;
                    for &cell in &todo[range.clone()] {
                        if cancel.is_cancelled() || stop.load(Ordering::Relaxed) {
                            break;
                        }
                        match guarded_cell(prep, cell, &mut scratch) {
                            Ok(r) => rows.extend(r),
                            Err(panicked) => {
                                let _ = tx.send(Err(panicked));
                                return;
                            }
                        }
                        cells += 1;
                    }
                    if cells > 0 && tx.send(Ok((cells, rows))).is_err() {
                        break;
                    }
                    if cancel.is_cancelled() || stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
            };
            // A thread the process limit refuses is simply not started;
            // the others (or this thread, below) take its blocks.
            let _ = std::thread::Builder::new().spawn_scoped(scope, work);
        }
        drop(tx);
        let mut computed = 0;
        let mut failed = None;
        for sent in rx {
            if failed.is_some() {
                continue;
            }
            let (cells, rows) = match sent {
                Ok(block) => block,
                Err(panicked) => {
                    stop.store(true, Ordering::Relaxed);
                    failed = Some(panicked);
                    continue;
                }
            };
            match sink(rows) {
                Ok(()) => computed += cells,
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    failed = Some(e);
                }
            }
        }
        // No worker could start: run here.
        if computed == 0 && failed.is_none() && next.load(Ordering::Relaxed) == 0 {
            let mut scratch = Scratch::default();
            for &cell in todo {
                if cancel.is_cancelled() {
                    break;
                }
                let rows = guarded_cell(prep, cell, &mut scratch)?;
                sink(rows)?;
                computed += 1;
            }
        }
        failed.map_or(Ok(computed), Err)
    })
}

/// One cell, a panic in it caught (docs §2.4): the sweep stops with an
/// error naming the cell instead of taking its worker (and the journal's
/// writer) down. The scratch is reset after a panic, as it may be torn.
fn guarded_cell(
    prep: &Prepared,
    cell: usize,
    scratch: &mut Scratch,
) -> Result<Vec<Row>, SweepError> {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        evaluate_cell(prep, cell, scratch)
    }));
    r.map_err(|p| {
        *scratch = Scratch::default();
        let why = p
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        cell_panicked(cell, &why)
    })
}

fn cell_panicked(cell: usize, why: &str) -> SweepError {
    SweepError::Engine(format!(
        "cell {cell} failed unexpectedly ({why}); this is a bug in vibedesk: the finished cells are kept in the journal"
    ))
}

/// The score a cell is ranked by: the mean of the ranking metric over its
/// out-of-sample windows (all windows when there are none; docs §18.4).
pub fn cell_score(plan: &Plan, rows: &[Row]) -> f64 {
    if let Some(cv) = &plan.cv {
        // The mean out-of-sample Sharpe over folds or paths (docs §18.9).
        return cv.score(&window_sums(plan, rows));
    }
    let oos: Vec<f64> = rows
        .iter()
        .filter(|r| {
            plan.windows
                .get(r.window)
                .is_some_and(|w| w.is_out_of_sample())
        })
        .map(|r| r.metric(&plan.rank_by))
        .collect();
    let pick: Vec<f64> = if oos.is_empty() {
        rows.iter().map(|r| r.metric(&plan.rank_by)).collect()
    } else {
        oos
    };
    if pick.is_empty() {
        f64::NAN
    } else {
        pick.iter().sum::<f64>() / pick.len() as f64
    }
}

/// A cell's excess-return sums by window (default where a row is missing).
pub fn window_sums(plan: &Plan, rows: &[Row]) -> Vec<super::rows::PowerSums> {
    let mut sums = vec![super::rows::PowerSums::default(); plan.windows.len()];
    for r in rows {
        if let Some(s) = sums.get_mut(r.window) {
            *s = r.moments;
        }
    }
    sums
}

/// `fast=5 slow=30 AAPL`.
pub fn cell_label(plan: &Plan, cell: usize) -> String {
    let c = plan.cell(cell);
    let unit = plan.units.get(c.unit).map_or("", |u| u.label.as_str());
    format!("{} {unit}", plan.describe_combo(c.combo))
}

/// Where a local run keeps its plan and journal: `<out>.sweep/`.
pub fn state_dir(out: &Path) -> PathBuf {
    let mut s = out.as_os_str().to_os_string();
    s.push(".sweep");
    PathBuf::from(s)
}

/// How a local run gets data and how many workers it runs.
#[derive(Clone, Debug, Default)]
pub struct LocalOptions {
    /// Searched for local data files as a run dir is (docs §7.3).
    pub data_dir: PathBuf,
    pub data: crate::research::backtest::RunOptions,
    /// Workers; `None`: one per core.
    pub threads: Option<usize>,
}

/// What a finished local run produced.
#[derive(Clone, Debug)]
pub struct Finished {
    pub results: Results,
    pub computed: usize,
    pub skipped: usize,
    pub elapsed: Duration,
    pub out: PathBuf,
    pub state_dir: PathBuf,
}

/// Emits progress, tracks the best cell, feeds the journal.
struct Progress<'a> {
    plan: &'a Plan,
    journal: Journal,
    rows: Vec<Row>,
    total: usize,
    done: usize,
    computed: usize,
    started: Instant,
    last: Instant,
    best: Option<Best>,
    events: &'a (dyn Fn(&SweepEvent) + Send + Sync),
}

impl Progress<'_> {
    fn take(&mut self, rows: Vec<Row>) -> Result<(), SweepError> {
        self.journal.append(&rows)?;
        for cell_rows in rows.chunk_by(|a, b| a.cell == b.cell) {
            let score = cell_score(self.plan, cell_rows);
            let cell = cell_rows[0].cell;
            if score.is_finite() && self.best.as_ref().is_none_or(|b| score > b.value) {
                self.best = Some(Best {
                    cell,
                    label: cell_label(self.plan, cell),
                    metric: self.plan.rank_by.clone(),
                    value: score,
                });
            }
            self.done += 1;
            self.computed += 1;
        }
        self.rows.extend(rows);
        if self.last.elapsed() >= PROGRESS_EVERY {
            self.emit();
        }
        Ok(())
    }

    fn emit(&mut self) {
        self.last = Instant::now();
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let rate = self.computed as f64 / secs;
        let left = (self.total - self.done) as f64;
        (self.events)(&SweepEvent::Progress {
            done: self.done,
            total: self.total,
            rate,
            eta_s: if rate > 0.0 { left / rate } else { f64::NAN },
            best: self.best.clone(),
        });
    }
}

/// Runs a plan here: resumes from `<out>.sweep/journal.csv`, runs the rest
/// on every core, and writes `out` (`.parquet` or `.csv`) once every cell
/// is done. Cancelled: the finished cells stay in the journal and
/// [`SweepError::Cancelled`] says how many.
pub async fn run(
    plan: Arc<Plan>,
    out: &Path,
    opts: &LocalOptions,
    cancel: CancellationToken,
    events: Arc<dyn Fn(&SweepEvent) + Send + Sync>,
) -> Result<Finished, SweepError> {
    super::output::check_extension(out)?;
    let state = state_dir(out);
    std::fs::create_dir_all(&state).map_err(SweepError::io("create", &state))?;
    // One writer per out, one plan per folder (docs §18.3); held to the end.
    let _claim = super::claim::Claim::take(&state, out, &plan)?;
    plan.save(&state.join("plan.json"))?;
    let (journal, done) = Journal::open(&state.join("journal.csv"), &plan)?;
    let total = plan.cell_count();
    let windows = plan.windows.len().max(1);
    let skipped = done.len() / windows;
    let mut finished = vec![false; total];
    for r in &done {
        if let Some(f) = finished.get_mut(r.cell) {
            *f = true;
        }
    }
    let todo: Vec<usize> = (0..total).filter(|c| !finished[*c]).collect();
    drop(finished);
    let threads = opts.threads.unwrap_or_else(default_threads).max(1);
    events(&SweepEvent::Started {
        total,
        skipped,
        threads,
    });
    let started = Instant::now();
    let prep = if todo.is_empty() {
        None
    } else {
        Some(Prepared::load(plan.clone(), &opts.data_dir, &opts.data).await?)
    };
    let c2 = cancel.clone();
    let (rows, computed) = tokio::task::spawn_blocking({
        let plan = plan.clone();
        let events = events.clone();
        move || -> Result<(Vec<Row>, usize), SweepError> {
            let mut p = Progress {
                plan: &plan,
                journal,
                rows: done,
                total,
                done: skipped,
                computed: 0,
                started,
                last: Instant::now(),
                best: None,
                events: &*events,
            };
            if let Some(prep) = &prep {
                run_cells(prep, &todo, threads, &c2, &mut |rows| p.take(rows))?;
            }
            p.emit();
            Ok((p.rows, p.computed))
        }
    })
    .await
    .map_err(|e| SweepError::Engine(format!("the sweep's worker task failed: {e}")))??;
    let elapsed = started.elapsed();
    let done_cells = rows.len() / windows;
    let cancelled = done_cells < total;
    events(&SweepEvent::Finished {
        done: done_cells,
        total,
        computed,
        skipped,
        elapsed_s: elapsed.as_secs_f64(),
        cancelled,
    });
    if cancelled {
        return Err(SweepError::Cancelled {
            done: done_cells,
            total,
        });
    }
    let results = Results::from_rows(rows);
    super::output::write(&plan, &results, out)?;
    Ok(Finished {
        results,
        computed,
        skipped,
        elapsed,
        out: out.to_path_buf(),
        state_dir: state,
    })
}
