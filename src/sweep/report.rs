//! The report (docs §18.4): cells ranked by their out-of-sample result,
//! never in-sample (a plan without an out-of-sample window is ranked on
//! its one window and says so), the best cell's deflated Sharpe for the
//! number of cells tried (Bailey & López de Prado 2014, through
//! [`crate::research::overfitting`]), and the heatmap.

use serde_json::{Value, json};

use super::cv::CvSummary;
use super::heatmap::{self, Heatmap};
use super::local::{cell_label, cell_score, window_sums};
use super::plan::Plan;
use super::rows::{PowerSums, Results, Row};
use crate::research::overfitting::{expected_max_sharpe, psr};

/// How many ranked cells the report lists.
pub const TOP: usize = 10;

/// One ranked cell.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranked {
    pub cell: usize,
    /// `fast=5 slow=30`.
    pub params: String,
    /// The symbol, or "portfolio".
    pub symbol: String,
    /// The ranking metric out-of-sample (mean over test windows).
    pub score: f64,
    /// The same metric in-sample (mean over train windows), for contrast.
    pub in_sample: Option<f64>,
}

/// The best cell's deflated Sharpe (docs §17.3).
#[derive(Clone, Debug, PartialEq)]
pub struct Deflated {
    /// The probability that the best cell's true Sharpe is above what the
    /// best of `trials` luck-only cells would show.
    pub dsr: f64,
    /// Per-period Sharpe of the best cell's out-of-sample excess returns.
    pub sharpe: f64,
    /// SR₀: the expected best per-period Sharpe of `trials` trials.
    pub expected_max: f64,
    pub trials: usize,
    /// Variance of the cells' per-period Sharpe ratios.
    pub variance: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub cells: usize,
    pub rank_by: String,
    /// Whether the ranking is out-of-sample (false: no split was given).
    pub out_of_sample: bool,
    pub top: Vec<Ranked>,
    pub deflated: Option<Deflated>,
    pub heatmap: Option<Heatmap>,
    /// Cells with a window that had no bars (NaN rows).
    pub empty_cells: usize,
    /// A purged k-fold or CPCV split's PBO and paths (docs §18.9).
    pub cv: Option<CvSummary>,
}

/// Mean of the metric over the cell's in-sample windows (train windows).
fn in_sample(plan: &Plan, rows: &[Row]) -> Option<f64> {
    if let Some(cv) = &plan.cv {
        return Some(cv.in_sample(&window_sums(plan, rows)));
    }
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| {
            plan.windows
                .get(r.window)
                .is_some_and(|w| !w.is_out_of_sample() && w.name != "full")
        })
        .map(|r| r.metric(&plan.rank_by))
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The out-of-sample excess returns' sums of a cell (every window when
/// none is out-of-sample).
fn oos_sums(plan: &Plan, rows: &[Row]) -> PowerSums {
    if plan.cv.is_some() {
        // Every piece is out of sample in some split; `cv_full` (window
        // 0) is the same returns again and is not counted twice.
        let mut s = PowerSums::default();
        for r in rows.iter().filter(|r| r.window > 0) {
            s.add(&r.moments);
        }
        return s;
    }
    let any_oos = rows.iter().any(|r| {
        plan.windows
            .get(r.window)
            .is_some_and(|w| w.is_out_of_sample())
    });
    let mut s = PowerSums::default();
    for r in rows {
        if !any_oos
            || plan
                .windows
                .get(r.window)
                .is_some_and(|w| w.is_out_of_sample())
        {
            s.add(&r.moments);
        }
    }
    s
}

