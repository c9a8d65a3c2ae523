//! Warm-up history (docs §7.4.1): indicators and signals are computed on
//! history loaded before a range's start, and the start cuts only what is
//! shown or traded, so a value on a date never depends on the requested
//! start.
//!
//! This module cuts a series loaded with history back to its range and
//! writes the [`WarmupRecord`] both the `technical_indicator` tool and the
//! backtest report: bars needed, bars used, and a plain note when a series
//! had fewer than it needed (its data begins too late).

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use super::data::{Bars, PriceSeries};
use super::indicators::Warmup;

/// How much history before the start the values were computed on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WarmupRecord {
    /// Bars before the start the values need; absent: all the history
    /// there is (a running peak).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bars_needed: Option<usize>,
    /// Bars before the start they were computed on (the fewest of any
    /// series).
    pub bars_used: usize,
    /// Set when a series had fewer bars than needed: which, how many, and
    /// from which date its values are warm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Bars dated before `start` (all of them before a `None` start: none).
pub(crate) fn bars_before(bars: &Bars, start: Option<NaiveDate>) -> usize {
    start.map_or(0, |s| bars.dates.partition_point(|d| *d < s))
}

/// Keeps the rows of `[start, end]` and restates the provenance's row
/// count and dates for that range: what a caller shows is the range, never
/// the history loaded before it.
pub(crate) fn cut(series: &mut PriceSeries, start: Option<NaiveDate>, end: Option<NaiveDate>) {
    series.bars.retain_range(start, end);
    // The source's lines no longer match the bars one for one.
    series.source_rows = None;
    let p = &mut series.provenance;
    p.rows = series.bars.len();
    p.first_date = series.bars.first_date();
    p.last_date = series.bars.last_date();
}

impl WarmupRecord {
    /// The record for `series` (symbol, bars as loaded, history included)
    /// whose values need `need` bars before `start`.
    pub(crate) fn of(
        need: Warmup,
        start: Option<NaiveDate>,
        series: &[(&str, &Bars)],
    ) -> WarmupRecord {
        let used: Vec<usize> = series.iter().map(|(_, b)| bars_before(b, start)).collect();
        let bars_used = used.iter().copied().min().unwrap_or(0);
        let Warmup::Bars(needed) = need else {
            return WarmupRecord {
                bars_needed: None,
                bars_used,
                note: None,
            };
        };
        let short: Vec<String> = series
            .iter()
            .zip(&used)
            .filter(|(_, u)| **u < needed)
            .map(|((sym, bars), u)| short_note(sym, bars, *u, needed, start))
            .collect();
        WarmupRecord {
            bars_needed: Some(needed),
            bars_used,
            note: (!short.is_empty()).then(|| short.join("; ")),
        }
    }

    /// One line for a report: "50 bars needed, 1,300 used" and the note.
    pub(crate) fn describe(&self) -> String {
        let need = self
            .bars_needed
            .map_or_else(|| "all the history".to_string(), |n| format!("{n} bars"));
        let mut s = format!("warm-up: {need} needed, {} used", self.bars_used);
        if let Some(n) = &self.note {
            s.push_str(" (");
            s.push_str(n);
            s.push(')');
        }
        s
    }
}

/// "XYZ: 3 of 50 warm-up bars before 2010-01-06 (its data begins
/// 2009-12-31); values from 2010-03-16 on are warm".
fn short_note(
    sym: &str,
    bars: &Bars,
    used: usize,
    needed: usize,
    start: Option<NaiveDate>,
) -> String {
    let first = bars
        .first_date()
        .map_or_else(|| "-".to_string(), |d| d.to_string());
    let warm = bars.dates.get(needed).map_or_else(
        || "no value is warm".to_string(),
        |d| format!("values from {d} on are warm"),
    );
    match start {
        Some(s) => format!(
            "{sym}: {used} of {needed} warm-up bars before {s} (its data begins {first}); {warm}"
        ),
        None => format!(
            "{sym}: the range begins with its data ({first}), without the {needed} warm-up bars; {warm}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bars(days: &[u32]) -> Bars {
        let mut b = Bars::default();
        for &d in days {
            let date = NaiveDate::from_ymd_opt(2010, 1, d).unwrap();
            b.push(date, 1.0, 1.0, 1.0, 1.0, 1.0);
        }
        b
    }

    #[test]
    fn too_little_history_is_said_with_the_first_warm_date() {
        let day = |d| NaiveDate::from_ymd_opt(2010, 1, d);
        let a = bars(&[4, 5, 6, 7, 8, 11, 12]);
        let b = bars(&[6, 7, 8, 11, 12]);
        let r = WarmupRecord::of(Warmup::Bars(3), day(8), &[("A", &a), ("B", &b)]);
        assert_eq!(r.bars_needed, Some(3));
        assert_eq!(r.bars_used, 2, "B has two bars before the 8th");
        let note = r.note.unwrap();
        assert!(note.starts_with("B: 2 of 3"), "{note}");
        assert!(note.contains("begins 2010-01-06"), "{note}");
        assert!(note.contains("from 2010-01-11 on"), "{note}");
        assert!(!note.contains("A:"), "{note}");
        let ok = WarmupRecord::of(Warmup::Bars(2), day(8), &[("A", &a)]);
        assert_eq!((ok.bars_used, ok.note), (4, None));
        let all = WarmupRecord::of(Warmup::All, day(8), &[("A", &a)]);
        assert_eq!((all.bars_needed, all.note.as_deref()), (None, None));
        assert!(all.describe().contains("all the history"));
    }
}
