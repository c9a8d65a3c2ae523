//! The quant tools' contract (docs §15): `option_price`,
//! `implied_volatility`, `option_strategy`, `portfolio_optimize` and
//! `risk_report`, their arguments (whose schemas the model is offered) and
//! their outputs (which the offline planner and the chat's payoff chart
//! read), beside the other built-ins' in [`super::contract`].
//!
//! As there, enum-valued arguments are strings whose schema lists a typed
//! enum's values, so a bad value gets the tool's own message; numbers are
//! plain `f64`. Every tool that reads data takes it from the market-data
//! layer (`symbols`, `start`, `end`) or inline (`returns`).

use std::collections::BTreeMap;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

// A call or a put.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OptionKindName {
    Call,
    Put,
}

// How an option may be exercised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExerciseStyle {
    European,
    American,
}

// What a strategy leg holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LegKindName {
    Call,
    Put,
    Stock,
}

// The portfolio methods (`portfolio_optimize`, a backtest's `optimizer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PortfolioMethodName {
    EqualWeight,
    InverseVolatility,
    MinVariance,
    MaxSharpe,
    RiskParity,
    MaxDiversification,
    Hrp,
}

// The covariance estimates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CovarianceName {
    Sample,
    LedoitWolf,
}

/// Named return series in the order given (`{"A": [0.01, …], …}`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NamedSeries(pub Vec<(String, Vec<f64>)>);

impl<'de> Deserialize<'de> for NamedSeries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // serde_json's map keeps the order (feature `preserve_order`).
        let map = serde_json::Map::<String, Value>::deserialize(d)?;
        let mut out = Vec::with_capacity(map.len());
        for (name, v) in map {
            let series: Vec<f64> = serde_json::from_value(v).map_err(|e| {
                serde::de::Error::custom(format!(
                    "returns.{name} must be an array of numbers (daily simple returns, 0.01 for 1 %): {e}"
                ))
            })?;
            out.push((name, series));
        }
        Ok(NamedSeries(out))
    }
}

impl Serialize for NamedSeries {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl JsonSchema for NamedSeries {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NamedSeries".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "additionalProperties": {"type": "array", "items": {"type": "number"}}
        })
    }
}

/// `option_price`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OptionPriceArgs {
    #[schemars(with = "OptionKindName")]
    pub kind: String,
    /// european (Black–Scholes–Merton, default) or american (Cox–Ross–Rubinstein tree)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<ExerciseStyle>")]
    pub style: Option<String>,
    /// Underlying price; absent: the last close of 'symbol' on or before 'as_of'
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spot: Option<f64>,
    /// Strike price (or give 'moneyness')
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strike: Option<f64>,
    /// Strike as a multiple of the spot when no strike is given (1 = at the money, 1.1 = 10 % above)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moneyness: Option<f64>,
    /// Years to expiry (0.25 for three months)
    pub expiry_years: f64,
    /// Annual volatility (0.2 for 20 %); absent: the realised volatility of 'symbol' over the last 252 daily returns
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volatility: Option<f64>,
    /// Continuous annual rate (0.05 for 5 %); default 0, or with 'symbol' the 3-month Treasury yield on 'as_of'
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Continuous annual dividend yield (default 0)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dividend_yield: Option<f64>,
    /// Binomial steps for american (default 500)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<i64>,
    /// Ticker whose data fills spot, volatility and rate when they are absent
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Date for 'symbol', YYYY-MM-DD (default: its last bar)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// The inputs an option was priced with, and where each came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct OptionInputsUsed {
    pub spot: f64,
    /// Absent for a multi-leg position.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strike: Option<f64>,
    pub expiry_years: f64,
    pub volatility: f64,
    pub rate: f64,
    pub dividend_yield: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<usize>,
    /// Where each input that was not given as a number came from
    /// (`spot: AAPL adjusted close 174.67 on 2017-11-10`, `dividend_yield:
    /// 0 (not given)`), one line each, keyed by the argument's name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    /// The date of the symbol's data the inputs were read at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// `option_price`'s answer (QuantLib's units: vega and rho per 1.00,