/// Ranks, deflates and maps a sweep's results.
pub fn summarise(plan: &Plan, results: &Results) -> Report {
    let mut scores = vec![f64::NAN; plan.cell_count()];
    let mut ranked: Vec<Ranked> = Vec::new();
    let mut sharpes: Vec<(usize, f64, PowerSums)> = Vec::new();
    let mut empty = 0;
    // Each parameter set's sums by window, pooled over its units (CV).
    let mut configs = vec![vec![PowerSums::default(); plan.windows.len()]; plan.combos.len()];
    for rows in results.rows.chunk_by(|a, b| a.cell == b.cell) {
        let cell = rows[0].cell;
        if rows.iter().any(|r| r.final_value.is_nan()) {
            empty += 1;
            continue;
        }
        if plan.cv.is_some()
            && let Some(c) = configs.get_mut(plan.cell(cell).combo)
        {
            for r in rows {
                if let Some(s) = c.get_mut(r.window) {
                    s.add(&r.moments);
                }
            }
        }
        let score = cell_score(plan, rows);
        if let Some(s) = scores.get_mut(cell) {
            *s = score;
        }
        let sums = oos_sums(plan, rows);
        if let Some(m) = sums.moments() {
            sharpes.push((cell, m.sharpe, sums));
        }
        if score.is_finite() {
            let c = plan.cell(cell);
            ranked.push(Ranked {
                cell,
                params: plan.describe_combo(c.combo),
                symbol: plan
                    .units
                    .get(c.unit)
                    .map_or(String::new(), |u| u.label.clone()),
                score,
                in_sample: in_sample(plan, rows),
            });
        }
    }
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.cell.cmp(&b.cell)));
    let deflated = ranked.first().and_then(|best| deflate(best.cell, &sharpes));
    ranked.truncate(TOP);
    Report {
        cells: plan.cell_count(),
        rank_by: plan.rank_by.clone(),
        out_of_sample: plan.cv.is_some() || plan.windows.iter().any(|w| w.is_out_of_sample()),
        top: ranked,
        deflated,
        heatmap: heatmap::build(plan, &scores),
        empty_cells: empty,
        cv: plan
            .cv
            .as_ref()
            .and_then(|cv| super::cv::summarise(cv, &configs)),
    }
}

/// DSR of `best` against the expected maximum of every cell tried.
fn deflate(best: usize, sharpes: &[(usize, f64, PowerSums)]) -> Option<Deflated> {
    let trials = sharpes.len();
    let (_, _, sums) = sharpes.iter().find(|(c, ..)| *c == best)?;
    let m = sums.moments()?;
    let mean = sharpes.iter().map(|s| s.1).sum::<f64>() / trials as f64;
    let variance = if trials > 1 {
        sharpes.iter().map(|s| (s.1 - mean).powi(2)).sum::<f64>() / (trials - 1) as f64
    } else {
        0.0
    };
    let expected_max = expected_max_sharpe(variance, trials, 0.0);
    Some(Deflated {
        dsr: psr(&m, expected_max),
        sharpe: m.sharpe,
        expected_max,
        trials,
        variance,
    })
}

/// "24 cells tried", or how many of them had no Sharpe (docs §18.4).
fn trials_text(trials: usize, cells: usize) -> String {
    if trials >= cells {
        format!("{trials} cells tried")
    } else {
        format!(
            "the {trials} cells with a Sharpe of {cells} tried; the others never traded in the ranked window"
        )
    }
}

fn num(x: f64) -> Value {
    if x.is_finite() { json!(x) } else { Value::Null }
}

