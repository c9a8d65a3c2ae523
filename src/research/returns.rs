//! Daily returns of several series on their common dates (docs §15.1):
//! the quant tools' input from market data. Only dates every series has a
//! close on are kept (no filling), and each return is the simple change
//! between consecutive kept closes, c_t / c_{t−1} − 1.

use chrono::NaiveDate;

use super::data::Bars;

/// Returns aligned on common dates.
#[derive(Clone, Debug, PartialEq)]
pub struct AlignedReturns {
    pub names: Vec<String>,
    /// The common close dates; return t is from `dates[t]` to `dates[t+1]`.
    pub dates: Vec<NaiveDate>,
    /// One column per series, `dates.len() − 1` long.
    pub columns: Vec<Vec<f64>>,
}

/// Why series cannot be aligned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AlignError {
    #[error("no series were given")]
    NoSeries,
    #[error(
        "{names} share {days} trading day(s) in the range; at least 3 closes (2 returns) are needed: widen the dates or pick symbols that traded together"
    )]
    TooFewCommonDays {
        /// The series' names, comma-joined.
        names: String,
        days: usize,
    },
}

/// Aligns `series` (name, bars) on the dates all of them have.
pub fn aligned_returns(series: &[(String, &Bars)]) -> Result<AlignedReturns, AlignError> {
    let Some((_, first)) = series.first() else {
        return Err(AlignError::NoSeries);
    };
    let common: Vec<NaiveDate> = first
        .dates
        .iter()
        .copied()
        .filter(|d| series[1..].iter().all(|(_, b)| b.index_of(*d).is_some()))
        .collect();
    if common.len() < 3 {
        let names: Vec<&str> = series.iter().map(|(n, _)| n.as_str()).collect();
        return Err(AlignError::TooFewCommonDays {
            names: names.join(", "),
            days: common.len(),
        });
    }
    let columns = series
        .iter()
        .map(|(_, b)| {
            let closes: Vec<f64> = common
                .iter()
                .filter_map(|d| b.index_of(*d).and_then(|i| b.close.get(i).copied()))
                .collect();
            closes.windows(2).map(|w| w[1] / w[0] - 1.0).collect()
        })
        .collect();
    Ok(AlignedReturns {
        names: series.iter().map(|(n, _)| n.clone()).collect(),
        dates: common,
        columns,
    })
}

/// The annualised realised volatility (ddof 1, × √252) of the last
/// `window` daily returns of `closes`, and how many returns it used.
pub fn realised_volatility(closes: &[f64], window: usize) -> Option<(f64, usize)> {
    let from = closes.len().saturating_sub(window + 1);
    let r: Vec<f64> = closes[from..]
        .windows(2)
        .map(|w| w[1] / w[0] - 1.0)
        .collect();
    if r.len() < 2 {
        return None;
    }
    let sd = super::stats::std_dev(&r, 1);
    Some((sd * 252f64.sqrt(), r.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bars(days: &[u32], closes: &[f64]) -> Bars {
        let mut b = Bars::default();
        for (d, c) in days.iter().zip(closes) {
            let date = NaiveDate::from_ymd_opt(2010, 1, *d).unwrap();
            b.push(date, *c, *c, *c, *c, 0.0);
        }
        b
    }

    #[test]
    fn only_common_dates_are_kept() {
        let a = bars(&[4, 5, 6, 7], &[10.0, 11.0, 12.1, 13.31]);
        let b = bars(&[4, 6, 7], &[20.0, 22.0, 11.0]);
        let r = aligned_returns(&[("A".into(), &a), ("B".into(), &b)]).unwrap();
        assert_eq!(r.dates.len(), 3);
        assert!(
            (r.columns[0][0] - 0.21).abs() < 1e-12,
            "A from the 4th to the 6th"
        );
        assert_eq!(r.columns[1], vec![0.10000000000000009, -0.5]);
    }
}
