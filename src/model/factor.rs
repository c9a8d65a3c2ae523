//! The "is the edge real" tools' contract (docs §17): `factor_ic`,
//! `regression` and `overfitting`, their arguments (whose schemas the model
//! is offered) and their outputs (which the offline planner and the teams
//! read), beside the quant desk's in [`super::quant`].
//!
//! Data comes from the market-data layer (`universe` / symbols, `start`,
//! `end`) or inline: a factor as `{date: {symbol: value}}`, series as
//! `{name: [values]}`, returns as fractions (0.01 for 1 %).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use super::quant::NamedSeries;

// How often a regression's returns are taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FrequencyName {
    Daily,
    Monthly,
}

/// A series named by a ticker or given inline: the schema says
/// "string or object", the tool reads which.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SeriesRef(pub Value);

impl JsonSchema for SeriesRef {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SeriesRef".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": ["string", "object"]
        })
    }
}

/// `factor_ic`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FactorIcArgs {
    /// The factor: an indicator spec, e.g. {"indicator": "momentum", "params": {"window": 252, "skip": 21}} (12-1 momentum; any indicator of technical_indicator that reads one symbol), or inline values {"YYYY-MM-DD": {"AAPL": 0.12, "MSFT": -0.03}, …}
    pub factor: Map<String, Value>,
    /// Tickers of the cross-section (default: the offline market's 106 stocks; with an inline factor, its symbols)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universe: Option<Vec<String>>,
    /// First date, YYYY-MM-DD
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Last date, YYYY-MM-DD (forward returns stop here too)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// Forward horizons in trading days (default [1, 5, 21])
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_days: Option<Vec<i64>>,
    /// Buckets by factor value (default 5: quintiles)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantiles: Option<i64>,
    /// Every scored date's IC in ic_series (default: the last 5)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_series: Option<bool>,
}

/// One horizon of `factor_ic`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct HorizonIcOutput {
    pub forward_days: usize,
    pub ic_mean: f64,
    pub ic_std: f64,
    pub ic_ir: f64,
    pub t_stat: f64,
    /// With Newey–West standard errors over forward_days − 1 lags (the
    /// overlapping returns' autocorrelation).
    pub t_stat_nw: f64,
    pub hit_rate: f64,
    pub dates_scored: usize,
    pub dates_skipped: usize,
    pub mean_names: f64,
    /// Mean forward return over forward_days by quantile, Q1 (lowest
    /// factor) first.
    pub quantile_returns: Vec<f64>,
    /// Top quantile minus bottom, per date then averaged.
    pub spread: f64,
    pub top_turnover: f64,
    /// `[year, mean IC (6 decimals), dates scored]` for each calendar year.
    pub ic_by_year: Vec<(i32, f64, usize)>,
    /// `[date, IC]` of the last 5 scored dates, or of every one with
    /// `full_series`.
    pub ic_series: Vec<(String, f64)>,
}

/// Where a tool's data came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct StudyData {
    /// `market data`, `inline`, `Fama–French`, or a mix.
    pub origin: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// `factor_ic`'s answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct FactorIcOutput {
    pub status: String,
    /// `momentum` (an indicator's name) or `inline`.
    pub factor: String,
    pub params: Value,
    pub universe: Vec<String>,
    pub dates: usize,
    pub quantiles: usize,
    pub horizons: Vec<HorizonIcOutput>,
    /// The warm-up the indicator was computed on (docs §7.4.1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup: Option<String>,
    pub data: StudyData,
    pub conventions: String,
}

/// `regression`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RegressionArgs {
    /// The dependent variable: a ticker (its returns) or inline {"name": [values]}
    pub y: SeriesRef,
    /// Regressors: tickers, "ff:MktRF", "ff:SMB", "ff:HML", "ff:Mom" (monthly Fama–French factors), or inline {"name": [values]} as long as an inline y; an intercept is always added
    pub x: Vec<SeriesRef>,
    /// First date, YYYY-MM-DD
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Last date, YYYY-MM-DD
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// daily or monthly returns (default daily; monthly with a Fama–French factor)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<FrequencyName>")]
    pub frequency: Option<String>,
    /// Newey–West lags (default ⌊4·(n/100)^(2/9)⌋; 0: White's HC0)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hac_lags: Option<i64>,
    /// Observations in each window of a rolling beta (e.g. 36 months, 252 days); absent: none
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_window: Option<i64>,
}

/// The rolling slopes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct RollingBetaOutput {
    pub window: usize,
    /// Observations between two windows' ends (at most 260 windows shown).
    pub step: usize,
    /// Each window's last date (or index for inline data).
    pub ends: Vec<Value>,
    pub betas: BTreeMap<String, Vec<f64>>,
}

