//! US Treasury yields, embedded (docs §7.3), and the risk-free rate the
//! metrics use (docs §7.5).
//!
//! The curve is the Treasury's daily par yield curve, 1990-01-02 to
//! 2017-03-29 (6,816 days, a U.S. government work in the public domain, as
//! packaged in zipline-reloaded; see NOTICE), as decimals (0.0783 = 7.83 %
//! a year). A tenor the Treasury did not publish on a day is `None`.
//!
//! A date's yield is the last one published on or before it (weekends and
//! holidays carry the previous day's). The curve ends on 2017-03-29, before
//! the embedded market does (2017-11-10): up to [`CARRY_UNTIL`] the last
//! yield is carried forward; after it, and before 1990-01-02, there is no
//! yield and the metrics use a zero rate, saying so.

use std::io::Read;
use std::sync::{Arc, OnceLock};

use chrono::NaiveDate;

use super::DataError;
use super::embedded::EmbeddedError;

const GZ: &[u8] = include_bytes!("../../../assets/data/us_treasury_curve_1990_2017.csv.gz");
const FILE: &str = "assets/data/us_treasury_curve_1990_2017.csv.gz";

/// Attribution, also in NOTICE.
pub(crate) const ATTRIBUTION: &str = "U.S. Department of the Treasury daily par yield curve rates (public domain), via zipline-reloaded";

/// The last date the curve's final yields are carried to: the end of the
/// embedded market, so every offline backtest has a rate.
pub(crate) const CARRY_UNTIL: (i32, u32, u32) = (2017, 11, 10);

/// The curve's maturities, in the file's column order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tenor {
    M1,
    M3,
    M6,
    Y1,
    Y2,
    Y3,
    Y5,
    Y7,
    Y10,
    Y20,
    Y30,
}

impl Tenor {
    pub(crate) const ALL: [Tenor; 11] = [
        Tenor::M1,
        Tenor::M3,
        Tenor::M6,
        Tenor::Y1,
        Tenor::Y2,
        Tenor::Y3,
        Tenor::Y5,
        Tenor::Y7,
        Tenor::Y10,
        Tenor::Y20,
        Tenor::Y30,
    ];

    /// The file's column name (`3month`, `10year`).
    pub(crate) fn column(self) -> &'static str {
        match self {
            Tenor::M1 => "1month",
            Tenor::M3 => "3month",
            Tenor::M6 => "6month",
            Tenor::Y1 => "1year",
            Tenor::Y2 => "2year",
            Tenor::Y3 => "3year",
            Tenor::Y5 => "5year",
            Tenor::Y7 => "7year",
            Tenor::Y10 => "10year",
            Tenor::Y20 => "20year",
            Tenor::Y30 => "30year",
        }
    }
}

/// One day of the curve.
#[derive(Clone, Debug, PartialEq)]
pub struct CurveDay {
    pub date: NaiveDate,
    /// Yields in [`Tenor::ALL`] order, decimals a year.
    pub yields: [Option<f64>; 11],
}

impl CurveDay {
    pub(crate) fn get(&self, tenor: Tenor) -> Option<f64> {
        self.yields[tenor as usize]
    }
}

/// A yield and the day it was published (earlier than the date asked for
/// on holidays, and after the curve's end when carried).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quote {
    pub published: NaiveDate,
    pub value: f64,
}

static CURVE: OnceLock<Result<Vec<CurveDay>, EmbeddedError>> = OnceLock::new();

fn broken(detail: String) -> EmbeddedError {
    EmbeddedError::Table {
        file: FILE,
        detail: Arc::from(detail),
    }
}

fn parse(gz: &[u8]) -> Result<Vec<CurveDay>, EmbeddedError> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut text)
        .map_err(|e| broken(format!("gunzip: {e}")))?;
    let mut lines = text.lines();
    let want: Vec<&str> = std::iter::once("date")
        .chain(Tenor::ALL.iter().map(|t| t.column()))
        .collect();
    if lines.next().map(|h| h.split(',').collect::<Vec<_>>()) != Some(want) {
        return Err(broken("unexpected header".into()));
    }
    let mut out: Vec<CurveDay> = Vec::with_capacity(7_000);
    for (i, line) in lines.enumerate() {
        let err = |d: String| broken(format!("line {}: {d}", i + 2));
        let mut f = line.split(',');
        let date = f.next().unwrap_or("");
        let date = NaiveDate::parse_from_str(date, "%Y-%m-%d").map_err(|e| err(e.to_string()))?;
        if out.last().is_some_and(|p| p.date >= date) {
            return Err(err(format!("{date} is out of order")));
        }
        let mut yields = [None; 11];
        for y in &mut yields {
            let cell = f.next().ok_or_else(|| err("too few fields".into()))?;
            if !cell.is_empty() {
                *y = Some(
                    cell.parse::<f64>()
                        .map_err(|e| err(format!("'{cell}': {e}")))?,
                );
            }
        }
        out.push(CurveDay { date, yields });
    }
    Ok(out)
}

