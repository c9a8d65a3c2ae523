//! Price adjustment and the OHLC sanity filter (docs §7.1 step 3).

use serde::{Deserialize, Serialize};

use super::Bars;

/// Rows dropped on the way in, by reason (a row counts under its first
/// failing rule, in the order listed).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct DropReport {
    /// A price was empty / null / NaN in the source, or the adjusted close
    /// was missing or unusable (so the row has no adjusted price).
    pub missing_value: usize,
    /// A price ≤ 0 (or infinite).
    pub non_positive_price: usize,
    pub high_below_low: usize,
    /// Open or close outside [low, high].
    pub open_close_outside_range: usize,
    /// A second bar for a date already seen (the first is kept).
    pub duplicate_date: usize,
}

impl DropReport {
    pub fn total(&self) -> usize {
        self.missing_value
            + self.non_positive_price
            + self.high_below_low
            + self.open_close_outside_range
            + self.duplicate_date
    }

    /// One line for notes and logs, e.g. "2 rows dropped (1 high below low, 1 duplicate date)".
    pub(crate) fn summary(&self) -> Option<String> {
        if self.total() == 0 {
            return None;
        }
        let parts: Vec<String> = [
            (self.missing_value, "missing value"),
            (self.non_positive_price, "non-positive price"),
            (self.high_below_low, "high below low"),
            (
                self.open_close_outside_range,
                "open/close outside [low, high]",
            ),
            (self.duplicate_date, "duplicate date"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        Some(format!(
            "{} row{} dropped by the sanity filter ({})",
            self.total(),
            if self.total() == 1 { "" } else { "s" },
            parts.join(", ")
        ))
    }
}

/// The adjustment note shared by every loader that has an adjusted close.
pub(crate) const ADJ_CLOSE_NOTE: &str = "open/high/low/close multiplied by adj_close/close (split- and dividend-adjusted); volume divided by the same factor";

/// Scales OHLC by `adj_close / close` and volume inversely, in place: this
/// removes split gaps (and dividend drops) so returns are continuous. A row
/// whose factor is not a positive finite number (adjusted close missing or
/// unusable) cannot be put on the adjusted scale: its close becomes NaN so
/// the sanity filter drops it as a missing value. Returns how many rows
/// changed.
pub(crate) fn apply_adj_close(bars: &mut Bars, adj_close: &[f64]) -> usize {
    bars.make_consistent();
    let mut changed = 0;
    for (i, adj) in adj_close.iter().enumerate().take(bars.len()) {
        let c = bars.close[i];
        let f = adj / c;
        if !(f.is_finite() && f > 0.0) {
            bars.close[i] = f64::NAN;
            continue;
        }
        if f != 1.0 {
            changed += 1;
        }
        bars.open[i] *= f;
        bars.high[i] *= f;
        bars.low[i] *= f;
        bars.close[i] *= f;
        // Share counts scale the other way, so dollar volume is unchanged.
        bars.volume[i] /= f;
    }
    changed
}

/// Sorts by date (stable) and drops bars that cannot be real: a price that
/// is not a positive finite number, high < low, open or close outside
/// [low, high], and repeated dates (the first bar of a date wins).
/// Multiplying by a positive factor is monotonic in IEEE arithmetic, so an
/// adjusted bar is never dropped for rounding.
pub(crate) fn sanitize(bars: &mut Bars) -> DropReport {
    let mut report = DropReport::default();
    bars.make_consistent();
    if !bars.dates.is_sorted() {
        let mut order: Vec<usize> = (0..bars.len()).collect();
        order.sort_by_key(|&i| bars.dates[i]);
        *bars = reorder(bars, &order);
    }
    let mut keep = vec![true; bars.len()];
    let mut last_kept: Option<chrono::NaiveDate> = None;
    for (i, k) in keep.iter_mut().enumerate() {
        let (o, h, l, c) = (bars.open[i], bars.high[i], bars.low[i], bars.close[i]);
        let prices = [o, h, l, c];
        if prices.iter().any(|p| p.is_nan()) {
            report.missing_value += 1;
            *k = false;
        } else if prices.iter().any(|p| !(p.is_finite() && *p > 0.0)) {
            report.non_positive_price += 1;
            *k = false;
        } else if h < l {
            report.high_below_low += 1;
            *k = false;
        } else if o < l || o > h || c < l || c > h {
            report.open_close_outside_range += 1;
            *k = false;
        } else if last_kept == Some(bars.dates[i]) {
            report.duplicate_date += 1;
            *k = false;
        } else {
            last_kept = Some(bars.dates[i]);
        }
    }
    if report.total() > 0 {
        bars.retain_rows(&keep);
    }
    report
}

fn reorder(bars: &Bars, order: &[usize]) -> Bars {
    let mut out = Bars::with_capacity(bars.len());
    for &i in order {
        out.push(
            bars.dates[i],
            bars.open[i],
            bars.high[i],
            bars.low[i],
            bars.close[i],
            bars.volume[i],
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn d(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn filter_counts_each_reason_and_sorts() {
        let mut b = Bars::default();
        b.push(d("2024-01-05"), 10.0, 11.0, 9.0, 10.5, 100.0); // ok (out of order)
        b.push(d("2024-01-02"), 10.0, 11.0, 9.0, 10.0, 100.0); // ok
        b.push(d("2024-01-03"), 0.0, 11.0, 9.0, 10.0, 100.0); // non-positive
        b.push(d("2024-01-04"), 10.0, 9.0, 11.0, 10.0, 100.0); // high < low
        b.push(d("2024-01-08"), 12.0, 11.0, 9.0, 10.0, 100.0); // open above high
        b.push(d("2024-01-05"), 10.0, 11.0, 9.0, 10.2, 100.0); // duplicate
        b.push(d("2024-01-09"), f64::NAN, 11.0, 9.0, 10.0, 100.0); // missing
        let r = sanitize(&mut b);
        assert_eq!(
            r,
            DropReport {
                missing_value: 1,
                non_positive_price: 1,
                high_below_low: 1,
                open_close_outside_range: 1,
                duplicate_date: 1
            }
        );
        assert_eq!(b.dates, vec![d("2024-01-02"), d("2024-01-05")]);
        // The first bar of the duplicated date (in file order) is kept.
        assert_eq!(b.close[1], 10.5);
        assert!(r.summary().unwrap().starts_with("5 rows dropped"));
    }

    #[test]
    fn adjustment_scales_prices_and_volume() {
        let mut b = Bars::default();
        b.push(d("2024-01-02"), 100.0, 110.0, 90.0, 100.0, 1000.0);
        b.push(d("2024-01-03"), 50.0, 55.0, 45.0, 50.0, 2000.0);
        let n = apply_adj_close(&mut b, &[50.0, 50.0]);
        assert_eq!(n, 1);
        assert_eq!(b.close, vec![50.0, 50.0]);
        assert_eq!(b.high[0], 55.0);
        assert_eq!(b.volume[0], 2000.0);
        assert_eq!(sanitize(&mut b).total(), 0);
    }
}
