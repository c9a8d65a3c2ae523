//! `vibedesk engine RUN_DIR`: the backtest engine itself, the program the
//! `backtest` tool and `vibedesk backtest` start inside the sandbox.
//!
//! It reads `<run_dir>/config.json`, fetches data, runs the strategy and
//! writes the artifacts and run card (docs §7). On success it prints the
//! scalar metrics as one JSON line on stdout (non-finite numbers as null)
//! and exits 0; on any failure it prints `{"error": ..., "error_code": ...}`
//! on stdout and exits 1 (docs §7.1 "Entry script flow"). Unlike the
//! original it never loads a `.env` file (§12.13): everything it needs
//! comes as arguments.

use std::path::PathBuf;

use serde_json::json;

use super::{CliError, exit};
use crate::research::backtest::{RunOptions, run_in_dir};

#[derive(clap::Args, Debug)]
pub struct EngineArgs {
    /// The run directory holding config.json (and code/signal_engine.py).
    pub run_dir: PathBuf,
    /// Market-data cache to read (and write when allowed).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// More folders for the `local` source (repeatable); the run dir's
    /// data/ folder and the run dir itself are always searched.
    #[arg(long = "data-dir")]
    pub data_dirs: Vec<PathBuf>,
    /// Python interpreter (with pandas) for code/signal_engine.py.
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Never use the online data sources.
    #[arg(long)]
    pub offline: bool,
    /// Base URL of Yahoo's chart API (a mirror; tests use a recorded server).
    #[arg(long, value_name = "URL")]
    pub yahoo_base_url: Option<String>,
    /// Base URL of Stooq's CSV download.
    #[arg(long, value_name = "URL")]
    pub stooq_base_url: Option<String>,
}

/// The error goes to stdout as JSON (the sandbox's caller reads it), so the
/// exit code says nothing more on stderr.
pub async fn engine(args: EngineArgs) -> Result<(), CliError> {
    let fail = |code: &str, message: String| {
        println!("{}", json!({"error": message, "error_code": code}));
        Err(CliError::quiet(exit::FAILED))
    };
    let run_dir = match args.run_dir.canonicalize() {
        Ok(p) if p.is_dir() => p,
        Ok(p) => {
            return fail(
                "run_dir_missing",
                format!("{} is not a directory", p.display()),
            );
        }
        Err(e) => {
            return fail(
                "run_dir_missing",
                format!("run directory {}: {e}", args.run_dir.display()),
            );
        }
    };
    let opts = RunOptions {
        cache_dir: args.cache_dir,
        local_dirs: args.data_dirs,
        offline: args.offline,
        python: args.python,
        yahoo_base_url: args.yahoo_base_url,
        stooq_base_url: args.stooq_base_url,
        keep_parsed_bars: false,
    };
    match run_in_dir(&run_dir, &opts).await {
        Ok(summary) => {
            for w in &summary.warnings {
                eprintln!("warning: {w}");
            }
            println!("{}", serde_json::Value::Object(summary.scalars));
            Ok(())
        }
        Err(e) => fail(e.code(), e.to_string()),
    }
}
