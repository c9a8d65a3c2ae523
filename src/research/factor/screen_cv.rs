//! Purged k-fold and CPCV for a screen (docs §17.10), through
//! [`crate::research::validation`]: how each factor's rank IC holds out of
//! sample, and the probability that choosing the best in-sample factor
//! overfits (PBO).

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::research::validation::{self, Embargo, Splits, ValidationError};

/// The most splits a screen's CPCV may make: each is a PBO trial.
pub const MAX_SCREEN_SPLITS: usize = 1_000;

/// A screen's `split`: `{"purged_kfold": {"folds": K, "embargo_days": d}}`
/// or `{"cpcv": {"groups": N, "test_groups": k, "embargo_days": d}}`, the
/// sweep's keys (docs §18.9); `horizon_days` defaults to the rank horizon.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ScreenSplit {
    PurgedKfold {
        folds: usize,
        #[serde(default)]
        embargo_days: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        horizon_days: Option<usize>,
    },
    Cpcv {
        groups: usize,
        test_groups: usize,
        #[serde(default)]
        embargo_days: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        horizon_days: Option<usize>,
    },
}

/// Why a screen's split cannot be made.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SplitError {
    #[error("split.{kind}: {source}")]
    Invalid {
        kind: &'static str,
        source: ValidationError,
    },
    #[error(
        "split.{kind}: C({groups}, {test_groups}) splits is more than the {max} a screen makes; choose fewer groups or test groups"
    )]
    TooManySplits {
        kind: &'static str,
        groups: usize,
        test_groups: usize,
        max: usize,
    },
    #[error(
        "split.{kind}: {n} scored dates at the rank horizon {horizon} cannot be split: {source}"
    )]
    Dates {
        kind: &'static str,
        n: usize,
        horizon: usize,
        source: ValidationError,
    },
}

/// In- and out-of-sample rank IC of one factor on one split.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SplitIc {
    #[serde(deserialize_with = "nan_null::f64")]
    pub in_sample_mean: f64,
    #[serde(deserialize_with = "nan_null::f64")]
    pub in_sample_ir: f64,
    #[serde(deserialize_with = "nan_null::f64")]
    pub out_of_sample_mean: f64,
    #[serde(deserialize_with = "nan_null::f64")]
    pub out_of_sample_ir: f64,
}

/// One factor under the split.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FactorValidation {
    pub name: String,
    /// Per split, in split order (empty for a factor the screen could not
    /// score).
    pub splits: Vec<SplitIc>,
    /// Out-of-sample mean rank IC: one value for a purged k-fold (each
    /// date tested once), one per backtest path for CPCV.
    #[serde(deserialize_with = "nan_null::vec")]
    pub out_of_sample_rank_ic: Vec<f64>,
    /// The mean of `out_of_sample_rank_ic`.
    #[serde(deserialize_with = "nan_null::f64")]
    pub out_of_sample_mean: f64,
    /// Share of splits whose in- and out-of-sample mean rank ICs have the
    /// same sign (of those where both are defined and non-zero).
    #[serde(deserialize_with = "nan_null::f64")]
    pub sign_agreement: f64,
}

/// A screen's purged k-fold or CPCV reading.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScreenValidation {
    /// `purged_kfold` or `cpcv`.
    pub kind: String,
    pub groups: usize,
    pub test_groups: usize,
    pub embargo_days: usize,
    pub horizon_days: usize,
    /// Scored dates at the rank horizon (the observations split).
    pub observations: usize,
    pub splits: usize,
    pub paths: usize,
    /// In the screen's factor order.
    pub factors: Vec<FactorValidation>,
    /// Probability that the best in-sample factor (by mean rank IC) ranks
    /// at or below the out-of-sample median; NaN under 2 scored factors.
    #[serde(deserialize_with = "nan_null::f64")]
    pub pbo: f64,
    /// Each split's logit λ.
    #[serde(deserialize_with = "nan_null::vec")]
    pub logits: Vec<f64>,
    /// Each split's in-sample best factor (an index into the factors).
    pub winners: Vec<usize>,
    /// Per backtest path (one for a purged k-fold), the mean rank IC of
    /// choosing: each group's dates scored by the factor that won in
    /// sample on the split the path tests the group in, in the direction
    /// it won in.
    #[serde(default, deserialize_with = "nan_null::vec")]
    pub selected_path_rank_ic: Vec<f64>,
}

