//! Which benchmark a backtest is measured against, and which risk-free rate
//! (docs §7.5). Both are said in the result (`benchmark`,
//! `benchmark_note`, `risk_free`, `risk_free_note`) and on the run card.
//!
//! The benchmark:
//! - `benchmark: "TICKER"` in `config.json`: that ticker, as given (its
//!   returns are 0 on bars it has no data for, and a note says so);
//! - `benchmark: "equal_weight"`: the equal weight of the codes;
//! - none (or `"auto"`): SPY when every code is a US equity, else the equal
//!   weight of the codes. SPY is used when its data covers the backtest's
//!   bars, or all but at most [`MAX_UNCOVERED_SHARE`] of them (the embedded
//!   SPY starts 2005-02-25): those few bars are measured against the equal
//!   weight and the note says how many. When SPY covers less, or cannot be
//!   loaded, the benchmark is the equal weight, and the note says why. The
//!   original defaults to the equal weight always; a one-stock backtest's
//!   benchmark was then the stock itself.
//!
//! The risk-free rate is the 3-month Treasury yield (`rates::per_bar`) for
//! US equities, and zero, with a note, for other markets or dates the
//! embedded curve does not cover.

use chrono::NaiveDate;

use super::Panel;
use super::config::BacktestConfig;
use crate::research::data::embedded;
use crate::research::data::rates::{self, RiskFree};
use crate::research::data::{DataError, Market, MarketData, PriceSeries, SourceChoice};

/// The default benchmark of US equity backtests.
pub(crate) const DEFAULT_US: &str = "SPY";
/// The label (and `config.json` value) of the equal-weight benchmark.
pub(crate) const EQUAL_WEIGHT: &str = "equal_weight";
/// The largest share of a backtest's bars the default SPY may miss and
/// still be the benchmark.
pub(crate) const MAX_UNCOVERED_SHARE: f64 = 0.05;

/// What a config asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Wanted {
    /// A ticker named in `config.json`.
    Ticker(String),
    /// SPY, by default.
    DefaultUs,
    /// The equal weight of the codes: asked for, or why it is the default.
    EqualWeight(Option<&'static str>),
}

/// Whether every code is a US equity.
pub(crate) fn us_only(markets: &[Market]) -> bool {
    !markets.is_empty() && markets.iter().all(|m| *m == Market::UsEquity)
}

/// The benchmark `cfg` asks for.
pub(crate) fn wanted(cfg: &BacktestConfig) -> Wanted {
    match cfg.benchmark.as_deref() {
        Some(t) if t.eq_ignore_ascii_case(EQUAL_WEIGHT) => Wanted::EqualWeight(None),
        Some(t) => Wanted::Ticker(t.to_string()),
        None => {
            let markets: Vec<Market> = cfg
                .codes
                .iter()
                .map(|c| crate::research::data::detect_market(c))
                .collect();
            if us_only(&markets) {
                Wanted::DefaultUs
            } else {
                Wanted::EqualWeight(Some("the codes are not all US equities"))
            }
        }
    }
}

/// The benchmark's series for `cfg`, if it needs one: a named ticker must
/// load (an error stops the backtest, as a code's would); the default SPY
/// is looked for along the US chain (the embedded set first) and is left
/// out when nothing serves it, which [`resolve`] reports.
pub(crate) async fn fetch(
    cfg: &BacktestConfig,
    md: &MarketData,
) -> Result<Option<PriceSeries>, DataError> {
    let want = wanted(cfg);
    let ticker = match &want {
        Wanted::Ticker(t) => t.clone(),
        Wanted::DefaultUs => DEFAULT_US.to_string(),
        Wanted::EqualWeight(_) => return Ok(None),
    };
    let got = md
        .fetch_all(
            std::slice::from_ref(&ticker),
            Some(cfg.start_date),
            Some(cfg.end_date),
            SourceChoice::Auto,
        )
        .await
        .map(|u| u.series.into_iter().next());
    match (got, want) {
        (Ok(s), _) => Ok(s.filter(|s| !s.bars.is_empty())),
        (Err(e), Wanted::DefaultUs) => {
            tracing::debug!("no data for the default benchmark {DEFAULT_US}: {e}");
            Ok(None)
        }
        (Err(e), _) => Err(e),
    }
}

/// The benchmark a backtest was measured against.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Resolved {
    /// The ticker, or `equal_weight`.
    pub label: String,
    /// Its return on each bar of the backtest's calendar.
    pub returns: Vec<f64>,
    /// Why it is not what the config asked for, or where it is incomplete.
    pub note: Option<String>,
}

