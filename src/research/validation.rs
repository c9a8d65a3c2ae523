//! Cross-validation for series whose labels overlap (docs §18.9), after
//! López de Prado, *Advances in Financial Machine Learning* (2018), ch. 7
//! and 12. Observations are indices 0..n in time order; observation i's
//! label spans [i, label_end[i]] (an h-day forward return: i..i+h).
//!
//! - **Groups**: 0..n cut into N contiguous groups as `numpy.array_split`
//!   does (the first n mod N one longer).
//! - **Purge**: a training observation whose label interval overlaps
//!   (closed intervals) a test observation's is dropped: its label would
//!   have seen the test period (the book's `getTrainTimes`).
//! - **Embargo**: each test group's interval is extended by `step`
//!   observations past its last label end (the book's `getEmbargoTimes`,
//!   capped at the last observation) before the purge, so training
//!   observations that start just after a test group are dropped too.
//! - **Purged k-fold**: the K groups one at a time as the test set.
//! - **CPCV(N, k)**: every choice of k of the N groups as the test set,
//!   C(N, k) splits in `itertools.combinations` order. Each group is tested
//!   in φ = k/N·C(N, k) = C(N−1, k−1) splits; backtest path p takes, for
//!   every group, the p-th split (in that order) testing it.
//!
//! The splitter knows nothing of sweeps or factors: indices in, index sets
//! out. [`pbo_of_scores`] is the probability of backtest overfitting over
//! any splits' in- and out-of-sample scores, with the rank convention of
//! [`crate::research::overfitting::pbo_cscv`].

use std::ops::Range;

/// The most splits CPCV may make (C(N, k)).
pub const MAX_SPLITS: usize = 100_000;

/// Fewest observations a group (a fold) may hold.
pub const MIN_PER_GROUP: usize = 2;

/// How far past a test group's last label the embargo reaches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Embargo {
    /// A number of observations (trading days for daily data).
    Observations(usize),
    /// A fraction of all observations, floored (`int(n · pct)`, the book's).
    Fraction(f64),
}

/// Why splits cannot be made.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ValidationError {
    #[error("need at least 2 groups (folds), got {0}")]
    TooFewGroups(usize),
    #[error("test groups must be from 1 to groups − 1 = {}, got {test_groups}", groups.saturating_sub(1))]
    TestGroups { groups: usize, test_groups: usize },
    #[error(
        "{n} observations make groups of fewer than {MIN_PER_GROUP} over {groups} groups; give at least {} observations or fewer groups",
        groups.saturating_mul(MIN_PER_GROUP)
    )]
    TooFewObservations { n: usize, groups: usize },
    #[error(
        "observation {index}'s label ends at {end}: a label ends at or after its own observation and before {n}"
    )]
    LabelEnd { index: usize, end: usize, n: usize },
    #[error("the embargo fraction must be in [0, 1), got {0}")]
    EmbargoFraction(f64),
    #[error(
        "C({groups}, {test_groups}) splits is more than {MAX_SPLITS}; choose fewer groups or test groups"
    )]
    TooManySplits { groups: usize, test_groups: usize },
    #[error(
        "split {split} (test groups {test_groups:?}) has no training observation left after the purge and embargo; shorten the horizon or the embargo, or use more groups"
    )]
    EmptyTrain {
        split: usize,
        test_groups: Vec<usize>,
    },
}

/// One train/test split, indices ascending.
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    /// The groups tested, ascending.
    pub test_groups: Vec<usize>,
    pub train: Vec<usize>,
    pub test: Vec<usize>,
}

/// Every split of a CPCV (or of a purged k-fold: CPCV(K, 1)) and its paths.
#[derive(Clone, Debug, PartialEq)]
pub struct Splits {
    pub groups: Vec<Range<usize>>,
    pub splits: Vec<Split>,
    /// `paths[p][g]`: the split whose test of group g is path p's segment g.
    pub paths: Vec<Vec<usize>>,
}

/// Label ends of an h-observation horizon: i + h, capped at the last
/// observation (whose labels the data cannot see past).
pub fn label_ends(n: usize, horizon: usize) -> Vec<usize> {
    let last = n.saturating_sub(1);
    (0..n)
        .map(|i| i.saturating_add(horizon).min(last))
        .collect()
}

