//! The `sweep` tool's contract (docs §18): its arguments (whose schema the
//! model is offered) and its output (which teams and MCP clients read).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `sweep`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SweepArgs {
    /// The sweep spec (docs §18.1), e.g. {"base": {"codes": ["AAPL"], "start_date": "2005-01-01", "end_date": "2013-12-31", "strategy": {"name": "sma_crossover"}}, "axes": {"strategy.params.fast": [5, 10, 20], "strategy.params.slow": {"from": 30, "to": 60, "step": 10}}, "constraint": "fast < slow", "universe": ["AAPL", "MSFT"], "split": {"in_sample": ["2005-01-01", "2010-12-31"], "out_of_sample": ["2011-01-01", "2013-12-31"]}, "rank_by": "sharpe"}
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Value>,
    /// A spec file (JSON or .toml) in the run directory, instead of `spec`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_file: Option<String>,
    /// The results file in the run directory, .parquet or .csv (default sweep/<plan hash>.parquet); calling again with the same spec and out resumes
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out: Option<String>,
    /// Only plan: the cell count and the estimated time, nothing run
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_only: Option<bool>,
}

/// One ranked cell of the report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SweepRankedOutput {
    pub params: String,
    pub symbol: String,
    /// The ranking metric out-of-sample.
    pub score: Option<f64>,
    pub in_sample: Option<f64>,
}

/// The best cell's deflated Sharpe (docs §17.3, §18.4).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SweepDeflatedOutput {
    pub dsr: Option<f64>,
    pub sharpe_per_period: Option<f64>,
    pub expected_max_sharpe: Option<f64>,
    pub trials: usize,
}

/// A purged k-fold or CPCV sweep's overfitting figures (docs §18.9).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SweepCvOutput {
    /// `purged_kfold` or `cpcv`.
    pub kind: String,
    pub splits: usize,
    pub paths: usize,
    /// Probability of backtest overfitting: the share of splits whose
    /// in-sample best is at or below the out-of-sample median.
    pub pbo: Option<f64>,
    /// The annualised Sharpe of choosing each split's in-sample best, per
    /// path: its mean, lowest and highest.
    pub selected_sharpe_mean: Option<f64>,
    pub selected_sharpe_min: Option<f64>,
    pub selected_sharpe_max: Option<f64>,
}

/// `sweep`'s result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SweepOutput {
    pub status: String,
    pub summary: String,
    pub cells: usize,
    pub parameter_sets: usize,
    pub units: usize,
    pub windows: Vec<String>,
    pub estimated_seconds: f64,
    /// Cells run by this call, and cells an earlier call had finished.
    pub computed: usize,
    pub skipped: usize,
    pub elapsed_s: f64,
    /// The results file (run-dir relative), absent for `plan_only`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub results: Option<String>,
    pub rank_by: String,
    pub ranked_out_of_sample: bool,
    pub top: Vec<SweepRankedOutput>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deflated_sharpe: Option<SweepDeflatedOutput>,
    /// Present when the spec's `split` is a purged k-fold or CPCV.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cv: Option<SweepCvOutput>,
    /// The heatmap in braille, and its SVG and PNG files.
    pub heatmap: String,
    pub heatmap_files: Vec<String>,
    /// Base keys filled from the user's `[backtest]` defaults (costs, lots,
    /// benchmark, cash), as the `backtest` tool fills them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub from_backtest_defaults: Vec<String>,
}