impl ScreenSplit {
    /// `purged_kfold` or `cpcv`.
    pub fn kind(&self) -> &'static str {
        match self {
            ScreenSplit::PurgedKfold { .. } => "purged_kfold",
            ScreenSplit::Cpcv { .. } => "cpcv",
        }
    }

    /// (groups, test groups, embargo, horizon) with the horizon defaulted.
    fn params(&self, rank_horizon: usize) -> (usize, usize, usize, usize) {
        match *self {
            ScreenSplit::PurgedKfold {
                folds,
                embargo_days,
                horizon_days,
            } => (folds, 1, embargo_days, horizon_days.unwrap_or(rank_horizon)),
            ScreenSplit::Cpcv {
                groups,
                test_groups,
                embargo_days,
                horizon_days,
            } => (
                groups,
                test_groups,
                embargo_days,
                horizon_days.unwrap_or(rank_horizon),
            ),
        }
    }

    /// What can be refused before any factor is scored: the group counts
    /// and the number of splits.
    pub fn check(&self) -> Result<(), SplitError> {
        let kind = self.kind();
        let (groups, test_groups, _, _) = self.params(0);
        let invalid = |source| SplitError::Invalid { kind, source };
        if groups < 2 {
            return Err(invalid(ValidationError::TooFewGroups(groups)));
        }
        if test_groups == 0 || test_groups >= groups {
            return Err(invalid(ValidationError::TestGroups {
                groups,
                test_groups,
            }));
        }
        if validation::combinations_count(groups, test_groups).is_none_or(|c| c > MAX_SCREEN_SPLITS)
        {
            return Err(SplitError::TooManySplits {
                kind,
                groups,
                test_groups,
                max: MAX_SCREEN_SPLITS,
            });
        }
        Ok(())
    }
}

/// The split's observations: the dates any factor scored at the rank
/// horizon, ascending, and each one's row in `dates`.
fn observations(
    dates: &[NaiveDate],
    factors: &[RankIcSeries<'_>],
    rank_horizon: usize,
) -> (Vec<NaiveDate>, Vec<usize>) {
    let mut obs: Vec<NaiveDate> = factors
        .iter()
        .filter_map(|f| rank_series(f, rank_horizon))
        .flat_map(|(d, _)| d.iter().copied())
        .collect();
    obs.sort_unstable();
    obs.dedup();
    let rows = obs
        .iter()
        .map(|d| dates.partition_point(|x| x < d))
        .collect();
    (obs, rows)
}

/// One screened factor as the split reads it: its name and, when it was
/// scored, its per-date rank IC at the rank horizon. (The screen hands
/// these over, so this file does not read the screen's types.)
#[derive(Clone, Copy, Debug)]
pub struct RankIcSeries<'a> {
    pub name: &'a str,
    pub scored: Option<(&'a [NaiveDate], &'a [f64])>,
}

fn rank_series<'a>(f: &RankIcSeries<'a>, _h: usize) -> Option<(&'a [NaiveDate], &'a [f64])> {
    f.scored
}

/// Each observation's label end: the last observation within `horizon`
/// rows of the panel after it (its forward return's span t..t+h).
pub fn label_ends(rows: &[usize], horizon: usize) -> Vec<usize> {
    rows.iter()
        .enumerate()
        .map(|(i, &r)| {
            let reach = r.saturating_add(horizon);
            rows.partition_point(|&x| x <= reach)
                .saturating_sub(1)
                .max(i)
        })
        .collect()
}