/// The benchmark's closes on the panel's calendar (the last close on or
/// before each date; NaN before its first bar) and its bar returns.
fn on_calendar(panel: &Panel, b: &PriceSeries) -> (Vec<f64>, Vec<bool>) {
    let bp = Panel::new(std::slice::from_ref(&b.symbol), &[&b.bars], usize::MAX);
    let mut out = vec![0.0; panel.n()];
    let mut covered = vec![false; panel.n()];
    let mut j = 0;
    let mut last = f64::NAN;
    let mut prev = f64::NAN;
    let end = bp.dates.last().copied();
    for (t, d) in panel.dates.iter().enumerate() {
        while j < bp.dates.len() && bp.dates[j] <= *d {
            last = bp.mark[j];
            j += 1;
        }
        if t > 0 && prev.is_finite() && last.is_finite() && prev != 0.0 {
            out[t] = last / prev - 1.0;
        }
        // A bar is covered when its return (or, on the first bar, its
        // close) is known and the benchmark has not ended before it.
        covered[t] =
            last.is_finite() && (t == 0 || prev.is_finite()) && end.is_some_and(|e| *d <= e);
        prev = last;
    }
    (out, covered)
}

fn span(b: &PriceSeries) -> String {
    let f = |d: Option<NaiveDate>| d.map_or("-".into(), |d| d.to_string());
    format!("{} to {}", f(b.bars.first_date()), f(b.bars.last_date()))
}

/// The benchmark actually used, from what `cfg` asks for and the series
/// [`fetch`] found.
pub(crate) fn resolve(
    cfg: &BacktestConfig,
    panel: &Panel,
    bench: Option<&PriceSeries>,
) -> Resolved {
    let equal = |note: Option<String>| Resolved {
        label: EQUAL_WEIGHT.into(),
        returns: panel.benchmark_returns(),
        note,
    };
    let n = panel.n();
    match (wanted(cfg), bench) {
        (Wanted::EqualWeight(why), _) => {
            equal(why.map(|w| format!("{w}: the benchmark is the equal weight of the codes")))
        }
        (Wanted::DefaultUs, None) => {
            let held = embedded::instrument(DEFAULT_US)
                .map(|x| {
                    format!(
                        " (the embedded {DEFAULT_US} covers {} to {})",
                        x.first, x.last
                    )
                })
                .unwrap_or_default();
            equal(Some(format!(
                "no {DEFAULT_US} data for {} to {}{held}: the benchmark is the equal weight of the codes",
                cfg.start_date, cfg.end_date
            )))
        }
        (Wanted::Ticker(t), None) => equal(Some(format!(
            "no data for the benchmark {t}: the benchmark is the equal weight of the codes"
        ))),
        (Wanted::Ticker(_), Some(b)) => {
            let (returns, covered) = on_calendar(panel, b);
            let missing = covered.iter().filter(|c| !**c).count();
            let note = (missing > 0).then(|| {
                format!(
                    "{}'s data covers {}: its return is 0 on {missing} of the {n} bars",
                    b.symbol,
                    span(b)
                )
            });
            Resolved {
                label: b.symbol.clone(),
                returns,
                note,
            }
        }
        (Wanted::DefaultUs, Some(b)) => {
            let (spy, covered) = on_calendar(panel, b);
            let missing = covered.iter().filter(|c| !**c).count();
            if missing == 0 {
                return Resolved {
                    label: DEFAULT_US.into(),
                    returns: spy,
                    note: None,
                };
            }
            if (missing as f64) > MAX_UNCOVERED_SHARE * n as f64 {
                return equal(Some(format!(
                    "{DEFAULT_US}'s data covers {}, {missing} of the {n} bars are outside it: the benchmark is the equal weight of the codes",
                    span(b)
                )));
            }
            let ew = panel.benchmark_returns();
            let returns = (0..n)
                .map(|t| if covered[t] { spy[t] } else { ew[t] })
                .collect();
            Resolved {
                label: DEFAULT_US.into(),
                returns,
                note: Some(format!(
                    "{DEFAULT_US}'s data covers {}: {missing} of the {n} bars use the equal weight of the codes",
                    span(b)
                )),
            }
        }
    }
}

/// The risk-free rate of the backtest's bars: the 3-month Treasury yield
/// for US equities (see `rates::per_bar`), else zero.
pub(crate) fn risk_free(markets: &[Market], dates: &[NaiveDate], bars_per_year: f64) -> RiskFree {
    if us_only(markets) {
        rates::per_bar(dates, bars_per_year)
    } else {
        RiskFree::zero(
            dates.len(),
            "the codes are not all US equities: Sharpe and Sortino use a zero risk-free rate",
        )
    }
}
