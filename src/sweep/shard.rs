//! One shard of a plan (docs §18.5): what `vibedesk sweep shard --plan P
//! --shard i/N --out DIR` runs on a cluster node, or anywhere.
//!
//! Shard `i` of `N` is the contiguous block of cells `[i·n/N, (i+1)·n/N)`
//! (n the plan's cells), so a shard loads few symbols and shares their
//! indicators. It writes `DIR/shard-<i>-of-<N>.csv` atomically (a temp file
//! renamed into place): a first line naming the shard, the plan's hash and
//! its cells, the column line, the rows in cell then window order
//! ([`super::rows`]) and a last line with the row count. Running a shard
//! twice gives the same bytes; a shard whose file is already complete for
//! this plan is not run again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::SweepError;
use super::eval::Prepared;
use super::events::SweepEvent;
use super::local::{LocalOptions, default_threads, run_cells};
use super::plan::Plan;
use super::rows::{ROW_HEADER, Row};

/// The cells of shard `i` of `n`.
pub fn cells(plan: &Plan, i: usize, n: usize) -> std::ops::Range<usize> {
    let total = plan.cell_count();
    let n = n.max(1);
    (i * total / n)..((i + 1) * total / n)
}

/// `shard-<i>-of-<N>.csv`.
pub fn file_name(i: usize, n: usize) -> String {
    format!("shard-{i}-of-{n}.csv")
}

/// The first line of a shard's file.
pub fn first_line(plan: &Plan, i: usize, n: usize) -> String {
    let r = cells(plan, i, n);
    format!(
        "# vibedesk sweep shard {i}/{n} plan {} cells {}..{}",
        plan.hash(),
        r.start,
        r.end
    )
}

/// A `--shard` that is not `i/N` with `i < N`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error("--shard '{0}' must be i/N, e.g. 0/4")]
    NoSlash(String),
    #[error("--shard '{0}' must be i/N with whole numbers, e.g. 0/4")]
    NotWhole(String),
    #[error("--shard '{0}': i must be below N (shards are 0..N-1)")]
    OutOfRange(String),
}

/// Parses `i/N` (`0/4`).
pub fn parse_shard(s: &str) -> Result<(usize, usize), ShardError> {
    let (a, b) = s
        .split_once('/')
        .ok_or_else(|| ShardError::NoSlash(s.to_string()))?;
    let (i, n): (usize, usize) = match (a.trim().parse(), b.trim().parse()) {
        (Ok(i), Ok(n)) => (i, n),
        _ => return Err(ShardError::NotWhole(s.to_string())),
    };
    if n == 0 || i >= n {
        return Err(ShardError::OutOfRange(s.to_string()));
    }
    Ok((i, n))
}

/// The rows of a complete shard file of this plan; `None` when the file is
/// missing, of another plan or shard, or incomplete.
pub fn read_complete(plan: &Plan, path: &Path, i: usize, n: usize) -> Option<Vec<Row>> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut lines = text.lines();
    if lines.next()? != first_line(plan, i, n) || lines.next()? != ROW_HEADER {
        return None;
    }
    let mut rows = Vec::new();
    for line in lines {
        if let Some(count) = line.strip_prefix("# rows ") {
            let want = cells(plan, i, n).len() * plan.windows.len();
            return (count.parse::<usize>().ok()? == rows.len() && rows.len() == want)
                .then_some(rows);
        }
        rows.push(Row::parse(line)?);
    }
    None
}

/// The shard file's bytes for its rows (in cell, window order).
pub fn render(plan: &Plan, i: usize, n: usize, rows: &[Row]) -> Vec<u8> {
    let mut s = String::with_capacity(rows.len() * 100 + 200);
    s.push_str(&first_line(plan, i, n));
    s.push('\n');
    s.push_str(ROW_HEADER);
    s.push('\n');
    for r in rows {
        s.push_str(&r.to_line());
        s.push('\n');
    }
    s.push_str(&format!("# rows {}\n", rows.len()));
    s.into_bytes()
}

/// [`run_shard_with`] with the offline data of the current directory, on
/// every core, without progress.
pub async fn run_shard(
    plan: &Plan,
    i: usize,
    n: usize,
    dir: &Path,
    cancel: &CancellationToken,
) -> Result<PathBuf, SweepError> {
    let opts = LocalOptions {
        data_dir: PathBuf::from("."),
        ..LocalOptions::default()
    };
    run_shard_with(plan, i, n, dir, &opts, cancel, Arc::new(|_| {})).await
}

