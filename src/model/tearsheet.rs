//! The `tearsheet` tool's contract (docs §20.1): its arguments (whose
//! schema the model is offered) and its answer (which the offline planner
//! and `mcp serve`'s output schema read). The whole tear sheet is the JSON
//! file the answer names; the answer carries its key rows and summaries.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `tearsheet`: a backtest run, or a buy-and-hold book on the market data.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TearsheetArgs {
    /// A backtest run: its id (e.g. "20261206_230843_c91573"), its
    /// directory, or "last" for the newest run with an equity curve.
    /// Omit it and give symbols for a buy-and-hold book.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Tickers of a buy-and-hold book, e.g. ["SPY"] or ["SPY","TLT"]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbols: Option<Vec<String>>,
    /// Starting weight by name, e.g. {"SPY":0.6,"TLT":0.4} (default: equal); held, not rebalanced
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<BTreeMap<String, f64>>,
    /// First date, YYYY-MM-DD (symbols)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Last date, YYYY-MM-DD (symbols)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// Benchmark ticker for a book (default SPY; "none" for none)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub benchmark: Option<String>,
}

/// One key metric of the answer (the full list is in the JSON file).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TearsheetMetric {
    pub key: String,
    /// quantstats' label.
    pub name: String,
    /// "percent" (a fraction), "ratio" or "count".
    pub unit: String,
    pub value: Option<f64>,
    pub benchmark: Option<f64>,
}

/// One of the worst drawdown periods.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TearsheetDrawdown {
    pub start: String,
    pub trough: String,
    /// Null when not recovered by the end.
    pub recovery: Option<String>,
    /// Negative fraction.
    pub depth: f64,
    pub days: i64,
}

/// One year's return against the benchmark's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TearsheetYear {
    pub year: i32,
    pub strategy: f64,
    pub benchmark: Option<f64>,
}

/// One month's return.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TearsheetMonth {
    /// "YYYY-MM".
    pub month: String,
    pub value: f64,
}

/// `tearsheet`'s answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TearsheetOutput {
    pub status: String,
    pub title: String,
    /// The run directory read, for a backtest run.
    pub run_dir: Option<String>,
    pub start: String,
    pub end: String,
    pub benchmark: Option<String>,
    /// Where the whole tear sheet was written (every metric, table and
    /// series).
    pub json_path: String,
    /// The HTML report's path, when one was written.
    pub report: Option<String>,
    pub metrics: Vec<TearsheetMetric>,
    /// The metric rows in the JSON file.
    pub metric_count: usize,
    pub annual: Vec<TearsheetYear>,
    /// The five worst drawdown periods, worst first.
    pub drawdowns: Vec<TearsheetDrawdown>,
    /// The best and worst month.
    pub best_month: Option<TearsheetMonth>,
    pub worst_month: Option<TearsheetMonth>,
    /// Months with a return, and the share of them up.
    pub months: usize,
    pub positive_months: f64,
    /// Mean gross exposure and annual turnover, when the result has
    /// positions.
    pub mean_gross_exposure: Option<f64>,
    pub annual_turnover: Option<f64>,
    /// The conventions the numbers rest on (docs §20.1).
    pub assumptions: Vec<String>,
    pub notes: Vec<String>,
}
