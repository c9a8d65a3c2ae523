//! The return distribution at each frequency: compounded period returns,
//! their quantiles (numpy's linear rule) and a histogram over equal bins
//! from the smallest to the largest.

use chrono::NaiveDate;

use super::prep::{Group, compound_runs, runs};
use super::{Distribution, Period};
use crate::research::stats::quantile_sorted;

const PROBS: [f64; 7] = [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99];

/// The distributions by day, week, month, quarter and year.
pub(crate) fn all(dates: &[NaiveDate], r: &[f64], bins: usize) -> Vec<Distribution> {
    let mut out = vec![one(Period::Day, r.to_vec(), bins)];
    for (p, g) in [
        (Period::Week, Group::Week),
        (Period::Month, Group::Month),
        (Period::Quarter, Group::Quarter),
        (Period::Year, Group::Year),
    ] {
        out.push(one(p, compound_runs(r, &runs(dates, g)), bins));
    }
    out
}

fn one(period: Period, mut v: Vec<f64>, bins: usize) -> Distribution {
    v.sort_by(f64::total_cmp);
    let quantiles = if v.is_empty() {
        Vec::new()
    } else {
        PROBS
            .iter()
            .map(|p| (*p, quantile_sorted(&v, *p)))
            .collect()
    };
    let (edges, counts) = histogram(&v, bins.max(1));
    Distribution {
        period,
        count: v.len(),
        quantiles,
        edges,
        counts,
    }
}

/// Equal-width bins over [min, max] of sorted values; the last bin holds
/// its right edge (numpy's `histogram`).
fn histogram(sorted: &[f64], bins: usize) -> (Vec<f64>, Vec<usize>) {
    let (Some(lo), Some(hi)) = (sorted.first(), sorted.last()) else {
        return (Vec::new(), Vec::new());
    };
    let (lo, hi) = if hi > lo {
        (*lo, *hi)
    } else {
        (lo - 0.5, hi + 0.5)
    };
    let width = (hi - lo) / bins as f64;
    let edges: Vec<f64> = (0..=bins).map(|i| lo + width * i as f64).collect();
    let mut counts = vec![0usize; bins];
    for x in sorted {
        let k = (((x - lo) / width) as usize).min(bins - 1);
        if let Some(c) = counts.get_mut(k) {
            *c += 1;
        }
    }
    (edges, counts)
}