/// Purged k-fold: each of `folds` contiguous folds tested once.
pub fn purged_kfold(
    label_end: &[usize],
    folds: usize,
    embargo: Embargo,
) -> Result<Vec<Split>, ValidationError> {
    Ok(cpcv(label_end, folds, 1, embargo)?.splits)
}

/// CPCV(`groups`, `test_groups`): all C(N, k) splits and the φ paths.
pub fn cpcv(
    label_end: &[usize],
    groups: usize,
    test_groups: usize,
    embargo: Embargo,
) -> Result<Splits, ValidationError> {
    let n = label_end.len();
    if groups < 2 {
        return Err(ValidationError::TooFewGroups(groups));
    }
    if test_groups == 0 || test_groups >= groups {
        return Err(ValidationError::TestGroups {
            groups,
            test_groups,
        });
    }
    if n / groups < MIN_PER_GROUP {
        return Err(ValidationError::TooFewObservations { n, groups });
    }
    if let Some((index, &end)) = label_end
        .iter()
        .enumerate()
        .find(|&(i, &e)| e < i || e >= n)
    {
        return Err(ValidationError::LabelEnd { index, end, n });
    }
    let step = match embargo {
        Embargo::Observations(d) => d,
        Embargo::Fraction(f) if f.is_finite() && (0.0..1.0).contains(&f) => {
            // Floored as the book's int(): f < 1 keeps it under n.
            (n as f64 * f).floor() as usize
        }
        Embargo::Fraction(f) => return Err(ValidationError::EmbargoFraction(f)),
    };
    if combinations_count(groups, test_groups).is_none_or(|c| c > MAX_SPLITS) {
        return Err(ValidationError::TooManySplits {
            groups,
            test_groups,
        });
    }
    let ranges = array_split(n, groups);
    // Each group's tested interval: its first observation to its last
    // label's end plus the embargo, capped at the last observation.
    let reach: Vec<(usize, usize)> = ranges
        .iter()
        .map(|r| {
            let end = label_end.get(r.clone()).into_iter().flatten().copied();
            let last = end.max().unwrap_or(r.start);
            (r.start, last.saturating_add(step).min(n - 1))
        })
        .collect();
    let mut splits = Vec::new();
    for (s, chosen) in Combinations::new(groups, test_groups).enumerate() {
        let mut test = Vec::new();
        for &g in &chosen {
            test.extend(ranges.get(g).cloned().unwrap_or_default());
        }
        let in_test = |i: usize| {
            chosen
                .iter()
                .any(|&g| ranges.get(g).is_some_and(|r| r.contains(&i)))
        };
        let train: Vec<usize> = (0..n)
            .filter(|&i| {
                !in_test(i)
                    && !chosen.iter().any(|&g| {
                        reach.get(g).is_some_and(|&(a, b)| {
                            i <= b && label_end.get(i).is_some_and(|&e| e >= a)
                        })
                    })
            })
            .collect();
        if train.is_empty() {
            return Err(ValidationError::EmptyTrain {
                split: s,
                test_groups: chosen,
            });
        }
        splits.push(Split {
            test_groups: chosen,
            train,
            test,
        });
    }
    let paths = assemble_paths(&splits, groups);
    Ok(Splits {
        groups: ranges,
        splits,
        paths,
    })
}

/// Path p, segment g: the p-th split (in split order) that tests group g.
fn assemble_paths(splits: &[Split], groups: usize) -> Vec<Vec<usize>> {
    let testing: Vec<Vec<usize>> = (0..groups)
        .map(|g| {
            splits
                .iter()
                .enumerate()
                .filter(|(_, s)| s.test_groups.contains(&g))
                .map(|(i, _)| i)
                .collect()
        })
        .collect();
    // Every group is tested equally often, φ = C(N−1, k−1).
    let phi = testing.first().map_or(0, Vec::len);
    (0..phi)
        .map(|p| {
            testing
                .iter()
                .map(|t| t.get(p).copied().unwrap_or(0))
                .collect()
        })
        .collect()
}

