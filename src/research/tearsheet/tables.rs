//! The monthly table (years × months, plus the year) and the annual
//! returns against the benchmark.

use chrono::{Datelike, NaiveDate};

use super::prep::{Group, compound_runs, runs};
use super::{AnnualRow, MonthlyTable};

/// Compounded monthly returns by year; a month without a day is `None`.
pub(crate) fn monthly(dates: &[NaiveDate], r: &[f64]) -> MonthlyTable {
    let months = runs(dates, Group::Month);
    let values = compound_runs(r, &months);
    let years = runs(dates, Group::Year);
    let yearly = compound_runs(r, &years);
    let mut t = MonthlyTable::default();
    for ((a, _), y) in years.iter().zip(&yearly) {
        if let Some(d) = dates.get(*a) {
            t.years.push(d.year());
            t.cells.push([None; 12]);
            t.year.push(Some(*y));
        }
    }
    for ((a, _), v) in months.iter().zip(values) {
        let Some(d) = dates.get(*a) else { continue };
        let row = t.years.iter().position(|y| *y == d.year());
        if let Some(cell) = row
            .and_then(|y| t.cells.get_mut(y))
            .and_then(|c| c.get_mut(d.month0() as usize))
        {
            *cell = Some(v);
        }
    }
    t
}

/// Each year's compounded return, and the benchmark's.
pub(crate) fn annual(dates: &[NaiveDate], r: &[f64], b: Option<&[f64]>) -> Vec<AnnualRow> {
    let years = runs(dates, Group::Year);
    let s = compound_runs(r, &years);
    let bm = b.map(|b| compound_runs(b, &years));
    years
        .iter()
        .enumerate()
        .filter_map(|(i, (a, _))| {
            Some(AnnualRow {
                year: dates.get(*a)?.year(),
                strategy: *s.get(i)?,
                benchmark: bm.as_ref().and_then(|v| v.get(i).copied()),
            })
        })
        .collect()
}