impl Report {
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "cells": self.cells,
            "rank_by": self.rank_by,
            "ranked_out_of_sample": self.out_of_sample,
            "top": self.top.iter().map(|r| json!({"cell": r.cell, "params": r.params, "symbol": r.symbol,
                "score": num(r.score), "in_sample": r.in_sample.map(num)})).collect::<Vec<_>>(),
            "deflated_sharpe": self.deflated.as_ref().map(|d| json!({"dsr": num(d.dsr), "sharpe_per_period": num(d.sharpe),
                "expected_max_sharpe": num(d.expected_max), "trials": d.trials, "sharpe_variance": num(d.variance)})),
            "heatmap": self.heatmap.as_ref().map(Heatmap::to_json),
            "empty_cells": self.empty_cells,
        });
        // Only a CV plan's report has the key: others read as before.
        if let (Some(cv), Some(m)) = (&self.cv, v.as_object_mut()) {
            m.insert("cv".into(), cv_json(cv));
        }
        v
    }

    /// The report as text: the ranking, the deflated Sharpe, the heatmap.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let basis = if self.out_of_sample {
            "out-of-sample"
        } else {
            "in-sample (no split: give `split` to rank out-of-sample)"
        };
        out.push_str(&format!(
            "{} cells ranked by {} {basis}\n",
            self.cells, self.rank_by
        ));
        for (k, r) in self.top.iter().enumerate() {
            let is = r
                .in_sample
                .map(|v| format!("  (in-sample {v:.4})"))
                .unwrap_or_default();
            out.push_str(&format!(
                "{:>2}. {:.4}  {} {}{is}\n",
                k + 1,
                r.score,
                r.params,
                r.symbol
            ));
        }
        if let Some(d) = &self.deflated {
            out.push_str(&format!(
                "best cell's deflated Sharpe: {:.3} (per-period Sharpe {:.4} against {:.4}, the expected best of {})\n",
                d.dsr,
                d.sharpe,
                d.expected_max,
                trials_text(d.trials, self.cells)
            ));
        }
        if let Some(cv) = &self.cv {
            out.push_str(&cv_text(cv));
        }
        if self.empty_cells > 0 {
            out.push_str(&format!(
                "{} cells had a window without bars (NaN rows)\n",
                self.empty_cells
            ));
        }
        if let Some(h) = &self.heatmap {
            out.push_str(&h.braille());
        }
        out
    }
}

fn cv_json(cv: &CvSummary) -> Value {
    let sel = &cv.selected_path_sharpe;
    json!({"kind": cv.kind, "splits": cv.splits, "paths": cv.paths, "pbo": num(cv.pbo),
        "logits": cv.logits.iter().map(|v| num(*v)).collect::<Vec<_>>(),
        "selected_path_sharpe": sel.iter().map(|v| num(*v)).collect::<Vec<_>>(),
        "selected_path_sharpe_mean": num(sel.iter().sum::<f64>() / sel.len().max(1) as f64)})
}

/// The PBO line and the selection's paths.
fn cv_text(cv: &CvSummary) -> String {
    let sel = &cv.selected_path_sharpe;
    let (lo, hi) = sel
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(*v), b.max(*v))
        });
    let mean = sel.iter().sum::<f64>() / sel.len().max(1) as f64;
    let what = if cv.kind == "cpcv" {
        format!("{} CPCV splits, {} paths", cv.splits, cv.paths)
    } else {
        format!("{} purged folds", cv.splits)
    };
    format!(
        "probability of backtest overfitting: {:.3} over {what} (the in-sample best at or below the out-of-sample median); choosing the in-sample best earns a Sharpe of {mean:.3} (paths {lo:.3} to {hi:.3})\n",
        cv.pbo
    )
}

impl Report {
    /// `heatmap.svg` and `heatmap.png` in `dir`, the paths written; a
    /// chart that cannot be drawn is left out (the text keeps the braille).
    pub fn write_heatmaps(&self, dir: &std::path::Path) -> Vec<String> {
        let Some(h) = &self.heatmap else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut put = |name: &str, bytes: Option<Vec<u8>>| {
            let p = dir.join(name);
            let ok = bytes.is_some_and(|b| {
                crate::fsio::write_atomic(&p, &b, crate::fsio::Durability::ProcessCrash).is_ok()
            });
            if ok {
                out.push(p.display().to_string());
            }
        };
        put("heatmap.svg", h.svg().ok().map(String::into_bytes));
        put("heatmap.png", h.png().ok());
        out
    }
}

/// Best-so-far label of a cell (`fast=5 slow=30 AAPL`).
pub fn label(plan: &Plan, cell: usize) -> String {
    cell_label(plan, cell)
}