/// The whole curve, sorted by date.
pub fn curve() -> Result<&'static [CurveDay], DataError> {
    CURVE
        .get_or_init(|| parse(GZ))
        .as_ref()
        .map(Vec::as_slice)
        .map_err(|e| DataError::Embedded(e.clone()))
}

fn carry_until() -> NaiveDate {
    let (y, m, d) = CARRY_UNTIL;
    NaiveDate::from_ymd_opt(y, m, d).unwrap_or(NaiveDate::MAX)
}

/// The `tenor` yield on `date`: the last published on or before it, while
/// `date` is within the curve (carried to [`CARRY_UNTIL`]); `None` before
/// the tenor's first publication and after that date.
pub fn on(tenor: Tenor, date: NaiveDate) -> Result<Option<Quote>, DataError> {
    let days = curve()?;
    if date > carry_until() {
        return Ok(None);
    }
    let upto = days.partition_point(|d| d.date <= date);
    Ok(days[..upto].iter().rev().find_map(|d| {
        d.get(tenor).map(|value| Quote {
            published: d.date,
            value,
        })
    }))
}

/// The 3-month yield on `date` (see [`on`]): the usual risk-free rate.
pub fn three_month(date: NaiveDate) -> Result<Option<Quote>, DataError> {
    on(Tenor::M3, date)
}

/// The risk-free rate of each bar of a backtest, as the metrics use it.
#[derive(Clone, Debug, PartialEq)]
pub struct RiskFree {
    /// The rate earned over each bar (0 on the first, which has no
    /// return).
    pub per_bar: Vec<f64>,
    /// `treasury_3m` or `zero`.
    pub label: &'static str,
    /// The mean 3-month yield over the bars, a year (0 for `zero`).
    pub mean_annual: f64,
    /// What a reader must know: a carried yield, or why the rate is zero.
    pub note: Option<String>,
}

impl RiskFree {
    /// The annual rate `annual` (decimal) the caller gave, as a per-bar
    /// rate on `n` bars with `bars_per_year` a year: (1 + r)^(1/B) − 1, 0
    /// on the first bar (it has no return), as the T-bill's.
    pub(crate) fn given(n: usize, annual: f64, bars_per_year: f64) -> Self {
        let bar = if bars_per_year > 0.0 && annual > -1.0 {
            (1.0 + annual).powf(1.0 / bars_per_year) - 1.0
        } else {
            0.0
        };
        let mut per_bar = vec![bar; n];
        if let Some(first) = per_bar.first_mut() {
            *first = 0.0;
        }
        RiskFree {
            per_bar,
            label: "given",
            mean_annual: annual,
            note: Some(format!(
                "the risk_free rate given, {:.2} % a year, instead of the 3-month T-bill",
                annual * 100.0
            )),
        }
    }

    /// A zero rate for `n` bars, and why.
    pub(crate) fn zero(n: usize, why: impl Into<String>) -> Self {
        RiskFree {
            per_bar: vec![0.0; n],
            label: "zero",
            mean_annual: 0.0,
            note: Some(why.into()),
        }
    }
}

