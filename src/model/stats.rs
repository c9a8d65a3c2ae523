//! The time-series tools' contract (docs §16): `stat_test` and
//! `volatility_model`, their arguments (whose schemas the model is offered)
//! and their outputs (which the offline planner, the teams and the pairs
//! desk read), beside [`super::quant`]'s.
//!
//! As there, enum-valued arguments are strings whose schema lists a typed
//! enum's values, so a bad value gets the tool's own message; data comes
//! from the market-data layer (`symbols` / `symbol`, `start`, `end`) or
//! inline (`series` / `returns` as `{name: [values]}`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use super::quant::{NamedSeries, ReturnsData};

// The tests `stat_test` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatTestName {
    Adf,
    Kpss,
    EngleGranger,
    Johansen,
    HalfLife,
    Hurst,
    LjungBox,
    JarqueBera,
}

// What a symbol's closes become before a test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SeriesField {
    Close,
    LogClose,
    Returns,
}

// A test regression's deterministic terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RegressionName {
    C,
    Ct,
    N,
}

// How ADF picks its lag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AutolagName {
    Aic,
    Bic,
    None,
}

// The volatility models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VolatilityModelName {
    Ewma,
    Garch,
    GjrGarch,
}

// The GARCH errors' distributions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorDistName {
    Normal,
    T,
}

/// `stat_test`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatTestArgs {
    #[schemars(with = "StatTestName")]
    pub test: String,
    /// Inline series instead of symbols, used as given: {"name": [values]}; engle_granger takes two of equal length (the first regressed on the second), johansen 2 to 12
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<NamedSeries>,
    /// Tickers: one for a single-series test, two for engle_granger (the first regressed on the second), 2 to 12 for johansen, e.g. ["KO","PEP"]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbols: Option<Vec<String>>,
    /// First date, YYYY-MM-DD (symbols; default: the start of their common history)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Last date, YYYY-MM-DD (symbols; default: the end of their common history)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// What the symbols' adjusted closes become: close, log_close (default for adf, kpss, engle_granger, johansen, half_life, hurst) or returns (simple daily; default for ljung_box, jarque_bera)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<SeriesField>")]
    pub field: Option<String>,
    /// Deterministic terms: c (constant, default), ct (constant and trend), n (none; adf, engle_granger and johansen only); for johansen statsmodels' det_order 0, 1, -1
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<RegressionName>")]
    pub regression: Option<String>,
    /// ADF lag choice (adf, engle_granger): aic (default), bic, or none (use max_lags)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<AutolagName>")]
    pub autolag: Option<String>,
    /// adf / engle_granger: the largest lag (default ⌈12·(n/100)^¼⌉); kpss: the lag itself (default: Hobijn et al.'s automatic choice); ljung_box: lags tested (default 10); johansen: the number of lagged differences k_ar_diff (default 1, at least 1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lags: Option<i64>,
}

/// One Ljung–Box lag.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct LjungBoxLag {
    pub lag: usize,
    pub statistic: f64,
    pub p_value: f64,
    pub autocorrelation: f64,
}

/// One null hypothesis of a Johansen test: rank ≤ r.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct JohansenRank {
    pub r: usize,
    /// λ_(r+1), the (r+1)-th largest eigenvalue.
    pub eigenvalue: f64,
    /// −T Σ_(i>r) ln(1 − λ_i).
    pub trace: f64,
    /// {"1%": …, "5%": …, "10%": …}: the 99 %, 95 % and 90 % quantiles for n − r trends.
    pub trace_critical_values: Map<String, Value>,
    /// −T ln(1 − λ_(r+1)).
    pub max_eigen: f64,
    pub max_eigen_critical_values: Map<String, Value>,
}

/// `stat_test`'s answer: the fields its test fills.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct StatTestOutput {
    pub status: String,
    pub test: String,
    /// The series tested (engle_granger: the dependent first).
    pub series: Vec<String>,
    /// What was tested: close, log_close, returns, or inline.
    pub field: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statistic: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// {"1%": …, "5%": …, "10%": …} (kpss adds "2.5%").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_values: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_lag: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_lag: Option<usize>,
    /// Observations of the test's regression (or of the series).
    pub n_obs: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regression: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autolag: Option<String>,
    /// engle_granger: the spread is first − intercept − hedge_ratio × second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hedge_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intercept: Option<f64>,
    /// engle_granger with ct: the trend per bar.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trend_slope: Option<f64>,
    /// engle_granger: the spread's latest z-score (its last value over its standard deviation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spread_z: Option<f64>,
    /// half_life and engle_granger (of the spread): −ln 2 / b in bars; null when the series does not revert.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub half_life_days: Option<f64>,
    /// half_life: b of Δy_t = a + b·y_{t−1}.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reversion_coefficient: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hurst: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ljung_box: Vec<LjungBoxLag>,
    /// johansen: one row per null hypothesis rank ≤ r, r = 0 … n − 1.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rank_tests: Vec<JohansenRank>,
    /// johansen: the rank at 5 % by the trace test (the first r not rejected; n if all are).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank_trace: Option<usize>,
    /// johansen: the rank at 5 % by the maximum-eigenvalue test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank_max_eigen: Option<usize>,
    /// johansen: the cointegrating vectors of the trace rank, each scaled so its first component is 1; Σ β_i × series_i is stationary.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cointegrating_vectors: Vec<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skewness: Option<f64>,
    /// Not in excess (3 for a normal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kurtosis: Option<f64>,
    /// The plain reading at the 5 % level.
    pub conclusion: String,
    pub data: ReturnsData,
    /// The test's conventions and reference, in one line.
    pub conventions: String,
}

