//! Exposure and turnover from the executed weights.

use super::{PositionStats, PositionsInput};

/// Gross, net, long and short exposure, turnover and the weight columns
/// (largest mean absolute weight first). A NaN weight counts as 0.
pub(crate) fn stats(p: &PositionsInput, ppy: f64) -> PositionStats {
    let k = p.codes.len();
    let n = p.weights.len();
    let mut s = PositionStats::default();
    let mut prev: Vec<f64> = vec![0.0; k];
    let mut mean_abs = vec![0.0; k];
    let mut cols: Vec<Vec<f64>> = vec![Vec::with_capacity(n); k];
    for row in &p.weights {
        let (mut long, mut short, mut turn) = (0.0, 0.0, 0.0);
        for (j, w) in row.iter().enumerate() {
            let w = if w.is_finite() { *w } else { 0.0 };
            if w > 0.0 {
                long += w;
            } else {
                short += w;
            }
            if let (Some(pv), Some(m), Some(c)) =
                (prev.get_mut(j), mean_abs.get_mut(j), cols.get_mut(j))
            {
                turn += (w - *pv).abs();
                *pv = w;
                *m += w.abs();
                c.push(w);
            }
        }
        s.long.push(long);
        s.short.push(short);
        s.gross.push(long - short);
        s.net.push(long + short);
        s.turnover.push(turn / 2.0);
    }
    // The first row's turnover is the initial buy, not trading: it stays in
    // the daily series but not in the annual figure.
    let traded: f64 = s.turnover.iter().skip(1).sum();
    s.annual_turnover = if n > 1 {
        traded / (n - 1) as f64 * ppy
    } else {
        0.0
    };
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|a, b| {
        let (x, y) = (mean_abs.get(*a), mean_abs.get(*b));
        y.partial_cmp(&x).unwrap_or(std::cmp::Ordering::Equal)
    });
    for j in order {
        if let (Some(c), Some(w)) = (p.codes.get(j), cols.get_mut(j)) {
            s.codes.push(c.clone());
            s.weights.push(std::mem::take(w));
        }
    }
    s
}
