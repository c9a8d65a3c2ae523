//! The input checked and cut to the days with a return: a NaN day (a gap)
//! is left out of every statistic, as if the date were absent, and carries
//! the previous value through the curves (docs §20.1).

use chrono::{Datelike, NaiveDate};

use super::{TearSheetError, TearSheetInput};

/// The days with a strategy return, and what is measured against it.
pub(crate) struct Prepared {
    pub dates: Vec<NaiveDate>,
    /// The strategy's returns.
    pub r: Vec<f64>,
    /// The benchmark's returns on the same days (a missing one is 0).
    pub b: Option<Vec<f64>>,
    /// The daily risk-free rate on the same days (0 when none is given).
    pub rf: Vec<f64>,
    /// Whether a non-zero risk-free rate was given.
    pub has_rf: bool,
    pub ppy: f64,
}

impl Prepared {
    /// `r − rf`, day by day.
    pub(crate) fn excess(&self, x: &[f64]) -> Vec<f64> {
        x.iter().zip(&self.rf).map(|(a, f)| a - f).collect()
    }
}

fn check_len(what: &'static str, got: usize, expected: usize) -> Result<(), TearSheetError> {
    if got == expected {
        Ok(())
    } else {
        Err(TearSheetError::Length {
            what,
            expected,
            got,
        })
    }
}

/// Checks `input`'s shape and keeps the days whose return is finite.
pub(crate) fn prepare(input: &TearSheetInput) -> Result<Prepared, TearSheetError> {
    let n = input.dates.len();
    check_len("returns", input.returns.len(), n)?;
    if let Some(b) = &input.benchmark {
        check_len("benchmark returns", b.returns.len(), n)?;
    }
    if let Some(rf) = &input.risk_free {
        check_len("risk-free rates", rf.daily.len(), n)?;
    }
    if let Some(p) = &input.positions {
        check_len("position rows", p.weights.len(), n)?;
        if let Some(row) = p.weights.iter().find(|w| w.len() != p.codes.len()) {
            return Err(TearSheetError::Length {
                what: "weights in a position row",
                expected: p.codes.len(),
                got: row.len(),
            });
        }
    }
    if let Some(w) = input.dates.windows(2).find(|w| w[0] >= w[1]) {
        return Err(TearSheetError::Unsorted(w[1]));
    }
    let ppy = input.options.periods_per_year;
    if !(ppy.is_finite() && ppy > 0.0) {
        return Err(TearSheetError::Option("periods_per_year must be positive"));
    }
    let keep: Vec<usize> = (0..n)
        .filter(|&i| input.returns.get(i).is_some_and(|r| r.is_finite()))
        .collect();
    if keep.is_empty() {
        return Err(TearSheetError::Empty);
    }
    let pick = |col: &[f64]| -> Vec<f64> {
        keep.iter()
            .map(|&i| col.get(i).copied().filter(|v| v.is_finite()).unwrap_or(0.0))
            .collect()
    };
    let rf = input
        .risk_free
        .as_ref()
        .map_or_else(|| vec![0.0; keep.len()], |f| pick(&f.daily));
    Ok(Prepared {
        dates: keep
            .iter()
            .filter_map(|&i| input.dates.get(i).copied())
            .collect(),
        r: pick(&input.returns),
        b: input.benchmark.as_ref().map(|b| pick(&b.returns)),
        has_rf: rf.iter().any(|v| *v != 0.0),
        rf,
        ppy,
    })
}

/// A calendar grouping of days.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Group {
    /// ISO week (its ISO year).
    Week,
    Month,
    Quarter,
    Year,
}

impl Group {
    fn key(self, d: NaiveDate) -> i64 {
        let y = i64::from(d.year());
        match self {
            Group::Week => {
                let w = d.iso_week();
                i64::from(w.year()) * 100 + i64::from(w.week())
            }
            Group::Month => y * 100 + i64::from(d.month()),
            Group::Quarter => y * 10 + i64::from(d.month0() / 3 + 1),
            Group::Year => y,
        }
    }
}

/// The runs of consecutive days in one group: `(first, end)` index ranges
/// (dates are increasing, so a group is one run).
pub(crate) fn runs(dates: &[NaiveDate], g: Group) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=dates.len() {
        let split = match (dates.get(i), dates.get(start)) {
            (Some(d), Some(s)) => g.key(*d) != g.key(*s),
            _ => true,
        };
        if split && i > start {
            out.push((start, i));
            start = i;
        }
    }
    out
}

/// The compounded return of each run.
pub(crate) fn compound_runs(x: &[f64], runs: &[(usize, usize)]) -> Vec<f64> {
    runs.iter()
        .map(|&(a, b)| super::calc::comp(x.get(a..b).unwrap_or(&[])))
        .collect()
}

/// The plain sum of each run (quantstats' monthly gain-to-pain).
pub(crate) fn sum_runs(x: &[f64], runs: &[(usize, usize)]) -> Vec<f64> {
    runs.iter()
        .map(|&(a, b)| x.get(a..b).unwrap_or(&[]).iter().sum())
        .collect()
}