/// `volatility_model`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VolatilityModelArgs {
    /// Inline daily simple returns instead of a symbol: {"name": [r, …]}, one series (0.01 for 1 %)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returns: Option<NamedSeries>,
    /// Ticker whose adjusted closes give the daily returns, e.g. "SPY"
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// First date, YYYY-MM-DD (default: 2,520 daily returns, ten years, before 'end')
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Last date, YYYY-MM-DD (default: the symbol's last bar)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// garch (GARCH(1,1)), gjr_garch (GJR-GARCH(1,1,1): a leverage term γ for negative returns) or ewma (RiskMetrics)
    #[schemars(with = "VolatilityModelName")]
    pub model: String,
    /// garch / gjr_garch errors: normal (default) or t (standardised Student-t, degrees of freedom nu estimated)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<ErrorDistName>")]
    pub dist: Option<String>,
    /// EWMA decay (default 0.94, RiskMetrics daily)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda: Option<f64>,
    /// Days of forecast (default 10, at most 252)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizon_days: Option<i64>,
}

/// One point of the conditional volatility path.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct VolPoint {
    /// The return's date (market data) or its position (inline).
    pub at: Value,
    /// Annualized: √(252 σ²_t), a fraction.
    pub vol_annualized: f64,
}

/// One fitted GARCH parameter and its inference.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ParamEstimate {
    /// mu, omega, alpha, gamma (gjr_garch), beta or nu (t errors).
    pub name: String,
    /// As the top-level field (mu in percent, omega in percent²).
    pub estimate: f64,
    /// Robust (Bollerslev–Wooldridge sandwich) standard error, arch's default; null when the covariance is not positive there.
    pub std_err: Option<f64>,
    /// estimate / std_err.
    pub t_stat: Option<f64>,
    /// Two-sided, normal: 2·(1 − Φ(|t|)).
    pub p_value: Option<f64>,
    /// The classic (inverse-Hessian) standard error, for comparison.
    pub std_err_classic: Option<f64>,
}

/// `volatility_model`'s answer; volatilities annualized as fractions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct VolatilityModelOutput {
    pub status: String,
    pub model: String,
    pub series: String,
    /// GARCH: the mean daily return, in percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mu: Option<f64>,
    /// GARCH: ω, in percent².
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omega: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    /// GJR-GARCH: γ, the extra reaction to negative returns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
    /// t errors: the degrees of freedom ν.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nu: Option<f64>,
    /// The errors' distribution, normal or t (absent for the default normal GARCH and for EWMA).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dist: Option<String>,
    /// GARCH: α + β (GJR: α + γ/2 + β).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistence: Option<f64>,
    /// GARCH: each parameter with its robust standard error, t-statistic and p-value, as arch's fit summary.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<ParamEstimate>,
    /// GARCH: days for a variance shock to halve, ln 0.5 / ln(persistence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shock_half_life_days: Option<f64>,
    /// The log-likelihood of the returns in percent (arch's scale) under the fitted distribution (EWMA: normal).
    pub loglik: f64,
    /// GARCH: √(252 ω / (1 − persistence)) / 100; null without mean reversion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub long_run_vol_annualized: Option<f64>,
    /// EWMA: the decay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lambda: Option<f64>,
    /// The last conditional volatility, annualized.
    pub current_vol_annualized: f64,
    /// The sample's own volatility (ddof 1, × √252), for comparison.
    pub realized_vol_annualized: f64,
    /// Annualized volatility forecast for each of the next horizon_days days.
    pub forecast: Vec<f64>,
    /// The conditional volatility's last days.
    pub tail: Vec<VolPoint>,
    pub horizon_days: usize,
    pub n_obs: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iterations: Option<usize>,
    pub data: ReturnsData,
    /// The model and its conventions, in one line.
    pub conventions: String,
}