/// theta per year).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct OptionPriceOutput {
    pub status: String,
    pub kind: String,
    pub style: String,
    /// `black_scholes_merton` or `crr_binomial`.
    pub model: String,
    pub price: f64,
    pub delta: f64,
    pub gamma: f64,
    pub vega: f64,
    pub theta: f64,
    pub rho: f64,
    /// Theta for one calendar day: `theta / 365`.
    pub theta_per_day: f64,
    /// Vega for one volatility point (0.01): `vega / 100`.
    pub vega_per_point: f64,
    pub inputs: OptionInputsUsed,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// The conventions, in one line.
    pub units: String,
}

/// `implied_volatility`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ImpliedVolatilityArgs {
    #[schemars(with = "OptionKindName")]
    pub kind: String,
    /// Underlying price; absent: the last close of 'symbol' on or before 'as_of'
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spot: Option<f64>,
    /// Strike price (or give 'moneyness')
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strike: Option<f64>,
    /// Strike as a multiple of the spot when no strike is given (1 = at the money)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moneyness: Option<f64>,
    /// Years to expiry
    pub expiry_years: f64,
    /// The option's market price (European)
    pub price: f64,
    /// Continuous annual rate (default 0)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Continuous annual dividend yield (default 0)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dividend_yield: Option<f64>,
    /// Ticker whose last close is the spot when 'spot' is absent
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Date for 'symbol', YYYY-MM-DD (default: its last bar)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// `implied_volatility`'s answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ImpliedVolatilityOutput {
    pub status: String,
    pub kind: String,
    pub volatility: f64,
    pub iterations: u32,
    /// The Black–Scholes–Merton price at that volatility.
    pub price_check: f64,
    /// The inputs (volatility: the one found), and where each came from.
    pub inputs: OptionInputsUsed,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
}

/// One leg of `option_strategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LegArgs {
    #[schemars(with = "LegKindName")]
    pub kind: String,
    /// Strike (options; not for stock)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strike: Option<f64>,
    /// Strike as a multiple of the spot when no strike is given (1 = at the money)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moneyness: Option<f64>,
    /// Units; negative = short
    pub quantity: f64,
    /// Price paid per unit; absent: Black–Scholes–Merton (options) or the spot (stock)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub premium: Option<f64>,
}

/// `option_strategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OptionStrategyArgs {
    /// The legs, e.g. [{"kind":"call","strike":100,"quantity":1},{"kind":"call","strike":110,"quantity":-1}]
    pub legs: Vec<LegArgs>,
    /// Underlying price; absent: the last close of 'symbol' on or before 'as_of'
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spot: Option<f64>,
    /// Annual volatility; absent: the realised volatility of 'symbol' over the last 252 daily returns
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volatility: Option<f64>,
    /// Years to expiry
    pub expiry_years: f64,
    /// Continuous annual rate (default 0, or with 'symbol' the 3-month Treasury yield)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Continuous annual dividend yield (default 0)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dividend_yield: Option<f64>,
    /// [low, high] of the payoff grid (default half the lowest to 1.5× the highest of spot and strikes)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spot_range: Option<Vec<f64>>,
    /// Grid points (default 41, at most 1001); strikes and breakevens are added
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub points: Option<i64>,
    /// Ticker whose data fills spot, volatility and rate when they are absent
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Date for 'symbol', YYYY-MM-DD (default: its last bar)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// A leg as priced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct PricedLegOutput {
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strike: Option<f64>,
    pub quantity: f64,
    pub premium: f64,
    pub premium_from_model: bool,
}

/// One point of the payoff at expiry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct PayoffPoint {
    pub spot: f64,
    pub pnl: f64,
}

/// A position's Greeks (price: its model value today).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct GreeksOutput {
    pub value: f64,
    pub delta: f64,
    pub gamma: f64,
    pub vega: f64,
    pub theta: f64,
    pub rho: f64,
}

/// The position after a spot and volatility shock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct StressOutput {
    pub spot_shift: f64,
    pub volatility_shift: f64,
    pub value: f64,
    pub pnl: f64,
}

