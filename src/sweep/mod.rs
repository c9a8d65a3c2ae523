//! Parameter sweeps (docs §18): a spec ([`spec`]) becomes a deterministic,
//! hashed [`plan::Plan`] of cells (a parameter set on a symbol, or on the
//! portfolio), each run over its windows (in-sample, out-of-sample,
//! walk-forward, or the pieces of a purged k-fold or CPCV split: [`cv`])
//! by the local engine ([`local`]) on every core, or shard by
//! shard ([`shard`]) by an engine elsewhere (Ray: [`ray`]); [`collect`] joins
//! shards, [`output`] writes Parquet or CSV, [`report`] ranks by
//! out-of-sample result with the deflated Sharpe and a heatmap.
//!
//! Every cell is the same config run alone through the backtest engine
//! (`research::backtest`): [`eval`] calls that engine's alignment,
//! simulation and metrics, sharing only what does not depend on the
//! parameters (prices, the panel, the risk-free rate) and the indicator
//! series the signals are made of.

pub mod claim;
pub mod collect;
pub mod cv;
pub mod dispatch;
pub mod eval;
pub mod events;
pub mod heatmap;
pub mod journal;
pub mod local;
pub mod output;
pub mod plan;
pub mod ray;
pub mod report;
pub mod rows;
pub mod shard;
pub mod spec;

pub use collect::{CollectError, collect};
pub use events::SweepEvent;
pub use plan::Plan;
pub use rows::{Results, Row};
pub use spec::{Spec, SpecError};

/// Why a sweep could not run; each names what to fix.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("{0}")]
    Spec(#[from] SpecError),
    #[error("{0}")]
    Plan(String),
    #[error("{0}")]
    Data(String),
    #[error("{0}")]
    Collect(#[from] CollectError),
    #[error("cannot {0}")]
    Io(#[from] crate::fsio::IoError),
    #[error("{0}")]
    Output(String),
    #[error(
        "the sweep was cancelled: {done} of {total} cells finished and kept; run it again to resume"
    )]
    Cancelled { done: usize, total: usize },
    #[error("{0}")]
    Engine(String),
    /// The Ray engine could not reach the cluster or its job failed (§19).
    #[error("{0}")]
    Ray(String),
    /// Another run holds the results file's lock (§18.3).
    #[error("{0}")]
    Busy(String),
    /// The results file's folder holds another plan (§18.3).
    #[error("{0}")]
    OtherPlan(String),
}

impl SweepError {
    /// A short machine-readable code for tool results and `--json`.
    pub fn code(&self) -> &'static str {
        match self {
            SweepError::Spec(_) => "invalid_spec",
            SweepError::Plan(_) => "invalid_plan",
            SweepError::Data(_) => "no_data",
            SweepError::Collect(_) => "incomplete_shards",
            SweepError::Io(_) => "io_error",
            SweepError::Output(_) => "output_failed",
            SweepError::Cancelled { .. } => "cancelled",
            SweepError::Engine(_) => "engine_unavailable",
            SweepError::Ray(_) => "ray_failed",
            SweepError::Busy(_) => "sweep_busy",
            SweepError::OtherPlan(_) => "out_has_another_plan",
        }
    }

    pub(crate) fn io<'a>(
        action: &'static str,
        path: &'a std::path::Path,
    ) -> impl FnOnce(std::io::Error) -> SweepError + 'a {
        move |e| SweepError::Io(crate::fsio::IoError::new(action, path, e))
    }
}
