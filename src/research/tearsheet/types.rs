//! The tear sheet's input and output types: the contract between the
//! computation, the report writers and the workstation's view. Every series
//! is aligned with `TearSheet::dates`; a value that is not defined (a
//! rolling window not yet full, a ratio over zero) is `None`, never NaN, so
//! the JSON and every renderer read it alike.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

/// One daily return series to judge, with what it is compared against.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TearSheetInput {
    /// A short name for headings ("SMA 20/50 on SPY").
    pub title: String,
    /// Trading dates, strictly increasing.
    pub dates: Vec<NaiveDate>,
    /// Daily simple returns of the strategy, one per date. NaN marks a day
    /// without a return (a gap), which every statistic skips.
    pub returns: Vec<f64>,
    /// The benchmark's daily simple returns on the same dates, if any.
    pub benchmark: Option<Benchmark>,
    /// The risk-free rate as a daily simple return on the same dates (the
    /// 3-month T-bill, docs §15.1.1); `None` means zero, and says so.
    pub risk_free: Option<RiskFreeInput>,
    /// Executed weights at each close, if the result has positions.
    pub positions: Option<PositionsInput>,
    pub options: TearSheetOptions,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Benchmark {
    /// "SPY", or what the run card names.
    pub name: String,
    pub returns: Vec<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RiskFreeInput {
    /// Where the rate comes from ("3-month T-bill, US Treasury").
    pub source: String,
    pub daily: Vec<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PositionsInput {
    /// Symbol codes, one per weight column.
    pub codes: Vec<String>,
    /// One row per date, one weight per code (fraction of equity; negative
    /// is short).
    pub weights: Vec<Vec<f64>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TearSheetOptions {
    /// Annualisation factor (252 for daily bars).
    pub periods_per_year: f64,
    /// How many of the worst drawdown periods the table lists.
    pub top_drawdowns: usize,
    /// Bins of each return histogram.
    pub histogram_bins: usize,
}

impl Default for TearSheetOptions {
    fn default() -> Self {
        Self {
            periods_per_year: 252.0,
            top_drawdowns: 10,
            histogram_bins: 30,
        }
    }
}

/// The whole tear sheet.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TearSheet {
    pub title: String,
    pub start: NaiveDate,
    pub end: NaiveDate,
    /// The conventions every number rests on (annualisation, risk-free
    /// source, first-day handling, benchmark), in the order a report lists
    /// them.
    pub assumptions: Vec<String>,
    /// quantstats' `reports.metrics(mode="full")` rows, in its order.
    pub metrics: Vec<Metric>,
    pub monthly: MonthlyTable,
    pub annual: Vec<AnnualRow>,
    /// Worst first.
    pub drawdowns: Vec<DrawdownPeriod>,
    pub series: Series,
    pub distribution: Vec<Distribution>,
    pub positions: Option<PositionStats>,
}

/// One metric row: the strategy's value and, when a benchmark is given,
/// the benchmark's value under the same definition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Metric {
    /// A stable snake_case key ("sharpe", "max_drawdown").
    pub key: String,
    /// The label quantstats prints ("Sharpe", "Max Drawdown").
    pub name: String,
    pub unit: Unit,
    pub value: Option<f64>,
    pub benchmark: Option<f64>,
    /// Where the definition differs from quantstats', what it does instead
    /// and why (docs §20.1).
    pub note: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// A fraction shown as a percentage (0.12 → 12.00 %).
    Percent,
    /// A plain ratio (Sharpe, beta).
    Ratio,
    /// A count of days or periods.
    Count,
}

/// Years × months of compounded monthly returns, plus the year's.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MonthlyTable {
    pub years: Vec<i32>,
    /// `cells[y][m]` for `years[y]` and month `m + 1`; `None` where the
    /// series has no day in that month.
    pub cells: Vec<[Option<f64>; 12]>,
    /// The compounded return of each year (the "EOY" column).
    pub year: Vec<Option<f64>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AnnualRow {
    pub year: i32,
    pub strategy: f64,
    pub benchmark: Option<f64>,
}

/// One drawdown period: from the peak it falls from to the day it is made
/// good again.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DrawdownPeriod {
    /// The first day below the previous peak.
    pub start: NaiveDate,
    /// The day of the lowest equity.
    pub trough: NaiveDate,
    /// The last day below the peak (quantstats' `end`).
    pub end: NaiveDate,
    /// The day equity is back at the peak; `None` is "not recovered".
    pub recovery: Option<NaiveDate>,
    /// The depth as a negative fraction (−0.25 is a 25 % fall).
    pub depth: f64,
    /// Calendar days from start to `end`, both counted (quantstats'
    /// `days`).
    pub days: i64,
}

/// The curves, aligned with `dates`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Series {
    pub dates: Vec<NaiveDate>,
    /// Compounded growth of 1.
    pub equity: Vec<f64>,
    pub benchmark_equity: Option<Vec<f64>>,
    /// Drawdown from the running peak, ≤ 0.
    pub underwater: Vec<f64>,
    /// Rolling 6- and 12-month Sharpe, Sortino, volatility and beta.
    pub rolling: Vec<Rolling>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rolling {
    /// "sharpe", "sortino", "volatility" or "beta".
    pub statistic: String,
    /// The window in trading days (126 or 252).
    pub window: usize,
    pub values: Vec<Option<f64>>,
}

/// The return distribution at one frequency.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Distribution {
    pub period: Period,
    /// How many returns of this period the series holds.
    pub count: usize,
    /// (probability, return) pairs: 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99.
    pub quantiles: Vec<(f64, f64)>,
    /// `edges.len() == counts.len() + 1`.
    pub edges: Vec<f64>,
    pub counts: Vec<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Period {
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

/// Exposure and turnover, where the result has positions.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PositionStats {
    /// Aligned with `Series::dates`.
    pub gross: Vec<f64>,
    pub net: Vec<f64>,
    pub long: Vec<f64>,
    pub short: Vec<f64>,
    /// Half the sum of absolute weight changes each day.
    pub turnover: Vec<f64>,
    /// Turnover annualised over the whole period.
    pub annual_turnover: f64,
    /// The codes in weight order (largest mean absolute weight first).
    pub codes: Vec<String>,
    /// `weights[i]` is the series of `codes[i]`.
    pub weights: Vec<Vec<f64>>,
}
