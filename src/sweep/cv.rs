//! Purged k-fold and CPCV splits in a sweep (docs §18.9), through
//! [`crate::research::validation`].
//!
//! The observations are the weekdays of `base`'s range (the plan is fixed
//! before any price is read, so it cannot know the exchange's holidays).
//! They are cut into groups, split, purged and embargoed by the splitter;
//! the weekdays whose membership (test, train or dropped) is the same in
//! every split form pieces, each a window `cv_<group>_<piece>`. A cell runs
//! once over the whole range (window `cv_full`, continuous: no piece
//! re-enters its positions) and each piece's row is that run's slice, so a
//! split's in- and out-of-sample returns are the sums of its pieces'
//! power sums (`rows::PowerSums`).

use chrono::{Datelike, NaiveDate, Weekday};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::rows::PowerSums;
use crate::research::validation::{self, Embargo};

/// The most splits a sweep's CPCV may make: each is a PBO trial.
pub const MAX_SWEEP_SPLITS: usize = 1_000;

/// Bars a year the report annualises CV Sharpe ratios by (daily bars).
pub const BARS_PER_YEAR: f64 = 252.0;

/// The name of the whole-range window a CV plan runs first.
pub const FULL: &str = "cv_full";

/// One split: its test groups and the pieces (window indices) it trains on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CvSplit {
    pub test_groups: Vec<usize>,
    pub train: Vec<usize>,
}

/// A plan's purged k-fold or CPCV: what the report reads its rows by.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CvLayout {
    /// `purged_kfold` or `cpcv`.
    pub kind: String,
    pub groups: usize,
    pub test_groups: usize,
    pub embargo_days: usize,
    pub horizon_days: usize,
    /// Each group's pieces (window indices).
    pub group_windows: Vec<Vec<usize>>,
    pub splits: Vec<CvSplit>,
    /// `paths[p][g]`: the split whose test of group g is path p's segment g.
    pub paths: Vec<Vec<usize>>,
}

/// What is wrong with a CV split: (key, message) for the spec's issues.
pub type Issue = (String, String);

/// A window a CV split makes (the spec makes it a `spec::Window`).
#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    pub name: String,
    pub start: NaiveDate,
    pub end: NaiveDate,
}

/// Reads `{"purged_kfold": {"folds", "embargo_days", "horizon_days"}}` or
/// `{"cpcv": {"groups", "test_groups", "embargo_days", "horizon_days"}}`
/// over `start..=end`: the windows (`cv_full` first, then the pieces) and
/// the layout.
pub fn parse(
    kind: &str,
    v: &Value,
    (start, end): (NaiveDate, NaiveDate),
) -> Result<(Vec<Piece>, CvLayout), Vec<Issue>> {
    let key = format!("split.{kind}");
    let Some(m) = v.as_object() else {
        return Err(vec![(key, usage(kind).into())]);
    };
    let (groups, test_groups, keys) = if kind == "cpcv" {
        let g = whole(m, &key, "groups", None);
        let k = whole(m, &key, "test_groups", None);
        (
            g,
            k,
            &["groups", "test_groups", "embargo_days", "horizon_days"][..],
        )
    } else {
        let g = whole(m, &key, "folds", None);
        (g, Ok(1), &["folds", "embargo_days", "horizon_days"][..])
    };
    let embargo = whole(m, &key, "embargo_days", Some(0));
    let horizon = whole(m, &key, "horizon_days", Some(0));
    let mut issues: Vec<Issue> = m
        .keys()
        .filter(|k| !keys.contains(&k.as_str()))
        .map(|k| {
            (
                format!("{key}.{k}"),
                format!("unknown key; the keys are {}", keys.join(", ")),
            )
        })
        .collect();
    let (groups, test_groups, embargo, horizon) = match (groups, test_groups, embargo, horizon) {
        (Ok(g), Ok(k), Ok(e), Ok(h)) if issues.is_empty() => (g, k, e, h),
        (g, k, e, h) => {
            issues.extend([g, k, e, h].into_iter().filter_map(Result::err));
            return Err(issues);
        }
    };
    if validation::combinations_count(groups, test_groups).is_none_or(|c| c > MAX_SWEEP_SPLITS) {
        return Err(vec![(
            key,
            format!(
                "C({groups}, {test_groups}) splits is more than the {MAX_SWEEP_SPLITS} a sweep makes; choose fewer groups or test groups"
            ),
        )]);
    }
    let days = weekdays(start, end);
    let ends = validation::label_ends(days.len(), horizon);
    let splits = validation::cpcv(&ends, groups, test_groups, Embargo::Observations(embargo))
        .map_err(|e| {
            vec![(
                key.clone(),
                format!("over the {} weekdays of base's range: {e}", days.len()),
            )]
        })?;
    Ok(layout(kind, &days, &splits, (embargo, horizon)))
}