/// `option_strategy`'s answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct OptionStrategyOutput {
    pub status: String,
    /// The position's name when its legs have a known shape ("straddle",
    /// "bull call spread", "short strangle" …), else "position".
    pub position: String,
    pub legs: Vec<PricedLegOutput>,
    /// Σ quantity × premium: positive paid, negative received.
    pub net_premium: f64,
    pub payoff: Vec<PayoffPoint>,
    pub breakevens: Vec<f64>,
    /// Null when unbounded.
    pub max_profit: Option<f64>,
    /// The largest loss as a positive amount; null when unbounded.
    pub max_loss: Option<f64>,
    pub greeks: GreeksOutput,
    pub stress: Vec<StressOutput>,
    pub inputs: OptionInputsUsed,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
}

/// `portfolio_optimize`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PortfolioOptimizeArgs {
    /// Tickers whose adjusted closes give the daily returns, e.g. ["AAPL","MSFT","JPM"]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbols: Option<Vec<String>>,
    /// Inline daily simple returns instead of symbols: {"name": [r, …]}, equal lengths
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returns: Option<NamedSeries>,
    /// First date, YYYY-MM-DD (symbols)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Last date, YYYY-MM-DD (symbols)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    #[schemars(with = "PortfolioMethodName")]
    pub method: String,
    /// Annual risk-free rate for Sharpe, decimal (0.02 for 2 %); default: the 3-month T-bill over the dates (symbols), else 0
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_free: Option<f64>,
    /// The same as risk_free (its former name)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_free_rate: Option<f64>,
    /// Smallest weight (default 0; long-only)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_weight: Option<f64>,
    /// Largest weight (default 1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_weight: Option<f64>,
    /// Covariance estimate (default sample)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<CovarianceName>")]
    pub covariance: Option<String>,
}

/// Where a tool's returns came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ReturnsData {
    /// `market data` or `inline`.
    pub origin: String,
    /// First and last date of the returns (market data only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    pub days: usize,
    /// Each series' source (`AAPL: embedded`), market data only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// `portfolio_optimize`'s answer (annual figures).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct PortfolioOptimizeOutput {
    pub status: String,
    pub method: String,
    pub covariance: String,
    pub weights: IndexMap<String, f64>,
    pub expected_return: f64,
    pub volatility: f64,
    pub sharpe: f64,
    pub risk_contributions: IndexMap<String, f64>,
    /// The annual rate the Sharpe is measured over (see `risk_free`).
    pub risk_free_rate: f64,
    /// Which rate, with its source (docs §15.1.1).
    pub risk_free: String,
    pub min_weight: f64,
    pub max_weight: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shrinkage: Option<f64>,
    pub data: ReturnsData,
    /// The conventions, in one line.
    pub conventions: String,
}

/// `risk_report`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RiskReportArgs {
    /// Tickers of the book, e.g. ["SPY","TLT"]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbols: Option<Vec<String>>,
    /// Weight by name, e.g. {"SPY":0.6,"TLT":0.4} (default: equal weights); may be negative (short)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<BTreeMap<String, f64>>,
    /// Inline daily simple returns instead of symbols: {"name": [r, …]}, one series or several of equal length
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returns: Option<NamedSeries>,
    /// First date, YYYY-MM-DD (symbols)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Last date, YYYY-MM-DD (symbols)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// Confidence level (default 0.95; 0.99 for 99 %)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Horizon in trading days (default 1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizon_days: Option<i64>,
}

/// One drawdown; dates with market data, else positions on the wealth
/// path (0: before the first return).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct DrawdownOutput {
    pub peak: Value,
    pub trough: Value,
    /// Null when not recovered by the end.
    pub recovery: Value,
    pub depth: f64,
}

/// `risk_report`'s answer: losses as positive fractions over the horizon.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct RiskReportOutput {
    pub status: String,
    pub confidence: f64,
    pub horizon_days: usize,
    pub var_historical: f64,
    pub es_historical: f64,
    pub var_parametric: f64,
    pub es_parametric: f64,
    pub var_cornish_fisher: f64,
    pub volatility: f64,
    pub max_drawdown: f64,
    pub drawdowns: Vec<DrawdownOutput>,
    pub component_var: IndexMap<String, f64>,
    pub hhi: f64,
    pub effective_n: f64,
    pub weights: IndexMap<String, f64>,
    pub skewness: f64,
    pub excess_kurtosis: f64,
    pub data: ReturnsData,
    /// How each figure is computed, in one line.
    pub conventions: String,
}
