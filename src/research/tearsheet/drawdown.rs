//! The underwater curve and the drawdown periods, as quantstats'
//! `to_drawdown_series` and `drawdown_details` define them: equity starts
//! at 1 the day before the first return, so a fall on the first day is a
//! drawdown; a period runs over consecutive days below the running peak.

use chrono::NaiveDate;

use super::DrawdownPeriod;

/// Drawdown from the running peak (the peak starts at 1), ≤ 0.
pub(crate) fn underwater(r: &[f64]) -> Vec<f64> {
    let mut growth = 1.0;
    let mut peak: f64 = 1.0;
    r.iter()
        .map(|x| {
            growth *= 1.0 + x;
            // Written as quantstats' prices (1 + (Π − 1)) so a new high is
            // exactly 0 on the same days.
            let price = 1.0 + (growth - 1.0);
            peak = peak.max(price);
            let dd = price / peak - 1.0;
            if dd == 0.0 || !dd.is_finite() {
                0.0
            } else {
                dd
            }
        })
        .collect()
}

/// Every drawdown period (in time order) of the underwater curve `dd` on
/// `dates`. `end` is the last day under water; `recovery` the next day.
pub(crate) fn periods(dates: &[NaiveDate], dd: &[f64]) -> Vec<DrawdownPeriod> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = dd.len().min(dates.len());
    while i < n {
        if dd.get(i).is_none_or(|v| *v >= 0.0) {
            i += 1;
            continue;
        }
        let start = i;
        let mut trough = i;
        while i < n && dd.get(i).is_some_and(|v| *v < 0.0) {
            if dd.get(i) < dd.get(trough) {
                trough = i;
            }
            i += 1;
        }
        let end = i - 1;
        let (Some(s), Some(e), Some(t)) = (dates.get(start), dates.get(end), dates.get(trough))
        else {
            break;
        };
        out.push(DrawdownPeriod {
            start: *s,
            trough: *t,
            end: *e,
            recovery: dates.get(i).copied(),
            depth: dd.get(trough).copied().unwrap_or(0.0),
            days: (*e - *s).num_days() + 1,
        });
    }
    out
}

/// The periods worst first (deepest; the earlier of equals first).
pub(crate) fn worst_first(mut p: Vec<DrawdownPeriod>) -> Vec<DrawdownPeriod> {
    p.sort_by(|a, b| a.depth.total_cmp(&b.depth).then(a.start.cmp(&b.start)));
    p
}