/// `numpy.array_split(arange(n), parts)` as ranges.
pub fn array_split(n: usize, parts: usize) -> Vec<Range<usize>> {
    let parts = parts.max(1);
    let (base, extra) = (n / parts, n % parts);
    let mut start = 0;
    (0..parts)
        .map(|p| {
            let len = base + usize::from(p < extra);
            let r = start..start + len;
            start += len;
            r
        })
        .collect()
}

/// C(n, k), `None` on overflow.
pub fn combinations_count(n: usize, k: usize) -> Option<usize> {
    if k > n {
        return Some(0);
    }
    let k = k.min(n - k);
    let mut c: usize = 1;
    for i in 0..k {
        // c · (n − i) / (i + 1) stays whole at every step.
        c = c.checked_mul(n - i)? / (i + 1);
    }
    Some(c)
}

/// k-subsets of 0..n in lexicographic order (`itertools.combinations`).
struct Combinations {
    n: usize,
    next: Option<Vec<usize>>,
}

impl Combinations {
    fn new(n: usize, k: usize) -> Self {
        Combinations {
            n,
            next: (k <= n).then(|| (0..k).collect()),
        }
    }
}

impl Iterator for Combinations {
    type Item = Vec<usize>;
    fn next(&mut self) -> Option<Vec<usize>> {
        let cur = self.next.take()?;
        let k = cur.len();
        let mut c = cur.clone();
        if let Some(i) = (0..k)
            .rev()
            .find(|&i| c.get(i).is_some_and(|&v| v < self.n - k + i))
        {
            let v = c.get(i).copied().unwrap_or(0) + 1;
            for (t, slot) in c.iter_mut().enumerate().skip(i) {
                *slot = v + (t - i);
            }
            self.next = Some(c);
        }
        Some(cur)
    }
}

/// The probability of backtest overfitting over splits (Bailey et al.).
#[derive(Clone, Debug, PartialEq)]
pub struct SplitPbo {
    /// Share of splits whose logit λ ≤ 0: the in-sample best at or below
    /// the out-of-sample median.
    pub pbo: f64,
    /// Each split's λ = ln(ω / (1 − ω)), ω the winner's out-of-sample
    /// relative rank.
    pub logits: Vec<f64>,
    /// Each split's in-sample winner (first on ties).
    pub winners: Vec<usize>,
}

/// PBO from each split's per-configuration scores in and out of sample
/// (higher better; NaN ranks lowest). The winner's rank among the N
/// configurations counts ties as half, ω = (1 + below + (ties − 1)/2) /
/// (N + 1), as `pbo_cscv` does. `None` for no split or fewer than 2
/// configurations.
pub fn pbo_of_scores(in_sample: &[Vec<f64>], out_of_sample: &[Vec<f64>]) -> Option<SplitPbo> {
    let key = |v: f64| if v.is_nan() { f64::NEG_INFINITY } else { v };
    let mut logits = Vec::new();
    let mut winners = Vec::new();
    for (is, oos) in in_sample.iter().zip(out_of_sample) {
        let n = is.len();
        if n < 2 || oos.len() != n {
            return None;
        }
        let mut best = 0;
        for (j, &v) in is.iter().enumerate() {
            if key(v) > key(is.get(best).copied().unwrap_or(f64::NAN)) {
                best = j;
            }
        }
        let w = key(oos.get(best).copied().unwrap_or(f64::NAN));
        let below = oos.iter().filter(|&&v| key(v) < w).count();
        let ties = oos.iter().filter(|&&v| key(v) == w).count();
        let omega = (1.0 + below as f64 + ties.saturating_sub(1) as f64 / 2.0) / (n as f64 + 1.0);
        logits.push((omega / (1.0 - omega)).ln());
        winners.push(best);
    }
    if logits.is_empty() {
        return None;
    }
    Some(SplitPbo {
        pbo: logits.iter().filter(|l| **l <= 0.0).count() as f64 / logits.len() as f64,
        logits,
        winners,
    })
}

