//! Joins a plan's shard files (docs §18.5): refuses unless every shard is
//! there, complete, of this plan, and every cell and window has exactly one
//! row.

use std::path::Path;

use super::plan::Plan;
use super::rows::Results;
use super::shard;

/// Why shards cannot be joined; names them.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CollectError {
    #[error(
        "shards missing or incomplete in {dir}: {shards} (of {n}); run them again (`vibedesk sweep shard --plan P --shard i/{n} --out DIR`)"
    )]
    Missing {
        dir: String,
        shards: String,
        n: usize,
    },
    #[error("the shards' rows do not cover the plan once: {0}")]
    Rows(String),
}

/// Reads `dir/shard-<i>-of-<n>.csv` for every `i`, in cell order.
pub fn collect(plan: &Plan, dir: &Path, n: usize) -> Result<Results, CollectError> {
    let mut rows = Vec::with_capacity(plan.row_count());
    let mut missing = Vec::new();
    for i in 0..n {
        let path = dir.join(shard::file_name(i, n));
        match shard::read_complete(plan, &path, i, n) {
            Some(r) => rows.extend(r),
            None => missing.push(i.to_string()),
        }
    }
    if !missing.is_empty() || n == 0 {
        return Err(CollectError::Missing {
            dir: dir.display().to_string(),
            shards: if n == 0 {
                "none asked for".into()
            } else {
                missing.join(", ")
            },
            n,
        });
    }
    let results = Results::from_rows(rows);
    check_once(plan, &results)?;
    Ok(results)
}

/// Every (cell, window) of the plan exactly once.
pub fn check_once(plan: &Plan, results: &Results) -> Result<(), CollectError> {
    let windows = plan.windows.len();
    if results.rows.len() != plan.row_count() {
        return Err(CollectError::Rows(format!(
            "{} rows for {} cells × {windows} windows",
            results.rows.len(),
            plan.cell_count()
        )));
    }
    for (k, r) in results.rows.iter().enumerate() {
        let (cell, window) = (k / windows.max(1), k % windows.max(1));
        if (r.cell, r.window) != (cell, window) {
            return Err(CollectError::Rows(format!(
                "expected cell {cell} window {window}, found cell {} window {}",
                r.cell, r.window
            )));
        }
    }
    Ok(())
}