/// `regression`'s answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct RegressionOutput {
    pub status: String,
    pub y: String,
    pub frequency: String,
    /// `const` (the alpha per period) first, then the regressors as given.
    pub coefficients: Map<String, Value>,
    pub r2: f64,
    pub adj_r2: f64,
    pub n: usize,
    pub residual_std: f64,
    pub hac_lags: usize,
    /// The intercept × 12 (monthly) or × 252 (daily).
    pub alpha_annualized: f64,
    /// Whether y and ticker regressors are in excess of the risk-free rate.
    pub excess_returns: bool,
    /// The rate subtracted, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk_free: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rolling: Option<RollingBetaOutput>,
    pub data: StudyData,
    pub conventions: String,
}

/// `overfitting`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OverfittingArgs {
    /// Daily returns by strategy {"name": [r, …]} (fractions; equal lengths for PBO)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returns: Option<NamedSeries>,
    /// Backtest run directories (a sweep's runs): each run's artifacts/equity.csv daily returns are one strategy
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<Vec<String>>,
    /// Tickers whose buy-and-hold daily returns over start..end are the strategies
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbols: Option<Vec<String>>,
    /// First date, YYYY-MM-DD (symbols)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Last date, YYYY-MM-DD (symbols)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// A reported Sharpe ratio (annualised) instead of returns: with 'observations', and 'skewness' / 'kurtosis' when known
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharpe: Option<f64>,
    /// Daily returns behind 'sharpe'
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observations: Option<i64>,
    /// Skewness of those returns (default 0)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skewness: Option<f64>,
    /// Kurtosis of those returns, 3 for a normal (default 3)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kurtosis: Option<f64>,
    /// The strategy's name for 'sharpe' (default "the strategy")
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Configurations tried in all (default: the strategies given)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trials: Option<i64>,
    /// Annualised Sharpe ratios of every trial, when only some trials' returns are given (their variance deflates the Sharpe)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial_sharpes: Option<Vec<f64>>,
    /// Annualised Sharpe ratio to beat (default 0)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub benchmark_sharpe: Option<f64>,
    /// Confidence for the minimum track record and the verdict (default 0.95)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// CSCV partitions for PBO (even, default 16)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<i64>,
    /// Annual risk-free rate, decimal, the Sharpe ratios are measured over; default: the 3-month T-bill on the returns' dates (symbols, runs), else 0
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_free: Option<f64>,
}

/// One strategy's Sharpe statistics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct StrategyStats {
    pub name: String,
    pub n: usize,
    /// Per period (daily), mean / std (ddof 1).
    pub sharpe: f64,
    pub sharpe_annualized: f64,
    pub skewness: f64,
    /// Not excess (3 for a normal).
    pub kurtosis: f64,
    pub psr: f64,
}

/// PBO by CSCV.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct PboOutput {
    pub pbo: f64,
    pub partitions: usize,
    pub combinations: usize,
    pub rows: usize,
    pub rows_dropped: usize,
    pub logit_median: f64,
    pub prob_oos_loss: f64,
    pub degradation_slope: f64,
}

/// `overfitting`'s answer: the statistics of the best strategy (highest
/// Sharpe) for the number of trials.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct OverfittingOutput {
    pub status: String,
    /// Which Sharpe every statistic here uses: excess over which rate,
    /// with its source (docs §15.1.1).
    pub risk_free: String,
    pub best: String,
    pub sharpe: f64,
    pub sharpe_annualized: f64,
    pub psr: f64,
    pub dsr: f64,
    pub trials: usize,
    /// The Sharpe the best of `trials` reaches by luck (SR₀), per period
    /// and annualised.
    pub expected_max_sharpe: f64,
    pub expected_max_sharpe_annualized: f64,
    /// Variance of the trials' per-period Sharpe ratios, and where it came
    /// from.
    pub trial_sharpe_variance: f64,
    pub variance_source: String,
    /// Periods (and years) of returns PSR needs to reach `confidence`;
    /// null when the Sharpe does not beat the benchmark.
    pub min_track_record: Option<f64>,
    pub min_track_record_years: Option<f64>,
    pub benchmark_sharpe: f64,
    pub confidence: f64,
    /// DSR ≥ confidence.
    pub survives: bool,
    pub verdict: String,
    pub strategies: Vec<StrategyStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pbo: Option<PboOutput>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pbo_note: Option<String>,
    pub data: StudyData,
    pub conventions: String,
}