/// Runs shard `i` of `n` into `dir` (see the module docs); returns the
/// shard file's path.
pub async fn run_shard_with(
    plan: &Plan,
    i: usize,
    n: usize,
    dir: &Path,
    opts: &LocalOptions,
    cancel: &CancellationToken,
    events: Arc<dyn Fn(&SweepEvent) + Send + Sync>,
) -> Result<PathBuf, SweepError> {
    if n == 0 || i >= n {
        return Err(SweepError::Plan(format!(
            "shard {i}/{n}: i must be below N"
        )));
    }
    std::fs::create_dir_all(dir).map_err(SweepError::io("create", dir))?;
    let path = dir.join(file_name(i, n));
    let range = cells(plan, i, n);
    let total = range.len();
    if read_complete(plan, &path, i, n).is_some() {
        events(&SweepEvent::Finished {
            done: total,
            total,
            computed: 0,
            skipped: total,
            elapsed_s: 0.0,
            cancelled: false,
        });
        return Ok(path);
    }
    let threads = opts.threads.unwrap_or_else(default_threads).max(1);
    events(&SweepEvent::Started {
        total,
        skipped: 0,
        threads,
    });
    let started = std::time::Instant::now();
    let todo: Vec<usize> = range.collect();
    let mut rows = Vec::new();
    if !todo.is_empty() {
        let prep = Prepared::load(Arc::new(plan.clone()), &opts.data_dir, &opts.data).await?;
        let cancel = cancel.clone();
        let ev = events.clone();
        rows = tokio::task::spawn_blocking(move || -> Result<Vec<Row>, SweepError> {
            let mut rows = Vec::new();
            let mut done = 0usize;
            let mut last = std::time::Instant::now();
            run_cells(&prep, &todo, threads, &cancel, &mut |r| {
                done += r.len() / prep.plan.windows.len().max(1);
                rows.extend(r);
                if last.elapsed().as_millis() >= 100 {
                    last = std::time::Instant::now();
                    let rate = done as f64 / started.elapsed().as_secs_f64().max(1e-9);
                    ev(&SweepEvent::Progress {
                        done,
                        total,
                        rate,
                        eta_s: (total - done) as f64 / rate.max(1e-9),
                        best: None,
                    });
                }
                Ok(())
            })?;
            let rate = done as f64 / started.elapsed().as_secs_f64().max(1e-9);
            ev(&SweepEvent::Progress {
                done,
                total,
                rate,
                eta_s: (total - done) as f64 / rate.max(1e-9),
                best: None,
            });
            Ok(rows)
        })
        .await
        .map_err(|e| SweepError::Engine(format!("the shard's worker task failed: {e}")))??;
    }
    let windows = plan.windows.len().max(1);
    let done = rows.len() / windows;
    if done < total {
        events(&SweepEvent::Finished {
            done,
            total,
            computed: done,
            skipped: 0,
            elapsed_s: started.elapsed().as_secs_f64(),
            cancelled: true,
        });
        return Err(SweepError::Cancelled { done, total });
    }
    rows.sort_by_key(|r| (r.cell, r.window));
    crate::fsio::write_atomic(
        &path,
        &render(plan, i, n, &rows),
        crate::fsio::Durability::Synced,
    )?;
    events(&SweepEvent::Finished {
        done,
        total,
        computed: done,
        skipped: 0,
        elapsed_s: started.elapsed().as_secs_f64(),
        cancelled: false,
    });
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_tile_the_cells_and_parse() {
        assert_eq!(parse_shard("1/4"), Ok((1, 4)));
        assert!(parse_shard("4/4").is_err());
        assert!(parse_shard("x").is_err());
        let v = serde_json::json!({"base": {"codes": ["AAPL"], "start_date": "2005-01-01", "end_date": "2006-12-31",
            "strategy": {"name": "sma_crossover"}}, "axes": {"strategy.params.fast": [5, 10, 15, 20, 25, 30, 35]}, "universe": ["AAPL", "MSFT"]});
        let plan = Plan::from_spec(&super::super::Spec::from_value(v).unwrap()).unwrap();
        let mut all = Vec::new();
        for i in 0..3 {
            all.extend(cells(&plan, i, 3));
        }
        assert_eq!(all, (0..14).collect::<Vec<_>>());
    }
}