/// The 3-month Treasury yield as a per-bar rate for bars on `dates`, with
/// `bars_per_year` bars a year: bar t earns (1 + y)^(1/B) − 1, y the
/// yield on bar t's date (see [`on`]). When the curve (carried to
/// [`CARRY_UNTIL`]) does not cover every date, the rate is zero for all of
/// them: one definition per result, never a mix.
pub(crate) fn per_bar(dates: &[NaiveDate], bars_per_year: f64) -> RiskFree {
    let n = dates.len();
    let (Some(first), Some(last)) = (dates.first(), dates.last()) else {
        return RiskFree::zero(0, "no bars");
    };
    let yields: Result<Vec<Option<Quote>>, DataError> =
        dates.iter().map(|d| three_month(*d)).collect();
    let yields = match yields {
        Ok(y) if y.iter().all(Option::is_some) => y.into_iter().flatten().collect::<Vec<_>>(),
        Ok(_) => {
            return RiskFree::zero(
                n,
                format!(
                    "the embedded Treasury curve (3-month yield 1990-01-02 to 2017-03-29, carried to {}) does not cover {first} to {last}: Sharpe and Sortino use a zero risk-free rate",
                    carry_until()
                ),
            );
        }
        Err(e) => {
            return RiskFree::zero(
                n,
                format!(
                    "the Treasury curve cannot be read ({e}): Sharpe and Sortino use a zero risk-free rate"
                ),
            );
        }
    };
    let b = if bars_per_year > 0.0 {
        bars_per_year
    } else {
        252.0
    };
    let mut per_bar: Vec<f64> = yields
        .iter()
        .map(|q| (1.0 + q.value).powf(1.0 / b) - 1.0)
        .collect();
    per_bar[0] = 0.0;
    let mean_annual = yields.iter().map(|q| q.value).sum::<f64>() / n as f64;
    let curve_end = curve().ok().and_then(|c| c.last()).map(|d| d.date);
    let note = curve_end.filter(|end| last > end).map(|end| {
        let v = yields.last().map_or(0.0, |q| q.value);
        format!(
            "the Treasury curve ends {end}: the bars after it use its last 3-month yield, {:.2} %",
            v * 100.0
        )
    });
    RiskFree {
        per_bar,
        label: "treasury_3m",
        mean_annual,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn the_curve_has_its_documented_span_and_gaps() {
        let c = curve().unwrap();
        assert_eq!(c.len(), 6_816);
        assert_eq!(c[0].date, d("1990-01-02"));
        assert_eq!(c[c.len() - 1].date, d("2017-03-29"));
        assert_eq!(c[0].get(Tenor::M3), Some(0.0783));
        assert!(
            c.iter().all(|x| x.get(Tenor::M3).is_some()),
            "3-month every day"
        );
        assert_eq!(c[0].get(Tenor::M1), None, "1-month from 2001-07");
    }

    #[test]
    fn a_date_reads_the_last_published_yield_until_the_carry_ends() {
        // 1990-01-06 is a Saturday: Friday's yield.
        let sat = three_month(d("1990-01-06")).unwrap().unwrap();
        let fri = curve()
            .unwrap()
            .iter()
            .find(|x| x.date == d("1990-01-05"))
            .unwrap();
        assert_eq!(
            (sat.published, Some(sat.value)),
            (fri.date, fri.get(Tenor::M3))
        );
        assert_eq!(three_month(d("1989-12-29")).unwrap(), None);
        let carried = three_month(d("2017-11-10")).unwrap().unwrap();
        assert_eq!(carried.published, d("2017-03-29"));
        assert_eq!(three_month(d("2017-11-13")).unwrap(), None);
        // The 1-month tenor starts later than the curve.
        let m1 = on(Tenor::M1, d("2001-01-02")).unwrap();
        assert_eq!(m1, None);
        assert!(on(Tenor::M1, d("2002-01-02")).unwrap().is_some());
    }

    #[test]
    fn per_bar_rates_compound_to_the_yield_or_are_zero_with_a_reason() {
        let dates = [d("2010-01-04"), d("2010-01-05"), d("2010-01-06")];
        let rf = per_bar(&dates, 252.0);
        assert_eq!(rf.label, "treasury_3m");
        assert_eq!(rf.per_bar[0], 0.0, "the first bar has no return");
        let y = three_month(dates[1]).unwrap().unwrap().value;
        assert!(((1.0 + rf.per_bar[1]).powf(252.0) - 1.0 - y).abs() < 1e-12);
        assert!(rf.note.is_none());
        let late = per_bar(&[d("2017-03-28"), d("2017-11-10")], 252.0);
        assert!(late.note.unwrap().contains("ends 2017-03-29"));
        let out = per_bar(&[d("2017-11-10"), d("2018-01-02")], 252.0);
        assert_eq!((out.label, out.per_bar.clone()), ("zero", vec![0.0, 0.0]));
        assert!(
            out.note
                .unwrap()
                .contains("does not cover 2017-11-10 to 2018-01-02")
        );
    }
}