/// One expression of a `factor_screen` call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NamedExpr {
    /// A short name the answer and the record use
    pub name: String,
    /// The formula in the factor language (docs §17.7), e.g. "-ts_corr(rank(open), rank(volume), 10)"
    pub expr: String,
}

/// `factor_screen`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FactorScreenArgs {
    /// "alpha101": the bundled 101 Formulaic Alphas that daily OHLCV supports (82, each with its paper number); give this or 'expressions'
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// Your own expressions [{"name", "expr"}] in the factor language; give this or 'library'
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expressions: Option<Vec<NamedExpr>>,
    /// Tickers of the cross-section (default: the offline market's stocks with data in the window)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbols: Option<Vec<String>>,
    /// First date screened, YYYY-MM-DD (factors are computed warm from bars before it)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Last date screened, YYYY-MM-DD (forward returns stop here too)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// Forward horizons in trading days (default [1, 5, 10, 21])
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizons: Option<Vec<i64>>,
    /// Buckets by factor value per date (default 5: quintiles)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantiles: Option<i64>,
    /// The horizon the ranking and the p-values read (default 1; one of horizons)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank_horizon: Option<i64>,
    /// Factors listed in the answer, best |rank ICIR| first (default 10; the record holds all)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top: Option<i64>,
    /// A `symbol,group` file (workspace-relative or absolute) for indneutralize
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<String>,
    /// Purged validation of the rank IC: {"purged_kfold": {"folds": K, "embargo_days": d}} or {"cpcv": {"groups": N, "test_groups": k, "embargo_days": d}} (docs §17.10)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<Map<String, Value>>,
}

/// One ranked factor of a screen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ScreenRow {
    pub rank: usize,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper_number: Option<u16>,
    /// Mean per-date rank IC at the rank horizon.
    pub rank_ic_mean: Option<f64>,
    /// Mean / std of the rank IC (per date, not annualised).
    pub rank_icir: Option<f64>,
    /// Newey–West t of the mean rank IC (h − 1 lags).
    pub t_nw: Option<f64>,
    pub p_value: Option<f64>,
    pub p_holm: Option<f64>,
    pub p_bh: Option<f64>,
    /// Top-minus-bottom quantile's mean forward return at the rank horizon.
    pub spread: Option<f64>,
    /// 1 − the mean lag-1 rank autocorrelation.
    pub turnover: Option<f64>,
    /// Share of symbol-dates with a value.
    pub coverage: Option<f64>,
    /// Mean rank IC at each horizon, in the order of `horizons`.
    pub ic_decay: Vec<Option<f64>>,
    /// With a `split`: the mean out-of-sample rank IC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out_of_sample_rank_ic: Option<f64>,
}

/// The `split`'s reading, in brief (the record holds each factor's).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ScreenValidationSummary {
    /// `purged_kfold` or `cpcv`.
    pub kind: String,
    pub splits: usize,
    pub paths: usize,
    pub observations: usize,
    pub embargo_days: usize,
    pub horizon_days: usize,
    /// Probability that the best in-sample factor overfits.
    pub pbo: Option<f64>,
}

/// A factor that could not be scored, and why.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ScreenFailure {
    pub name: String,
    pub error: String,
}

/// The deflated Sharpe of the best long-short.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ScreenDeflated {
    pub best: String,
    pub sharpe_annualized: Option<f64>,
    pub observations: usize,
    pub trials: usize,
    /// The Sharpe the best of `trials` reaches by luck, annualised.
    pub expected_max_sharpe_annualized: Option<f64>,
    pub psr: Option<f64>,
    pub dsr: Option<f64>,
}

/// `factor_screen`'s answer: counts, the top factors, and the file that
/// holds the whole screen (docs §17.11).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct FactorScreenOutput {
    pub status: String,
    /// `alpha101`, or `expressions` for the caller's own.
    pub library: String,
    pub tried: usize,
    pub scored: usize,
    pub failed: usize,
    pub failures: Vec<ScreenFailure>,
    pub symbols: usize,
    pub dates: usize,
    pub horizons: Vec<usize>,
    pub quantiles: usize,
    pub rank_horizon: usize,
    /// The best `top` by |rank ICIR| at the rank horizon.
    pub top: Vec<ScreenRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deflated: Option<ScreenDeflated>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation: Option<ScreenValidationSummary>,
    /// The screen record (docs §17.9), absolute: the workstation's factor view opens it.
    pub screen_file: String,
    pub warmup: String,
    pub assumptions: Vec<String>,
    pub data: StudyData,
}