fn usage(kind: &str) -> &'static str {
    if kind == "cpcv" {
        "must be {\"groups\": 6, \"test_groups\": 2, \"embargo_days\": 5, \"horizon_days\": 0}"
    } else {
        "must be {\"folds\": 5, \"embargo_days\": 5, \"horizon_days\": 0}"
    }
}

/// A whole number from 0 to 10,000 at `m[name]`, or `default` when absent.
fn whole(
    m: &Map<String, Value>,
    key: &str,
    name: &str,
    default: Option<usize>,
) -> Result<usize, Issue> {
    match (m.get(name), default) {
        (None, Some(d)) => Ok(d),
        (Some(v), _) if v.as_u64().is_some_and(|n| n <= 10_000) => {
            Ok(v.as_u64().map_or(0, |n| n as usize))
        }
        _ => Err((
            format!("{key}.{name}"),
            "must be a whole number from 0 to 10000".into(),
        )),
    }
}

/// Monday to Friday from `start` to `end`, both included.
fn weekdays(start: NaiveDate, end: NaiveDate) -> Vec<NaiveDate> {
    start
        .iter_days()
        .take_while(|d| *d <= end)
        .filter(|d| !matches!(d.weekday(), Weekday::Sat | Weekday::Sun))
        .collect()
}

/// The pieces: runs of weekdays in one group with the same membership in
/// every split (0 dropped, 1 train, 2 test).
fn layout(
    kind: &str,
    days: &[NaiveDate],
    s: &validation::Splits,
    (embargo_days, horizon_days): (usize, usize),
) -> (Vec<Piece>, CvLayout) {
    let n = days.len();
    let mut state = vec![vec![0u8; s.splits.len()]; n];
    for (j, sp) in s.splits.iter().enumerate() {
        for (&i, mark) in sp
            .train
            .iter()
            .map(|i| (i, 1u8))
            .chain(sp.test.iter().map(|i| (i, 2u8)))
        {
            if let Some(slot) = state.get_mut(i).and_then(|v| v.get_mut(j)) {
                *slot = mark;
            }
        }
    }
    let first = (days.first().copied(), days.last().copied());
    let mut windows = Vec::new();
    if let (Some(a), Some(b)) = first {
        windows.push(Piece {
            name: FULL.into(),
            start: a,
            end: b,
        });
    }
    let mut group_windows = vec![Vec::new(); s.groups.len()];
    let mut piece_state: Vec<&[u8]> = Vec::new();
    for (g, r) in s.groups.iter().enumerate() {
        let mut i = r.start;
        while i < r.end {
            let here = state.get(i).map_or(&[][..], Vec::as_slice);
            let mut j = i + 1;
            while j < r.end && state.get(j).map(Vec::as_slice) == Some(here) {
                j += 1;
            }
            if let (Some(&a), Some(&b)) = (days.get(i), days.get(j - 1)) {
                group_windows[g].push(windows.len());
                windows.push(Piece {
                    name: format!("cv_{}_{}", g + 1, group_windows[g].len()),
                    start: a,
                    end: b,
                });
                piece_state.push(here);
            }
            i = j;
        }
    }
    let splits = s
        .splits
        .iter()
        .enumerate()
        .map(|(j, sp)| CvSplit {
            test_groups: sp.test_groups.clone(),
            // Pieces are numbered after `cv_full` (window 0).
            train: (0..piece_state.len())
                .filter(|&p| piece_state.get(p).and_then(|v| v.get(j)) == Some(&1))
                .map(|p| p + 1)
                .collect(),
        })
        .collect();
    let layout = CvLayout {
        kind: kind.into(),
        groups: s.groups.len(),
        test_groups: s.splits.first().map_or(1, |sp| sp.test_groups.len()),
        embargo_days,
        horizon_days,
        group_windows,
        splits,
        paths: s.paths.clone(),
    };
    (windows, layout)
}