/// The splits of `split` over a screen's scored dates (`dates` the
/// universe's), and their observations' rows in `dates`.
pub fn make_splits(
    dates: &[NaiveDate],
    factors: &[RankIcSeries<'_>],
    rank_horizon: usize,
    split: &ScreenSplit,
) -> Result<(Splits, Vec<NaiveDate>, Vec<usize>), SplitError> {
    split.check()?;
    let kind = split.kind();
    let (groups, test_groups, embargo, horizon) = split.params(rank_horizon);
    let (obs, rows) = observations(dates, factors, rank_horizon);
    let ends = label_ends(&rows, horizon);
    let s = validation::cpcv(&ends, groups, test_groups, Embargo::Observations(embargo)).map_err(
        |source| SplitError::Dates {
            kind,
            n: obs.len(),
            horizon: rank_horizon,
            source,
        },
    )?;
    Ok((s, obs, rows))
}

/// Mean and mean / std (ddof 1) of the finite `x[i]` for i in `idx`; NaN
/// under two values or without dispersion (the IR).
fn mean_ir(x: &[f64], idx: &[usize]) -> (f64, f64) {
    let v: Vec<f64> = idx
        .iter()
        .filter_map(|&i| x.get(i).copied())
        .filter(|v| v.is_finite())
        .collect();
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    if v.len() < 2 {
        return (m, f64::NAN);
    }
    let var = v.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / (v.len() - 1) as f64;
    (m, if var > 0.0 { m / var.sqrt() } else { f64::NAN })
}

/// Reads `split` over a screen's factors (`dates` the universe's): each
/// factor's rank IC at the rank horizon in and out of sample on every
/// split, and the PBO of choosing the best in-sample factor (docs §17.10).
pub fn validate(
    dates: &[NaiveDate],
    factors: &[RankIcSeries<'_>],
    rank_horizon: usize,
    split: &ScreenSplit,
) -> Result<ScreenValidation, SplitError> {
    let (s, obs, _) = make_splits(dates, factors, rank_horizon, split)?;
    let (groups, test_groups, embargo_days, horizon_days) = split.params(rank_horizon);
    // Each factor's rank IC on the observations (NaN where unscored).
    let series: Vec<Vec<f64>> = factors
        .iter()
        .map(|f| {
            let mut x = vec![f64::NAN; obs.len()];
            if let Some((d, v)) = rank_series(f, rank_horizon) {
                for (day, ic) in d.iter().zip(v) {
                    let slot = obs.binary_search(day).ok().and_then(|i| x.get_mut(i));
                    if let (Some(slot), true) = (slot, ic.is_finite()) {
                        *slot = *ic;
                    }
                }
            }
            x
        })
        .collect();
    let per: Vec<FactorValidation> = factors
        .iter()
        .zip(&series)
        .map(|(f, x)| factor_validation(f.name, x, &s))
        .collect();
    // A factor is chosen in the direction it won in: |IR| in sample, the
    // IR signed by the in-sample sign out of sample.
    let score = |pick: fn(&SplitIc) -> (f64, f64), j: usize| -> Vec<f64> {
        per.iter()
            .map(|fv| {
                fv.splits.get(j).map_or(f64::NAN, |sp| {
                    let (is, v) = pick(sp);
                    if is.is_finite() {
                        v * is.signum()
                    } else {
                        f64::NAN
                    }
                })
            })
            .collect()
    };
    let n_splits = s.splits.len();
    let is: Vec<Vec<f64>> = (0..n_splits)
        .map(|j| score(|sp| (sp.in_sample_ir, sp.in_sample_ir), j))
        .collect();
    let oos: Vec<Vec<f64>> = (0..n_splits)
        .map(|j| score(|sp| (sp.in_sample_ir, sp.out_of_sample_ir), j))
        .collect();
    let pbo = validation::pbo_of_scores(&is, &oos);
    let selected_path_rank_ic = pbo
        .as_ref()
        .map(|p| selected_paths(&s, &series, &per, &p.winners))
        .unwrap_or_default();
    let (pbo, logits, winners) = pbo.map_or((f64::NAN, Vec::new(), Vec::new()), |p| {
        (p.pbo, p.logits, p.winners)
    });
    Ok(ScreenValidation {
        kind: split.kind().into(),
        groups,
        test_groups,
        embargo_days,
        horizon_days,
        observations: obs.len(),
        splits: n_splits,
        paths: s.paths.len(),
        factors: per,
        pbo,
        logits,
        winners,
        selected_path_rank_ic,
    })
}

/// One factor's reading over every split.
fn factor_validation(name: &str, x: &[f64], s: &Splits) -> FactorValidation {
    let splits: Vec<SplitIc> = s
        .splits
        .iter()
        .map(|sp| {
            let (in_sample_mean, in_sample_ir) = mean_ir(x, &sp.train);
            let (out_of_sample_mean, out_of_sample_ir) = mean_ir(x, &sp.test);
            SplitIc {
                in_sample_mean,
                in_sample_ir,
                out_of_sample_mean,
                out_of_sample_ir,
            }
        })
        .collect();
    // A path covers every group once, each tested by one split; a factor
    // is not fitted, so each path's dates are all the observations.
    let all: Vec<usize> = s.groups.iter().flat_map(Clone::clone).collect();
    let out_of_sample_rank_ic: Vec<f64> = s.paths.iter().map(|_| mean_ir(x, &all).0).collect();
    let defined: Vec<&SplitIc> = splits
        .iter()
        .filter(|sp| {
            sp.in_sample_mean.is_finite()
                && sp.out_of_sample_mean.is_finite()
                && sp.in_sample_mean != 0.0
                && sp.out_of_sample_mean != 0.0
        })
        .collect();
    let agree = defined
        .iter()
        .filter(|sp| sp.in_sample_mean.signum() == sp.out_of_sample_mean.signum())
        .count();
    FactorValidation {
        name: name.into(),
        out_of_sample_mean: mean_of(&out_of_sample_rank_ic),
        out_of_sample_rank_ic,
        sign_agreement: if defined.is_empty() {
            f64::NAN
        } else {
            agree as f64 / defined.len() as f64
        },
        splits,
    }
}

fn mean_of(v: &[f64]) -> f64 {
    let f: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if f.is_empty() {
        f64::NAN
    } else {
        f.iter().sum::<f64>() / f.len() as f64
    }
}

/// Each path's mean rank IC when each group is scored by the in-sample
/// winner of the split the path tests it in, signed by its in-sample sign.
fn selected_paths(
    s: &Splits,
    series: &[Vec<f64>],
    per: &[FactorValidation],
    winners: &[usize],
) -> Vec<f64> {
    s.paths
        .iter()
        .map(|path| {
            let mut sum = 0.0;
            let mut count = 0usize;
            for (g, &split) in path.iter().enumerate() {
                let Some(&w) = winners.get(split) else {
                    continue;
                };
                let sign = per
                    .get(w)
                    .and_then(|fv| fv.splits.get(split))
                    .map_or(1.0, |sp| sp.in_sample_ir.signum());
                let (Some(x), Some(r)) = (series.get(w), s.groups.get(g)) else {
                    continue;
                };
                for v in r.clone().filter_map(|i| x.get(i)).filter(|v| v.is_finite()) {
                    sum += sign * v;
                    count += 1;
                }
            }
            if count == 0 {
                f64::NAN
            } else {
                sum / count as f64
            }
        })
        .collect()
}

/// NaN is written as null (serde_json's way); these read it back.
mod nan_null {
    use serde::{Deserialize, Deserializer};

    pub fn f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }

    pub fn vec<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        let v = Vec::<Option<f64>>::deserialize(d)?;
        Ok(v.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::research::factor::screen::{ScreenError, ScreenOptions, Universe, screen};
    use crate::research::seeded::SplitMix64;

    const T: usize = 600;
    const N: usize = 40;

    /// Closes of a random walk and the 1-day forward returns (row-major).
    fn market(seed: u64) -> (Vec<NaiveDate>, Vec<String>, Vec<f64>, Vec<f64>) {
        let mut rng = SplitMix64::new(seed);
        let day0 = NaiveDate::from_ymd_opt(2015, 1, 1).unwrap();
        let dates = (0..T).map(|i| day0 + chrono::Days::new(i as u64)).collect();
        let symbols = (0..N).map(|j| format!("S{j}")).collect();
        let mut close = vec![100.0; T * N];
        for i in 1..T {
            for j in 0..N {
                close[i * N + j] = close[(i - 1) * N + j] * (1.0 + 0.01 * rng.normal());
            }
        }
        let mut fwd = vec![f64::NAN; T * N];
        for i in 0..T - 1 {
            for j in 0..N {
                fwd[i * N + j] = close[(i + 1) * N + j] / close[i * N + j] - 1.0;
            }
        }
        (dates, symbols, close, fwd)
    }

    fn noise(rng: &mut SplitMix64) -> Vec<f64> {
        (0..T * N).map(|_| rng.normal()).collect()
    }

    fn options(split: ScreenSplit) -> ScreenOptions {
        ScreenOptions {
            horizons: vec![1, 5],
            threads: 1,
            split: Some(split),
            ..ScreenOptions::default()
        }
    }

    fn cpcv(groups: usize, test_groups: usize, embargo_days: usize) -> ScreenSplit {
        ScreenSplit::Cpcv {
            groups,
            test_groups,
            embargo_days,
            horizon_days: None,
        }
    }

    #[test]
    fn the_split_reads_the_sweeps_keys() {
        let k: ScreenSplit =
            serde_json::from_str(r#"{"purged_kfold": {"folds": 5, "embargo_days": 3}}"#).unwrap();
        assert_eq!(
            k,
            ScreenSplit::PurgedKfold {
                folds: 5,
                embargo_days: 3,
                horizon_days: None
            }
        );
        let c: ScreenSplit = serde_json::from_str(
            r#"{"cpcv": {"groups": 6, "test_groups": 2, "embargo_days": 5, "horizon_days": 5}}"#,
        )
        .unwrap();
        assert_eq!(c.params(1), (6, 2, 5, 5));
        assert!(
            serde_json::from_str::<ScreenSplit>(r#"{"cpcv": {"groups": 6, "tests": 2}}"#).is_err()
        );
    }

    #[test]
    fn a_planted_signal_is_best_in_and_out_of_sample_with_a_low_pbo() {
        let (dates, symbols, close, fwd) = market(7);
        let mut rng = SplitMix64::new(8);
        // The 1-day forward return through noise: rank IC near 0.3.
        let planted: Vec<f64> = fwd.iter().map(|r| r / 0.01 + 3.0 * rng.normal()).collect();
        let noises: Vec<Vec<f64>> = (0..6).map(|_| noise(&mut rng)).collect();
        let mut factors: Vec<(&str, &[f64])> = vec![("planted", &planted)];
        factors.extend(noises.iter().map(|v| ("noise", v.as_slice())));
        let u = Universe {
            dates: &dates,
            symbols: &symbols,
            close: &close,
        };
        for split in [
            cpcv(6, 2, 5),
            ScreenSplit::PurgedKfold {
                folds: 5,
                embargo_days: 5,
                horizon_days: None,
            },
        ] {
            let s = screen(u, &factors, &options(split.clone())).unwrap();
            let v = s.validation.unwrap();
            let (splits, paths) = if split.kind() == "cpcv" {
                (15, 5)
            } else {
                (5, 1)
            };
            assert_eq!((v.splits, v.paths), (splits, paths), "{split:?}");
            assert_eq!(v.observations, T - 1, "every date but the last scored");
            assert!(v.winners.iter().all(|&w| w == 0), "{:?}", v.winners);
            assert!(v.pbo <= 0.05, "pbo {}", v.pbo);
            let p = &v.factors[0];
            assert_eq!(p.out_of_sample_rank_ic.len(), paths);
            assert!(p.out_of_sample_mean > 0.2, "{}", p.out_of_sample_mean);
            assert_eq!(p.sign_agreement, 1.0);
            for f in &v.factors[1..] {
                assert!(f.out_of_sample_mean.abs() < p.out_of_sample_mean / 4.0);
            }
            for sp in &p.splits {
                assert!(sp.in_sample_mean > 0.2 && sp.out_of_sample_mean > 0.2);
            }
            assert!(v.selected_path_rank_ic.iter().all(|x| *x > 0.2));
        }
    }

    #[test]
    fn noise_alone_overfits_about_half_the_time() {
        // 10 noise factors, CPCV(6, 2) (15 splits) over 12 seeded markets:
        // the winner's out-of-sample rank is uniform, so E[PBO] = 0.5;
        // the mean of the 12 must lie in [0.35, 0.65].
        let mut sum = 0.0;
        let seeds = 12;
        for seed in 0..seeds {
            let (dates, symbols, close, _) = market(100 + seed);
            let mut rng = SplitMix64::new(200 + seed);
            let noises: Vec<Vec<f64>> = (0..10).map(|_| noise(&mut rng)).collect();
            let factors: Vec<(&str, &[f64])> =
                noises.iter().map(|v| ("noise", v.as_slice())).collect();
            let u = Universe {
                dates: &dates,
                symbols: &symbols,
                close: &close,
            };
            let s = screen(u, &factors, &options(cpcv(6, 2, 2))).unwrap();
            sum += s.validation.unwrap().pbo;
        }
        let mean = sum / seeds as f64;
        assert!((0.35..=0.65).contains(&mean), "mean PBO {mean}");
    }

    #[test]
    fn no_training_date_is_within_the_horizon_and_embargo_of_a_test_date() {
        let (dates, symbols, close, _) = market(3);
        let mut rng = SplitMix64::new(4);
        let mut f = noise(&mut rng);
        // Dates no factor scores: the observations skip rows.
        for i in (50..T).step_by(37) {
            for j in 0..N {
                f[i * N + j] = f64::NAN;
            }
        }
        let u = Universe {
            dates: &dates,
            symbols: &symbols,
            close: &close,
        };
        let (h, e) = (5, 3);
        let split = ScreenSplit::Cpcv {
            groups: 7,
            test_groups: 3,
            embargo_days: e,
            horizon_days: Some(h),
        };
        let o = ScreenOptions {
            split: None,
            ..options(cpcv(2, 1, 0))
        };
        let s = screen(u, &[("f", &f)], &o).unwrap();
        let hs = &s.factors[0].stats.as_ref().unwrap().horizons[0];
        let series = [RankIcSeries {
            name: "f",
            scored: Some((&hs.dates, &hs.rank_ic)),
        }];
        let (splits, obs, rows) = make_splits(&dates, &series, 1, &split).unwrap();
        assert!(obs.len() < T - 1, "the gaps are not observations");
        let mut checked = 0;
        for sp in &splits.splits {
            for &i in &sp.train {
                for &j in &sp.test {
                    let (ri, rj) = (rows[i], rows[j]);
                    if ri > rj {
                        assert!(ri - rj > h + e, "train row {ri} after test row {rj}");
                    } else {
                        assert!(rj - ri > h, "train row {ri} before test row {rj}");
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 100_000);
    }

    #[test]
    fn a_bad_split_is_refused_with_its_reason() {
        let (dates, symbols, close, _) = market(5);
        let f = noise(&mut SplitMix64::new(6));
        let u = Universe {
            dates: &dates,
            symbols: &symbols,
            close: &close,
        };
        let run = |split| screen(u, &[("f", &f)], &options(split)).unwrap_err();
        let e = run(cpcv(4, 4, 0));
        assert!(matches!(e, ScreenError::Split(SplitError::Invalid { .. })));
        assert_eq!(
            e.to_string(),
            "split.cpcv: test groups must be from 1 to groups − 1 = 3, got 4"
        );
        let e = run(cpcv(1, 1, 0)).to_string();
        assert_eq!(e, "split.cpcv: need at least 2 groups (folds), got 1");
        let e = run(cpcv(40, 20, 0)).to_string();
        assert!(e.contains("more than the 1000 a screen makes"), "{e}");
        let e = run(ScreenSplit::PurgedKfold {
            folds: 400,
            embargo_days: 0,
            horizon_days: None,
        })
        .to_string();
        assert_eq!(
            e,
            "split.purged_kfold: 599 scored dates at the rank horizon 1 cannot be split: 599 observations make groups of fewer than 2 over 400 groups; give at least 800 observations or fewer groups"
        );
        let e = run(ScreenSplit::PurgedKfold {
            folds: 2,
            embargo_days: 0,
            horizon_days: Some(400),
        })
        .to_string();
        assert!(e.contains("has no training observation left"), "{e}");
    }
}
