//! Running a backtest's optimizer (docs §7.4.2): each rebalance's signal
//! set becomes optimiser weights computed on the trailing window of closes
//! up to the bar before. Apart from `optimizer.rs`, which holds the
//! validated spec the config carries, so that the config does not depend
//! on the engine's panel.

use super::engine::Panel;
use super::optimizer::{MIN_RETURNS, OptimizerRecord, OptimizerSpec, Rebalance};
use crate::research::data::{Bars, PriceSeries};
use crate::research::portfolio;

/// Replaces `targets` (row-major, the panel's bars × codes) with optimiser
/// weights; `history` is the series with the history loaded before the
/// range (or the range itself), whose closes give the trailing windows.
pub(crate) fn apply(
    spec: &OptimizerSpec,
    panel: &Panel,
    targets: &mut [f64],
    history: &[PriceSeries],
    ffill_limit: usize,
) -> OptimizerRecord {
    let (n, k) = (panel.n(), panel.k());
    let bars: Vec<&Bars> = history.iter().map(|s| &s.bars).collect();
    let hist = Panel::new(&panel.codes, &bars, ffill_limit);
    let mut record = OptimizerRecord {
        method: spec.method.as_str(),
        lookback: spec.lookback,
        rebalance_bars: spec.rebalance_bars,
        rebalances: Vec::new(),
        short_signals_dropped: 0,
    };
    // (signal set, its weights, the bar they were computed on)
    let mut current: Option<(Vec<bool>, Vec<f64>, usize)> = None;
    for t in 0..n {
        let row = &mut targets[t * k..(t + 1) * k];
        record.short_signals_dropped += row.iter().filter(|x| **x < 0.0).count();
        let chosen: Vec<bool> = row.iter().map(|x| *x > 0.0).collect();
        if !chosen.iter().any(|c| *c) {
            row.iter_mut().for_each(|x| *x = 0.0);
            current = None;
            continue;
        }
        let stale = match &current {
            None => true,
            Some((set, _, at)) => *set != chosen || t - at >= spec.rebalance_bars,
        };
        if stale {
            // History rows before this bar's date: the window's closes.
            let at = hist.dates.partition_point(|d| *d < panel.dates[t]);
            let (weights, fallback) = weights_at(spec, &hist, at, &chosen);
            record.rebalances.push(Rebalance {
                date: panel.dates[t],
                weights: panel
                    .codes
                    .iter()
                    .zip(&weights)
                    .filter(|(_, w)| **w != 0.0)
                    .map(|(c, w)| (c.clone(), serde_json::json!(w)))
                    .collect(),
                fallback,
            });
            current = Some((chosen, weights, t));
        }
        if let Some((_, w, _)) = &current {
            row.copy_from_slice(w);
        }
    }
    record
}

/// The weights for the `chosen` codes from the `lookback` returns of the
/// closes of history rows `at − lookback − 1 ..= at − 1` (row `at` is the
/// bar being traded), with why equal weights were used when they were.
fn weights_at(
    spec: &OptimizerSpec,
    hist: &Panel,
    at: usize,
    chosen: &[bool],
) -> (Vec<f64>, Option<String>) {
    let k = hist.k();
    let idx: Vec<usize> = (0..k).filter(|s| chosen[*s]).collect();
    let equal = |why: String| {
        let w = 1.0 / idx.len() as f64;
        let mut out = vec![0.0; k];
        idx.iter().for_each(|s| out[*s] = w);
        (out, Some(why))
    };
    if idx.len() == 1 {
        let mut out = vec![0.0; k];
        out[idx[0]] = 1.0;
        return (out, None);
    }
    let first = at.saturating_sub(spec.lookback + 1);
    let mut columns: Vec<Vec<f64>> = vec![Vec::with_capacity(spec.lookback); idx.len()];
    for row in first + 1..at {
        let pair = |s: usize| (hist.close[(row - 1) * k + s], hist.close[row * k + s]);
        if idx.iter().all(|s| {
            let (a, b) = pair(*s);
            a.is_finite() && b.is_finite() && a > 0.0
        }) {
            for (c, s) in columns.iter_mut().zip(&idx) {
                let (a, b) = pair(*s);
                c.push(b / a - 1.0);
            }
        }
    }
    let days = columns[0].len();
    if days < MIN_RETURNS.max(idx.len() + 1) {
        return equal(format!(
            "{days} daily returns before the bar for {} names",
            idx.len()
        ));
    }
    let names: Vec<String> = idx.iter().map(|s| hist.codes[*s].clone()).collect();
    match portfolio::optimize(&columns, &names, &spec.options()) {
        Ok(p) => {
            let mut out = vec![0.0; k];
            for (s, w) in idx.iter().zip(&p.weights) {
                out[*s] = *w;
            }
            (out, None)
        }
        Err(e) => equal(e.to_string()),
    }
}