/// Per-period Sharpe (mean / std, ddof 1) of `x` at `idx`; 0 under two
/// values or without dispersion (a book that never moved has none).
pub fn sharpe_at(x: &[f64], idx: &[usize]) -> f64 {
    let v: Vec<f64> = idx.iter().filter_map(|&i| x.get(i).copied()).collect();
    if v.len() < 2 {
        return 0.0;
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / (v.len() - 1) as f64;
    if var > 0.0 { m / var.sqrt() } else { 0.0 }
}

/// CPCV's reading of configurations' returns.
#[derive(Clone, Debug, PartialEq)]
pub struct CpcvPbo {
    pub pbo: SplitPbo,
    /// `path_sharpe[c][p]`: configuration c's per-period Sharpe on path p.
    pub path_sharpe: Vec<Vec<f64>>,
    /// Per configuration, the mean over paths.
    pub mean_oos_sharpe: Vec<f64>,
    /// Per path, the Sharpe of choosing the in-sample winner: segment g
    /// holds the returns of the winner of the split that path tests g in.
    pub selected_path_sharpe: Vec<f64>,
}

/// PBO and the paths' Sharpe ratios of `columns` (one return series per
/// configuration, each as long as the observations split) under `splits`;
/// `None` for fewer than 2 configurations or a column of another length.
pub fn pbo_cpcv(columns: &[Vec<f64>], splits: &Splits) -> Option<CpcvPbo> {
    let n = splits.groups.last().map_or(0, |r| r.end);
    if columns.len() < 2 || columns.iter().any(|c| c.len() != n) {
        return None;
    }
    let score = |idx: &[usize]| -> Vec<f64> { columns.iter().map(|c| sharpe_at(c, idx)).collect() };
    let is: Vec<Vec<f64>> = splits.splits.iter().map(|s| score(&s.train)).collect();
    let oos: Vec<Vec<f64>> = splits.splits.iter().map(|s| score(&s.test)).collect();
    let pbo = pbo_of_scores(&is, &oos)?;
    // A path's segment g is group g tested: for returns that no split
    // fitted, every path is the whole series (what differs is the
    // selection, below).
    let path_idx: Vec<Vec<usize>> = splits
        .paths
        .iter()
        .map(|_| splits.groups.iter().flat_map(Clone::clone).collect())
        .collect();
    let path_sharpe: Vec<Vec<f64>> = columns
        .iter()
        .map(|c| path_idx.iter().map(|idx| sharpe_at(c, idx)).collect())
        .collect();
    let mean_oos_sharpe = path_sharpe
        .iter()
        .map(|p| p.iter().sum::<f64>() / p.len().max(1) as f64)
        .collect();
    let selected_path_sharpe = splits
        .paths
        .iter()
        .map(|path| {
            let mut x = Vec::with_capacity(n);
            for (g, &s) in path.iter().enumerate() {
                let col = pbo.winners.get(s).and_then(|&w| columns.get(w));
                if let (Some(col), Some(r)) = (col, splits.groups.get(g)) {
                    x.extend(col.get(r.clone()).unwrap_or(&[]));
                }
            }
            sharpe_at(&x, &(0..x.len()).collect::<Vec<_>>())
        })
        .collect();
    Some(CpcvPbo {
        pbo,
        path_sharpe,
        mean_oos_sharpe,
        selected_path_sharpe,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_split_as_numpy_does() {
        let r = array_split(10, 3);
        assert_eq!(r, vec![0..4, 4..7, 7..10]);
        assert_eq!(combinations_count(6, 2), Some(15));
        assert_eq!(combinations_count(60, 30), Some(118_264_581_564_861_424));
        let c: Vec<Vec<usize>> = Combinations::new(4, 2).collect();
        assert_eq!(
            c,
            vec![
                vec![0, 1],
                vec![0, 2],
                vec![0, 3],
                vec![1, 2],
                vec![1, 3],
                vec![2, 3]
            ]
        );
    }

    /// 12 observations, 3-day labels (i..i+2), 3 folds of 4, embargo 1:
    /// fold 4..8 tests labels reaching 9, embargoed to 10; training
    /// labels ending at or after 4 (starts 2, 3) are purged, and starts up
    /// to 10.
    #[test]
    fn a_fold_by_hand() {
        let e = label_ends(12, 2);
        let s = purged_kfold(&e, 3, Embargo::Observations(1)).unwrap();
        assert_eq!(s[1].test, vec![4, 5, 6, 7]);
        assert_eq!(s[1].train, vec![0, 1, 11]);
        assert_eq!(s[0].train, vec![7, 8, 9, 10, 11]);
        assert_eq!(s[2].train, vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn cpcv_paths_cover_each_group_once_per_path() {
        let e = label_ends(60, 3);
        let s = cpcv(&e, 6, 2, Embargo::Fraction(0.02)).unwrap();
        assert_eq!(s.splits.len(), 15);
        assert_eq!(s.paths.len(), 5);
        let mut used = std::collections::HashSet::new();
        for p in &s.paths {
            for (g, &split) in p.iter().enumerate() {
                assert!(s.splits[split].test_groups.contains(&g));
                assert!(used.insert((g, split)), "each (group, split) once");
            }
        }
        assert_eq!(used.len(), 6 * 5);
    }

    #[test]
    fn bad_parameters_are_typed() {
        let e = label_ends(20, 0);
        assert_eq!(
            cpcv(&e, 1, 1, Embargo::Observations(0)),
            Err(ValidationError::TooFewGroups(1))
        );
        assert!(matches!(
            cpcv(&e, 4, 4, Embargo::Observations(0)),
            Err(ValidationError::TestGroups { .. })
        ));
        assert!(matches!(
            cpcv(&e, 11, 2, Embargo::Observations(0)),
            Err(ValidationError::TooFewObservations { n: 20, groups: 11 })
        ));
        assert!(matches!(
            cpcv(&[0, 0, 2, 3], 2, 1, Embargo::Observations(0)),
            Err(ValidationError::LabelEnd { .. })
        ));
        assert!(matches!(
            cpcv(&e, 4, 1, Embargo::Fraction(1.0)),
            Err(ValidationError::EmbargoFraction(_))
        ));
        let long = label_ends(4000, 0);
        assert!(matches!(
            cpcv(&long, 40, 20, Embargo::Observations(0)),
            Err(ValidationError::TooManySplits { .. })
        ));
        // A 10-day horizon over groups of 5 purges all training data.
        assert!(matches!(
            purged_kfold(&label_ends(10, 9), 2, Embargo::Observations(0)),
            Err(ValidationError::EmptyTrain { .. })
        ));
    }

    #[test]
    fn pbo_reads_the_winners_out_of_sample_rank() {
        // The in-sample best is the out-of-sample worst, then the best.
        let is = vec![vec![3.0, 2.0, 1.0], vec![3.0, 2.0, 1.0]];
        let oos = vec![vec![0.0, 1.0, 2.0], vec![2.0, 1.0, 0.0]];
        let p = pbo_of_scores(&is, &oos).unwrap();
        assert_eq!(p.winners, vec![0, 0]);
        assert!((p.logits[0] - (0.25f64 / 0.75).ln()).abs() < 1e-15);
        assert!((p.logits[1] - 3f64.ln()).abs() < 1e-15);
        assert_eq!(p.pbo, 0.5);
        assert!(pbo_of_scores(&[vec![1.0]], &[vec![1.0]]).is_none());
    }

    /// A configuration with a planted edge wins in sample and out: PBO 0,
    /// and the selection's paths earn its Sharpe.
    #[test]
    fn pbo_cpcv_with_an_edge() {
        let mut rng = crate::research::seeded::SplitMix64::new(5);
        let cols: Vec<Vec<f64>> = (0..20)
            .map(|j| {
                let mu = if j == 3 { 0.004 } else { 0.0 };
                (0..600).map(|_| mu + 0.01 * rng.normal()).collect()
            })
            .collect();
        let s = cpcv(&label_ends(600, 0), 6, 2, Embargo::Observations(5)).unwrap();
        let r = pbo_cpcv(&cols, &s).unwrap();
        assert_eq!(r.pbo.logits.len(), 15);
        assert_eq!(r.pbo.pbo, 0.0);
        assert_eq!(r.path_sharpe[3].len(), 5);
        let best = r.mean_oos_sharpe[3];
        assert!(r.mean_oos_sharpe.iter().all(|&v| v <= best));
        assert!(
            r.selected_path_sharpe
                .iter()
                .all(|&v| (v - best).abs() < 1e-12)
        );
    }
}
