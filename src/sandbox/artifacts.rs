//! Artifact collection after a run (docs §6.3).
//!
//! The map holds the entries of the spec table whose file exists. Unlike the
//! original, where "required" is computed and then ignored, the missing
//! required names are reported in the result (still not enforced here: the
//! caller decides what a missing `equity.csv` means). Only regular files
//! count: a symlink the child planted pointing elsewhere is not an artifact.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One row of the artifact table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArtifactSpec {
    pub name: &'static str,
    /// Relative to the run dir.
    pub path: &'static str,
    pub required: bool,
    /// Columns the spec names (informational; the engine may write more).
    pub columns: &'static [&'static str],
}

/// The backtest artifact table of docs §6.3.
pub const BACKTEST_ARTIFACTS: &[ArtifactSpec] = &[
    ArtifactSpec {
        name: "equity",
        path: "artifacts/equity.csv",
        required: true,
        columns: &["timestamp", "ret", "equity", "drawdown"],
    },
    ArtifactSpec {
        name: "metrics",
        path: "artifacts/metrics.csv",
        required: true,
        columns: &[
            "final_value",
            "total_return",
            "annual_return",
            "max_drawdown",
            "sharpe",
            "win_rate",
            "trade_count",
        ],
    },
    ArtifactSpec {
        name: "trades",
        path: "artifacts/trades.csv",
        required: true,
        columns: &["timestamp", "code", "side", "price", "qty", "reason"],
    },
    ArtifactSpec {
        name: "positions",
        path: "artifacts/positions.csv",
        required: false,
        columns: &[],
    },
    ArtifactSpec {
        name: "target_positions",
        path: "artifacts/target_positions.csv",
        required: false,
        columns: &[],
    },
    ArtifactSpec {
        name: "run_card_json",
        path: "run_card.json",
        required: false,
        columns: &[],
    },
    ArtifactSpec {
        name: "run_card_md",
        path: "run_card.md",
        required: false,
        columns: &[],
    },
];

/// What was found: name → absolute path, and the required names missing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Collected {
    pub artifacts: BTreeMap<String, PathBuf>,
    pub missing_required: Vec<String>,
}

/// Looks up every entry of `specs` under `run_dir`.
pub fn collect(run_dir: &Path, specs: &[ArtifactSpec]) -> Collected {
    let mut out = Collected::default();
    for spec in specs {
        let p = run_dir.join(spec.path);
        let is_file = std::fs::symlink_metadata(&p)
            .map(|m| m.file_type().is_file())
            .unwrap_or(false);
        if is_file {
            out.artifacts.insert(spec.name.to_string(), p);
        } else if spec.required {
            out.missing_required.push(spec.name.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn existing_files_only_and_missing_required_named() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path();
        std::fs::create_dir_all(run.join("artifacts")).unwrap();
        std::fs::write(run.join("artifacts/equity.csv"), "timestamp,ret\n").unwrap();
        std::fs::write(run.join("run_card.md"), "# card").unwrap();
        std::fs::write(dir.path().join("elsewhere.csv"), "x").unwrap();
        std::os::unix::fs::symlink(
            dir.path().join("elsewhere.csv"),
            run.join("artifacts/trades.csv"),
        )
        .unwrap();
        let c = collect(run, BACKTEST_ARTIFACTS);
        assert_eq!(
            c.artifacts.keys().collect::<Vec<_>>(),
            vec!["equity", "run_card_md"]
        );
        assert_eq!(c.artifacts["equity"], run.join("artifacts/equity.csv"));
        assert_eq!(c.missing_required, vec!["metrics", "trades"]);
    }
}