/// Annualised Sharpe (√[`BARS_PER_YEAR`] × mean / std, ddof 1) of pooled
/// excess returns; 0 without dispersion, as a book that never moved.
pub fn sharpe(s: &PowerSums) -> f64 {
    s.moments().map_or(0.0, |m| m.sharpe * BARS_PER_YEAR.sqrt())
}

/// The sums over `windows` of one cell's rows, indexed by window.
pub fn pooled(sums: &[PowerSums], windows: &[usize]) -> PowerSums {
    let mut out = PowerSums::default();
    for w in windows {
        if let Some(s) = sums.get(*w) {
            out.add(s);
        }
    }
    out
}

impl CvLayout {
    /// The pieces split `s` tests.
    pub fn test_windows(&self, s: &CvSplit) -> Vec<usize> {
        s.test_groups
            .iter()
            .filter_map(|g| self.group_windows.get(*g))
            .flatten()
            .copied()
            .collect()
    }

    /// A cell's out-of-sample Sharpe on each fold (purged k-fold) or path
    /// (CPCV), from its rows' sums indexed by window.
    pub fn oos_sharpes(&self, sums: &[PowerSums]) -> Vec<f64> {
        if self.test_groups == 1 {
            return self
                .splits
                .iter()
                .map(|s| sharpe(&pooled(sums, &self.test_windows(s))))
                .collect();
        }
        self.paths
            .iter()
            .map(|path| {
                let mut acc = PowerSums::default();
                for (g, split) in path.iter().enumerate() {
                    // Segment g of the path: group g as `split` tests it.
                    if self
                        .splits
                        .get(*split)
                        .is_some_and(|s| s.test_groups.contains(&g))
                    {
                        acc.add(&pooled(
                            sums,
                            self.group_windows.get(g).map_or(&[], Vec::as_slice),
                        ));
                    }
                }
                sharpe(&acc)
            })
            .collect()
    }

    /// The mean of [`CvLayout::oos_sharpes`]: a cell's score.
    pub fn score(&self, sums: &[PowerSums]) -> f64 {
        let v = self.oos_sharpes(sums);
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    }

    /// A cell's mean in-sample Sharpe over the splits.
    pub fn in_sample(&self, sums: &[PowerSums]) -> f64 {
        let n = self.splits.len().max(1) as f64;
        self.splits
            .iter()
            .map(|s| sharpe(&pooled(sums, &s.train)))
            .sum::<f64>()
            / n
    }
}

/// PBO over parameter sets and the selection's paths (docs §18.9).
#[derive(Clone, Debug, PartialEq)]
pub struct CvSummary {
    pub kind: String,
    pub splits: usize,
    pub paths: usize,
    pub pbo: f64,
    pub logits: Vec<f64>,
    /// Each path's annualised Sharpe when each split's in-sample winner
    /// trades the groups it tests.
    pub selected_path_sharpe: Vec<f64>,
}

/// `configs[c]`: parameter set c's sums by window, pooled over its units.
pub fn summarise(layout: &CvLayout, configs: &[Vec<PowerSums>]) -> Option<CvSummary> {
    let score =
        |ws: &[usize]| -> Vec<f64> { configs.iter().map(|c| sharpe(&pooled(c, ws))).collect() };
    let is: Vec<Vec<f64>> = layout.splits.iter().map(|s| score(&s.train)).collect();
    let oos: Vec<Vec<f64>> = layout
        .splits
        .iter()
        .map(|s| score(&layout.test_windows(s)))
        .collect();
    let p = validation::pbo_of_scores(&is, &oos)?;
    let selected_path_sharpe = layout
        .paths
        .iter()
        .map(|path| {
            let mut acc = PowerSums::default();
            for (g, split) in path.iter().enumerate() {
                let winner = p.winners.get(*split).and_then(|w| configs.get(*w));
                if let (Some(c), Some(ws)) = (winner, layout.group_windows.get(g)) {
                    acc.add(&pooled(c, ws));
                }
            }
            sharpe(&acc)
        })
        .collect();
    Some(CvSummary {
        kind: layout.kind.clone(),
        splits: layout.splits.len(),
        paths: layout.paths.len(),
        pbo: p.pbo,
        logits: p.logits,
        selected_path_sharpe,
    })
}
